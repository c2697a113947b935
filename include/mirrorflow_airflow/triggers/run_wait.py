"""RunWaitTrigger: what the start of a replication run waits for, waited for on the triggerer.

A replicate or backfill DAG run begins by waiting for both clusters to answer (a broker restarting
as the run starts) and, for a run of `airflow backfill create`, for the flow's lease another run
holds (Airflow starts a backfill's runs side by side). Either wait can last minutes: a task doing it
held a worker slot meanwhile. The task now tries once, and when it would wait, defers to this
trigger, which polls on the triggerer (the Kafka calls block: each runs in a thread) until what it
waits for is there or its deadline passes; the task then begins again (another run may have taken
the lease in between: it waits again, up to the same deadline).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

CLUSTERS, LEASE = "clusters", "lease"
# The trigger looks first this long after it starts (the task had just looked). Airflow 3.3 fails a resumed
# task when the scheduler takes in the executor's "success" of the attempt that deferred only after the
# resumed attempt is running (apache/airflow#72716): a lease freed a second after the task deferred resumed
# it within 4 s, and that event came 5.4 s after the deferral on a loaded machine (a full run, 2026-12-01).
SETTLE_S = 10.0


class RunWaitTrigger(BaseTrigger):
    """Poll every `poll_s`, the first time after SETTLE_S, until `what` (CLUSTERS: both of the flow's
    clusters answer; LEASE: nobody but `owner` holds the flow's lease) or `deadline` (epoch s). Its
    event: `ready`, and `why` not (the last error, or who holds the lease since when)."""

    def __init__(
        self, flow_name: str, config_path: str | None, what: str, owner: str, deadline: float, poll_s: float = 5.0
    ) -> None:
        super().__init__()
        self.flow_name, self.config_path, self.what, self.owner = flow_name, config_path, what, owner
        self.deadline, self.poll_s = deadline, poll_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "flow_name": self.flow_name,
                "config_path": self.config_path,
                "what": self.what,
                "owner": self.owner,
                "deadline": self.deadline,
                "poll_s": self.poll_s,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        await asyncio.sleep(max(0.0, min(SETTLE_S, self.deadline - time.time())))
        while True:
            why = await asyncio.to_thread(self.missing)
            left = self.deadline - time.time()
            if not why or left <= 0:
                yield TriggerEvent({"ready": not why, "why": why})
                return
            await asyncio.sleep(min(self.poll_s, left))

    def missing(self) -> str:
        """What is still missing ("" : nothing)."""
        from mirrorflow.clients import FlowClients
        from mirrorflow.errors import MirrorflowError
        from mirrorflow.state.run_lease import blocking_holder
        from mirrorflow_airflow.hooks import MirrorflowHook

        try:
            cfg, flow = MirrorflowHook(self.config_path).get_flow(self.flow_name)
            with FlowClients(cfg, flow) as clients:
                if self.what == CLUSTERS:  # each answers (ClusterError naming the one that does not)
                    for side in ("target", "source"):
                        clients.admin(side)
                    return ""
                holder = blocking_holder(clients, self.owner)
                return "" if holder is None else holder.describe(flow.name)
        except MirrorflowError as exc:  # its message names the cluster, never a secret
            return str(exc)
