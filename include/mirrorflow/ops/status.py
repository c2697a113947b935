"""Each flow at a glance: per-partition progress and lag, read from the target's state topics.

The status page (plugins/mirrorflow_status.py) and `mirrorflow status` show this. It reads only
what replication itself wrote (the progress topic) plus the source's end offsets, so it is right
even when the Airflow database is gone.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.planner import source_offsets
from mirrorflow.state.store import StateStore


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    next: int  # next source offset to copy (-1: nothing copied yet)
    end: int  # source end (last stable offset)
    records: int
    lost: int

    @property
    def lag(self) -> int:
        return max(0, self.end - max(self.next, 0))


@dataclass
class FlowStatus:
    flow: str
    enabled: bool
    exactly_once: bool
    partitions: list[PartitionStatus] = field(default_factory=list)
    last_copy_ms: int = 0
    error: str | None = None

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["lag"] = self.lag
        d["records"] = self.records
        for p, raw in zip(self.partitions, d["partitions"]):
            raw["lag"] = p.lag
        return d


def flow_status(cfg: Config, flow: FlowConfig) -> FlowStatus:
    """Progress vs. source end for every partition the flow has copied; errors are reported, not raised."""
    status = FlowStatus(flow.name, flow.enabled, flow.exactly_once)
    try:
        with FlowClients(cfg, flow) as clients:
            progress = StateStore(clients).progress(timeout=30)
            ends = source_offsets(clients, sorted(progress), OffsetSpec.latest()) if progress else {}
    except MirrorflowError as exc:
        status.error = str(exc)
        return status
    for (topic, partition), p in sorted(progress.items()):
        status.partitions.append(PartitionStatus(topic, partition, p.next, ends.get((topic, partition), p.next),
                                                 p.records, p.lost))
        status.last_copy_ms = max(status.last_copy_ms, p.updated)
    return status


def render_text(statuses: list[FlowStatus], now_ms: int | None = None) -> str:
    now_ms = now_ms or int(time.time() * 1000)
    lines = []
    for s in statuses:
        age = f"{(now_ms - s.last_copy_ms) / 1000:.0f}s ago" if s.last_copy_ms else "never"
        head = f"{s.flow}: {'enabled' if s.enabled else 'disabled'}, {'exactly-once' if s.exactly_once else 'at-least-once'}"
        if s.error:
            lines.append(f"{head}, ERROR: {s.error}")
            continue
        lines.append(f"{head}, {s.records} records copied, lag {s.lag}, last copy {age}")
        for p in s.partitions:
            lost = f", {p.lost} lost to source retention" if p.lost else ""
            lines.append(f"  {p.topic}-{p.partition}: next {p.next}, end {p.end}, lag {p.lag}{lost}")
    return "\n".join(lines)
