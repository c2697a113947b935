"""HeartbeatTrigger: the rest of a heartbeat DAG window's heartbeats, emitted on the triggerer.

MM2's heartbeat task writes a heartbeat every `emit.heartbeats.interval.seconds` (1 s) for as long
as it runs. A task doing the same for a 60 s tick held a worker slot for the whole tick, so every
flow at rest pinned a slot forever. The task now emits the first heartbeat (which creates the
topics) and defers; this trigger sends the others on schedule from the triggerer's event loop and
hands them back to the task, which reports the replication latency. The Kafka calls block
(librdkafka acknowledgements), so each runs in a thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class HeartbeatTrigger(BaseTrigger):
    """Emissions 1..count-1 of a tick whose emission 0 (`first`, one per cluster) happened at
    `start` (epoch seconds); its event hands every emission of the tick back to the task."""

    def __init__(
        self,
        flow_name: str,
        config_path: str | None,
        start: float,
        count: int,
        first: list[dict[str, Any]],
        worker_s: float = 0.0,
    ) -> None:
        super().__init__()
        self.flow_name, self.config_path = flow_name, config_path
        self.start, self.count, self.first, self.worker_s = start, count, first, worker_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "flow_name": self.flow_name,
                "config_path": self.config_path,
                "start": self.start,
                "count": self.count,
                "first": self.first,
                "worker_s": self.worker_s,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from mirrorflow.clients import FlowClients
        from mirrorflow.errors import MirrorflowError
        from mirrorflow.groups.heartbeat import HeartbeatSender
        from mirrorflow_airflow.hooks import MirrorflowHook

        emitted: list[dict[str, Any]] = list(self.first)
        clients: FlowClients | None = None
        try:
            cfg = await asyncio.to_thread(lambda: MirrorflowHook(self.config_path).get_conn())
            flow = cfg.flow(self.flow_name)
            interval = float(flow.props["emit.heartbeats.interval.seconds"])
            clients = FlowClients(cfg, flow)
            sender = HeartbeatSender(cfg, flow, clients, {e["cluster"] for e in self.first})
            for i in range(1, self.count):
                await asyncio.sleep(max(0.0, self.start + i * interval - time.time()))
                emitted += [asdict(e) for e in await asyncio.to_thread(sender.send)]
        except MirrorflowError as exc:  # its message names cluster and topic, never a secret
            yield TriggerEvent({"emitted": emitted, "error": str(exc), "worker_s": self.worker_s})
            return
        finally:
            if clients is not None:
                await asyncio.to_thread(clients.close)
        yield TriggerEvent({"emitted": emitted, "error": None, "worker_s": self.worker_s})
