"""What verify reads: the flow's state and both clusters' offsets, topic IDs and configs in a few
batched calls (`read_inputs`, before any partition is checked), then each side's records lazily
(`RecordReader`, while a partition is walked). Nothing here judges what it reads (ops.verify.verify)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients, Side
from mirrorflow.errors import StateError
from mirrorflow.kafka.log_reader import LogReader
from mirrorflow.kafka.topic_admin import compacted_topics, list_offsets, topic_ids
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.verify.verify_walk import Rec
from mirrorflow.replication.plan.planner import source_offsets, source_partitions
from mirrorflow.replication.plan.when import When
from mirrorflow.state.flow_state import flow_state, read_controls
from mirrorflow.state.kept_apart import kept_ranges
from mirrorflow.state.names import VERIFY, reader_group
from mirrorflow.state.offset_map import PartitionMap
from mirrorflow.state.records import Progress, VerifiedMark
from mirrorflow.state.store import StateStore
from mirrorflow.state.verified import read_marks

LATEST = 1 << 62  # "no upper bound" for a window
Key = tuple[str, int]


@dataclass
class VerifyInputs:
    """Everything verify knows before it checks a partition, keyed by source (topic, partition)."""

    keys: list[Key]  # the partitions to check: on the source now, or with progress
    on_source: dict[Key, str]  # the partitions on the source now -> their remote topic
    progress: dict[Key, Progress]
    maps: dict[Key, PartitionMap]
    starts: dict[Key, int]  # source log start
    ends: dict[Key, int]  # source end
    lo: dict[Key, int]  # the window as source offsets
    hi: dict[Key, int]
    remote: dict[Key, str]  # the remote topic of each key
    src_ids: dict[str, str]  # topic -> topic ID, on each side
    tgt_ids: dict[str, str]
    compacted_src: set[str]  # topics whose cleanup.policy includes compact
    compacted_tgt: set[str]
    kept: dict[Key, tuple[tuple[int, int], ...]]  # (remote topic, partition) -> target ranges a failback kept
    marks: dict[Key, VerifiedMark | StateError]  # stored 'verified up to' marks (read when needed)
    target_ends: dict[Key, int]  # (remote topic, partition) -> end, for the partitions with a mark
    failed_over: bool = False  # the flow's failover stopped it: it copies nothing until a round trip ends

    def src_id(self, k: Key) -> str:
        return self.src_ids.get(k[0], "")

    def tgt_id(self, k: Key) -> str:
        return self.tgt_ids.get(self.remote[k], "")


def read_inputs(
    clients: FlowClients,
    pattern: re.Pattern[str] | None,
    lo: When,
    hi: When,
    with_marks: bool,
) -> VerifyInputs | None:
    """The inputs of the flow's partitions whose source topic the flow replicates and `pattern`
    matches (None: there are none); `with_marks`: read their 'verified up to' marks too."""
    flow, filters = clients.flow, FlowFilters.for_flow(clients.flow)

    def wanted(topic: str) -> bool:
        return filters.should_replicate_topic(topic) and (pattern is None or pattern.fullmatch(topic) is not None)

    store = StateStore(clients)
    on_source = {(t, p): r for t, p, r in source_partitions(flow, clients.admin("source"))}
    progress = {k: v for k, v in store.progress().items() if wanted(k[0])}
    keys = sorted({k for k in on_source if wanted(k[0])} | set(progress))
    if not keys:
        return None
    maps = store.offset_map([k for k in keys if k in progress])
    live = [k for k in keys if k in on_source]
    starts = source_offsets(clients, live, OffsetSpec.earliest())
    ends = source_offsets(clients, live, OffsetSpec.latest())
    lo_of, hi_of = _bound(clients, lo, live, ends, progress), _bound(clients, hi, live, ends, progress)
    remote = {k: _remote(filters, k, progress.get(k), on_source) for k in keys}
    src_ids = topic_ids(clients.admin("source"), clients.connection("source"), {t for t, _ in live})
    tgt_ids = topic_ids(clients.admin("target"), clients.connection("target"), set(remote.values()))
    compacted_src = _compacted(clients, "source", {t for t, _ in live})
    compacted_tgt = _compacted(clients, "target", set(remote.values()) & set(tgt_ids))
    controls = read_controls(clients, ["failback", "failover", "flow-state"])
    kept = {k: tuple(v) for k, v in kept_ranges(controls.get("failback")).items()}
    marks = read_marks(clients, [k for k in live if k in progress]) if with_marks else {}
    target_ends = _target_ends(clients, [(remote[k], k[1]) for k in marks], tgt_ids)
    return VerifyInputs(
        keys,
        on_source,
        progress,
        maps,
        starts,
        ends,
        lo_of,
        hi_of,
        remote,
        src_ids,
        tgt_ids,
        compacted_src,
        compacted_tgt,
        kept,
        marks,
        target_ends,
        flow_state(clients, controls).left_by(controls.get("failover")),
    )


def _remote(filters: FlowFilters, k: Key, prog: Progress | None, on_source: dict[Key, str]) -> str:
    if prog is not None and prog.target_topic:
        return prog.target_topic
    return on_source.get(k) or filters.remote_topic(k[0])


def _bound(
    clients: FlowClients, when: When, keys: list[Key], ends: dict[Key, int], progress: dict[Key, Progress]
) -> dict[Key, int]:
    """The window bound as a source offset per partition (a time: the first offset at or after
    it; `start`: where the flow's copy of the partition began)."""
    if when.kind == "start":
        return {k: progress[k].covered[0][0] if k in progress and progress[k].covered else 0 for k in keys}
    if when.kind == "earliest":
        return {k: 0 for k in keys}
    if when.kind == "latest":
        return {k: LATEST for k in keys}
    if when.kind == "offset":
        return {k: when.value for k in keys}
    found = source_offsets(clients, keys, OffsetSpec.for_timestamp(when.value))
    return {k: (off if off >= 0 else ends[k]) for k, off in found.items()}


def _compacted(clients: FlowClients, side: Side, topics: set[str]) -> set[str]:
    """The topics whose cleanup.policy includes compact."""
    return compacted_topics(clients.admin(side), clients.connection(side), topics)


def _target_ends(clients: FlowClients, tps: list[Key], tgt_ids: dict[str, str]) -> dict[Key, int]:
    """The ends of the remote partitions that have a mark (whether the target still holds what a
    mark verified)."""
    tps = [tp for tp in tps if tp[0] in tgt_ids]
    if not tps:
        return {}
    admin, conn = clients.admin("target"), clients.connection("target")
    return list_offsets(admin, conn, tps, OffsetSpec.latest(), committed=False)


class RecordReader:
    """Each side's committed records, read lazily, through one reader per side (verify's own group)."""

    def __init__(self, clients: FlowClients, read_timeout: float) -> None:
        self.clients, self.read_timeout = clients, read_timeout
        self._readers: dict[Side, LogReader] = {}

    def reader(self, side: Side) -> LogReader:
        if side not in self._readers:
            group = reader_group(self.clients.flow, VERIFY)
            self._readers[side] = self.clients.reader(side, group=group)
        return self._readers[side]

    def records(self, side: Side, topic: str, partition: int, a: int, b: int) -> Iterator[Rec]:
        """The committed records of [a, b), read lazily (the read starts with the first record asked)."""
        if b <= a:
            return iter(())
        messages = self.reader(side).read(
            topic, {partition: a}, self.read_timeout, wait_for_topic=False, stops={partition: b}
        )
        return map(Rec.of, messages)
