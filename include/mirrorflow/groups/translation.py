"""Where a committed source group offset resumes on the target: exact translation through the offset map.

A committed offset `g` means "the next record this group reads is at offset `g` or later". The
offset map on the target (state.offset_map) says where every copied record landed; a translation
is the target offset of the first copied record at or after `g`, or, where the map forgot
(bounded by `offset.map.max.runs`) or a backfill reordered the partition, an earlier position
(`reread`), never a later one. Pure, apart from `load_maps`, which reads the map.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from mirrorflow.clients import FlowClients
from mirrorflow.groups.group_offsets import CommittedOffset
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.mm2.formats import Checkpoint
from mirrorflow.mm2.policy import DefaultReplicationPolicy
from mirrorflow.reporting import Report, table
from mirrorflow.state.store import StateStore

# Translation statuses that come from the offset map, plus ours for topics the flow skips.
NOT_REPLICATED = "not-replicated"


class Translator(Protocol):
    """What checkpointing needs of offset_map.PartitionMap."""

    def translate(self, source_offset: int) -> Any: ...

    def rereads(self, source_offset: int, target_offset: int) -> int: ...


@dataclass(frozen=True, slots=True)  # slots: a pass builds 100,000s of them
class TranslatedOffset:
    """A committed source offset and where the same position is on the target."""

    group: str
    source_topic: str
    partition: int
    source_offset: int
    target_topic: str
    target_offset: int | None  # None: no translation (nothing copied, topic not replicated, forgotten)
    status: str  # exact | end | ahead | before | gap | reread | pruned | none | not-replicated
    missing: int = 0  # offsets the target consumer will never see (before/gap) or not yet (ahead)
    metadata: str = ""
    reordered: bool = False  # the partition's map places records out of source order (a backfill)
    reread: int = 0  # at most this many records already read are read again from target_offset

    def checkpoint(self) -> Checkpoint | None:
        """The MM2 checkpoint for this offset, None when there is no translation (no checkpoint,
        as MM2 since 3.3 emits none for a partition without offset syncs)."""
        if self.target_offset is None or self.target_offset < 0 or self.status == NOT_REPLICATED:
            return None
        return Checkpoint(
            self.group, self.target_topic, self.partition, self.source_offset, self.target_offset, self.metadata
        )


def rename_topic(policy: DefaultReplicationPolicy, source: str, target: str, topic: str) -> str:
    """MirrorCheckpointTask.renameTopicPartition: the downstream name of a source topic."""
    if policy.topic_source(topic) == target:
        return policy.original_topic(topic)
    return policy.format_remote_topic(source, topic)


class TopicRules:
    """The flow's per-topic decisions (replicated? downstream name?), each worked out once per
    topic: a pass over 1,000 groups x 100 partitions asks them 100,000 times of a few topics."""

    def __init__(self, filters: FlowFilters) -> None:
        self.filters = filters
        self._replicated: dict[str, bool] = {}
        self._renamed: dict[str, str] = {}

    def replicated(self, topic: str) -> bool:
        r = self._replicated.get(topic)
        if r is None:
            r = self._replicated[topic] = self.filters.should_replicate_topic(topic)
        return r

    def renamed(self, topic: str) -> str:
        r = self._renamed.get(topic)
        if r is None:
            f = self.filters
            r = self._renamed[topic] = rename_topic(f.policy, f.source, f.target, topic)
        return r


def upstream_of(policy: DefaultReplicationPolicy, source: str, downstream: str) -> str | None:
    """The source topic a checkpoint's downstream topic was renamed from, None if not from `source`."""
    if policy.topic_source(downstream) != source:
        return None
    return policy.upstream_topic(downstream)


