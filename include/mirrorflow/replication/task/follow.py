"""When a continuous copy stops: the run's deadline, the flow's state, SIGTERM, a stop file.

A continuous run (`replication.run.continuous`) hands its copy tasks a `FollowSpec` (replication.plan.run_plan):
the deadline (wall clock, so Spark executors on other hosts agree), the micro-batch interval and a
stop file in the run directory. Each task (a Spark task or a thread of `copy_direct`) builds one
`StopWatch` from it, whose thread looks at the stop file every 0.2 s and reads the flow's state
(target) every `continuous.state.check.seconds`; the copy loops only read a flag between source
polls (`reader.Follow.stop`), so a stop costs nothing on the copy path. A stop ends each
partition's current transaction after what it has read (committed, never left open).

In this process, SIGTERM/SIGINT set `STOP_REQUESTED` (direct mode) and create the stop file
(Spark tasks, which run in other processes of this host). A Spark master on other hosts does not
see the file: there a flow pause or the deadline ends the run.

The deadline counts from when the copy hands out its tasks (`FollowSpec.started`). A task that begins
after it (no Spark task slot was free for it: a cluster with fewer slots than tasks, or a server whose
slots other jobs hold) would read nothing and its partitions would say `ok` run after run: it fails
them instead, saying why (`began_late`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from mirrorflow.clients import FlowClients
from mirrorflow.replication.plan.run_plan import FollowSpec, Unit
from mirrorflow.replication.task.copier import UnitResult, u_where
from mirrorflow.replication.task.reader import Follow
from mirrorflow.state.flow_state import flow_state

log = logging.getLogger(__name__)

STOP_REQUESTED = threading.Event()  # set by this process's SIGTERM handler (see continuous.stop_on_signals)
FILE_CHECK_S = 0.2


class StopWatch:
    """One task's view of "stop now": a flag set by a watcher thread, or the deadline passed."""

    def __init__(self, clients: FlowClients, spec: FollowSpec) -> None:
        self.clients, self.spec = clients, spec.started(time.time())  # started by Plan.head: kept
        self.deadline = self.spec.deadline or 0.0
        self.reason: str | None = None
        self.requested_at = 0.0  # time.time() of `request`
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self) -> bool:
        return self._stop.is_set() or STOP_REQUESTED.is_set() or time.time() >= self.deadline

    def request(self, reason: str) -> None:
        if not self._stop.is_set():
            self.reason, self.requested_at = reason, time.time()
            self._stop.set()

    def why_stopped(self) -> str | None:
        """Why the task stopped before the run's deadline (a flow pause or stop, a stop request), for
        its report; None when it followed to the deadline."""
        if self.reason is not None and self.requested_at < self.deadline:
            return self.reason
        if STOP_REQUESTED.is_set() and time.time() < self.deadline:
            return self._stop_requested()
        return None

    def _stop_requested(self) -> str:
        """A stop request (SIGTERM or SIGINT), seen in this process or as the stop file."""
        return f"flow {self.clients.flow.name}: stop requested (SIGTERM or SIGINT to the run)"

    def start(self) -> StopWatch:
        self._thread = threading.Thread(target=self._watch, name="mirrorflow-stopwatch", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=self.clients.admin_timeout)

    def _watch(self) -> None:
        flow = self.clients.flow
        next_check = time.monotonic() + self.spec.check_s
        stop_file = Path(self.spec.stop_file) if self.spec.stop_file else None
        while not self._done.wait(FILE_CHECK_S) and not self._stop.is_set():
            if stop_file is not None and stop_file.exists():
                self.request(self._stop_requested())
            elif time.monotonic() >= next_check:
                next_check = time.monotonic() + self.spec.check_s
                try:
                    skip = flow_state(self.clients).skip_reason(flow.name, "copy")
                except Exception as exc:  # noqa: BLE001 - the target is away: the copy rides it out
                    log.warning("flow %s: cannot read the flow state (%s); will look again", flow.name, exc)
                    continue
                if skip:
                    self.request(skip)


def began_late(spec: FollowSpec | None, units: list[Unit], tasks_max: int, now: float) -> list[UnitResult]:
    """The results of a continuous run's task that begins past the run's deadline (none otherwise):
    each of its partitions failed, named, its progress untouched (the next run copies it)."""
    if spec is None or spec.deadline is None or now < spec.deadline:
        return []
    why = (
        f"not read: its copy task began {now - spec.deadline:.0f} s after the continuous run's deadline "
        f"(no Spark task slot was free for it until then): give the copy job at least tasks.max "
        f"({tasks_max}) task slots, or lower tasks.max"
    )
    return [
        UnitResult(
            u.topic,
            u.partition,
            u.target_topic,
            "failed",
            u.start,
            u.end,
            error=f"{u_where(u)}: {why}",
            error_type="LateTask",
            started=now,
            finished=now,
        )
        for u in units
    ]


@contextlib.contextmanager
def following(clients: FlowClients, spec: FollowSpec | None) -> Iterator[Follow | None]:
    """The `Follow` of one copy task of a continuous plan (None for a one-shot plan), with its
    watcher running while the task copies."""
    if spec is None:
        yield None
        return
    watch = StopWatch(clients, spec).start()
    try:
        yield Follow(watch, spec.batch_ms / 1000.0, watch.why_stopped)
    finally:
        watch.close()
