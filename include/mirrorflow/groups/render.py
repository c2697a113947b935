"""Where a group resumes according to its checkpoints alone, in words people read.

`resume_note` is what the plans people approve (a failover's, a drill's) and the status page say
after a group's resume position; `CheckpointedOffsets` is `mirrorflow translate --from-checkpoints`
(the target alone, as after losing the source). Every consumer-group result is a
`reporting.Report` next to what it reports: `checkpoint.CheckpointRun`, `offset_sync.GroupSyncRun`,
`translation.Translation`, `heartbeat.HeartbeatRun`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.groups.offset_sync import PartitionSync
from mirrorflow.groups.translation import STATUS_NOTES
from mirrorflow.mm2.remote_cluster import OffsetAndMetadata, TopicPartitionKey
from mirrorflow.reporting import Report, table

# a checkpoint whose upstream offset the offset map on the target cannot place
UNPLACED = (
    "the offset map does not place this checkpoint "
    "(MirrorMaker 2 wrote it, or an older mirrorflow pruned the map there)"
)


def resume_note(x: PartitionSync) -> str:
    """How a group resumes at its checkpoint, for the plans people approve (failover, drill) and the
    status page: empty when exactly at its next unread record (or kept at its offset on the target,
    which is ahead)."""
    if x.target_offset is not None and x.target_offset > x.checkpoint_offset:
        return ""
    if x.reread is None:
        return f" (unchecked: {UNPLACED})"
    if x.reread:
        return f" (earlier: re-reads at most {x.reread:,} record(s) it had read, skips none)"
    return ""


@dataclass(frozen=True)
class CheckpointedOffsets(Report):
    """Where a group resumes on the target according to the checkpoints there alone, and at most how
    many records it reads again there (`rereads`, from the offset map on the target; None shown as
    '?': unknown). Its JSON is one object per partition."""

    offsets: Mapping[TopicPartitionKey, OffsetAndMetadata]
    rereads: Mapping[tuple[str, int], int | None] = field(default_factory=dict)

    def reread(self, tp: TopicPartitionKey) -> int | None:
        return self.rereads.get((tp.topic, tp.partition), 0)

    def lines(self) -> list[str]:
        ordered = sorted(self.offsets.items())
        shown = [
            (tp.topic, tp.partition, om.offset, "?" if self.reread(tp) is None else self.reread(tp))
            for tp, om in ordered
        ]
        out = table(("target topic", "partition", "target offset", "reread"), shown)
        if any(self.reread(tp) for tp, _ in ordered):
            out.append(f"  reread: {STATUS_NOTES['reread']}")
        if any(self.reread(tp) is None for tp, _ in ordered):
            out.append(f"  ?: {UNPLACED}: what it reads again is not known")
        return out

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {
                "target_topic": tp.topic,
                "partition": tp.partition,
                "target_offset": om.offset,
                "metadata": om.metadata,
                "reread": self.reread(tp),
            }
            for tp, om in sorted(self.offsets.items())
        ]