def translate_committed(
    filters: FlowFilters, offsets: Iterable[CommittedOffset], maps: Mapping[tuple[str, int], Translator]
) -> list[TranslatedOffset]:
    """Translate committed source offsets through the offset map (pure).

    `maps` is keyed by (SOURCE topic, partition). Offsets on topics the flow does not replicate
    get status `not-replicated`; partitions without any copied data get `none`.
    """
    out: list[TranslatedOffset] = []
    rules = TopicRules(filters)
    # groups that consume the same partitions often sit at the same offset: translate each once
    done: dict[tuple[str, int, int], Any] = {}
    for o in sorted(offsets, key=lambda o: (o.group, o.topic, o.partition)):
        if o.offset < 0:
            continue  # no committed position (librdkafka's OFFSET_INVALID)
        target_topic = rules.renamed(o.topic)
        if not rules.replicated(o.topic):
            out.append(
                TranslatedOffset(
                    o.group, o.topic, o.partition, o.offset, target_topic, None, NOT_REPLICATED, 0, o.metadata
                )
            )
            continue
        pm = maps.get((o.topic, o.partition))
        if pm is None:
            out.append(
                TranslatedOffset(o.group, o.topic, o.partition, o.offset, target_topic, None, "none", 0, o.metadata)
            )
            continue
        t = done.get((o.topic, o.partition, o.offset))
        if t is None:
            t = done[(o.topic, o.partition, o.offset)] = pm.translate(o.offset)
        out.append(
            TranslatedOffset(
                o.group,
                o.topic,
                o.partition,
                o.offset,
                target_topic,
                t.target_offset,
                t.status,
                t.missing,
                o.metadata,
                bool(getattr(pm, "reordered", False)),
                getattr(t, "reread", 0),
            )
        )
    return out


def load_maps(clients: FlowClients, partitions: Iterable[tuple[str, int]]) -> Mapping[tuple[str, int], Translator]:
    """The offset map of the given SOURCE partitions (read from the target's state)."""
    parts = sorted(set(partitions))
    return StateStore(clients).offset_map(parts) if parts else {}


# -- how translations read ----------------------------------------------------------------------------
STATUS_NOTES = {
    "exact": "resumes at the next unread record",
    "end": "caught up: resumes at the end of the copied data",
    "ahead": "not yet replicated: the target has not received the missing records yet",
    "before": "the missing records were never replicated (source retention / initial position)",
    "gap": "the missing offsets were never copied (deleted before copy)",
    "reread": "the offset map no longer knows (or cannot express in one target offset) where the next record "
    "is: resumes earlier, re-reading at most `reread` records, never skipping one",
    "pruned": "below the source's log start and every group (moved there by hand): resumes at the nearest "
    "known position at or before it, re-reading at most `reread` records (no target: forgotten by an older "
    "mirrorflow, no checkpoint)",
    "none": "nothing copied yet for this partition: no checkpoint",
    "not-replicated": "the flow does not replicate this topic",
}
TRANSLATION_HEADERS = (
    "source topic",
    "partition",
    "source offset",
    "target topic",
    "target offset",
    "status",
    "missing",
    "reread",
)


def translation_table(rows: Iterable[TranslatedOffset], actions: Sequence[str] | None = None) -> str:
    """One line per partition: where the group is on the source and where it resumes on the target
    (with `actions`: what the checkpoint pass did with each)."""
    rows = list(rows)
    headers = list(TRANSLATION_HEADERS) + (["checkpoint"] if actions is not None else [])
    body = []
    for i, r in enumerate(rows):
        line: list[object] = [
            r.source_topic,
            r.partition,
            r.source_offset,
            r.target_topic,
            r.target_offset,
            r.status,
            r.missing,
            r.reread,
        ]
        if actions is not None:
            line.append(actions[i])
        body.append(line)
    return "\n".join(table(headers, body))


def status_notes(rows: Iterable[TranslatedOffset]) -> list[str]:
    """A short explanation of every non-exact status that occurs, in table order."""
    seen: list[str] = []
    for r in rows:
        if r.status != "exact" and r.status not in seen:
            seen.append(r.status)
    return [f"{s}: {STATUS_NOTES.get(s, s)}" for s in seen]


@dataclass(frozen=True)
class Translation(Report):
    """Where `group` resumes on the target, per partition (`mirrorflow translate`); its JSON is the rows."""

    group: str
    flow: str
    rows: Sequence[TranslatedOffset]

    def lines(self) -> list[str]:
        out = [f"group {self.group}, flow {self.flow}", *translation_table(self.rows).split("\n")]
        return out + [f"  {note}" for note in status_notes(self.rows)]

    def to_json(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.rows]
