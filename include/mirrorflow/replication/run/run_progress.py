"""How far a run in progress has got: its planned units against the flow's committed progress.

The copy may run in another process (spark-submit, a Spark Connect server), so the only common
truth is the progress topic on the target: a poller re-reads it every few seconds and reports the
offsets committed inside the planned units. Used by the CLI's progress bar (cli/progress.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.plan.run_plan import Unit
from mirrorflow.state.records import Progress
from mirrorflow.state.store import StateStore


def copied_offsets(units: Iterable[Unit], progress: dict[tuple[str, int], Progress]) -> int:
    """Offsets of `units` the committed progress already covers (pure)."""
    done = 0
    for u in units:
        p = progress.get((u.topic, u.partition))
        if p is None:
            continue
        if p.covered:
            done += sum(max(0, min(b, u.end) - max(a, u.start)) for a, b in p.covered)
        else:  # progress without a ledger: everything below `next` is copied
            done += max(0, min(p.next, u.end) - u.start)
    return done


class ProgressPoller:
    """Calls `on_update(copied)` every `interval` seconds until stopped, from its own thread with
    its own clients; a failed read skips one update (a progress bar never fails a run)."""

    def __init__(
        self,
        cfg: Config,
        flow: FlowConfig,
        units: list[Unit],
        on_update: Callable[[int], None],
        interval: float = 2.0,
    ) -> None:
        self.cfg, self.flow, self.units, self.on_update, self.interval = cfg, flow, units, on_update, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"progress-{flow.id}", daemon=True)

    def start(self) -> ProgressPoller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval + 30)

    def _loop(self) -> None:
        keys = sorted({(u.topic, u.partition) for u in self.units})
        with FlowClients(self.cfg, self.flow) as clients:
            store = StateStore(clients)
            while True:
                stopping = self._stop.is_set()  # one last read after stop(): the bar ends on the truth
                try:
                    done = copied_offsets(self.units, store.progress(keys, timeout=30))
                except MirrorflowError:
                    done = -1
                if done >= 0:  # units are what the ledger did not cover when planned: all of it is this run's
                    self.on_update(done)
                if stopping:
                    return
                self._stop.wait(self.interval)
