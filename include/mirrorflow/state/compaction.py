"""Folding the offset map: snapshots written, the offset-map topic truncated below what they hold.

A fold (run at the end of a checkpoint pass, `groups.map_upkeep`) first reads the snapshots and
the tail without a transaction; when no snapshot would change and nothing is left to truncate, that
is all (an idle flow's pass costs one read). Otherwise, for the whole flow:

1. `init_transactions` with the flow's fold transactional.id: a fold still running elsewhere is
   fenced, so two folds never interleave (the one that commits read everything the other did);
2. read the snapshots and the tail (`StateStore.read_map`, read_committed; each offset-map
   partition up to the high watermark it had when the read began);
3. per source partition: the snapshot plus its tail entries, pruned below the floor the caller
   gives (offsets no translation can still need) and to at most `offset.map.max.runs` runs above
   the map's floor, keeping below it the runs the groups' committed offsets (the caller's pins)
   sit in and landmarks (state.landmarks);
4. in ONE transaction: every snapshot that changed, then per offset-map partition a marker "folded
   below <the end read>" (last, so a reader that sees a marker saw the snapshots before it);
5. after the commit, `delete_records` on each offset-map partition below the end read.

A crash before the commit leaves the old snapshots and the whole tail (the transaction is aborted
by the next fold's init_transactions or after its timeout); a crash after it leaves entries that
are already folded in, which readers skip (each snapshot says up to where it folded) and the next
fold truncates. Translation therefore never changes at or above the floor (see offset_map.Folded),
nor at a pinned offset, and below the floor it resumes at an earlier known position, never later.
The offset-map topic keeps retention.ms=-1: nothing is deleted that was not folded first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError, StateError
from mirrorflow.kafka.connection import kafka_error
from mirrorflow.kafka.topic_admin import create_topics
from mirrorflow.state.names import fold_transactional_id, offset_map_topic, snapshot_topic
from mirrorflow.state.snapshot import Marker, Snapshot, marker_key
from mirrorflow.state.state_topics import state_key, state_partition, state_topic_configs
from mirrorflow.state.store import MapRead, StateStore

Key = tuple[str, int]


@dataclass(frozen=True)
class MapNeeds:
    """What translations can still ask of a source partition's map: nothing below `floor` (the
    source's log start and every group's committed offset there), exactly at each of `pins` (every
    group's committed offset there)."""

    floor: int
    pins: tuple[int, ...] = ()


# What translations need per source partition, asked once the fold knows the partitions of the map.
FloorSource = Callable[[list[Key]], Mapping[Key, MapNeeds]]
# The whole offset map as read (snapshots and tail) and the offset-map partitions' log starts.
MapLook = tuple[MapRead, dict[int, int]]

PRODUCER_DEFAULTS: dict[str, Any] = {
    "linger.ms": 5,
    "compression.type": "lz4",
    "message.max.bytes": 8 * 1024 * 1024,
    "transaction.timeout.ms": 60_000,
}


@dataclass
class FoldReport:
    """What one fold did (for the checkpoint run's report, tests and the benchmark)."""

    flow: str
    partitions: int = 0  # source partitions in the map
    tail_entries: int = 0  # offset-map entries folded into snapshots
    snapshots_written: int = 0
    runs: int = 0  # runs kept over all partitions
    max_runs: int = 0  # runs kept by the largest partition
    landmarks: int = 0  # runs and spans kept below the partitions' floors (pins, landmarks)
    pruned: dict[str, int] = field(default_factory=dict)  # "topic-partition" -> floor, where it rose
    truncated: dict[int, int] = field(default_factory=dict)  # offset-map partition -> new log start
    skipped_reason: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One line for the checkpoint pass's output."""
        if self.error:
            return f"offset map: NOT folded (nothing changed; the next pass tries again): {self.error}"
        if self.partitions == 0:
            return f"offset map: {self.skipped_reason or 'nothing to fold'}"
        text = (
            f"offset map: {self.tail_entries} new entries folded into {self.snapshots_written} snapshot(s) of "
            f"{self.partitions} partition(s), {self.runs} runs kept (largest {self.max_runs})"
        )
        if self.landmarks:
            text += f" and {self.landmarks} below the floors (where groups sit, landmarks)"
        if self.pruned:
            text += f", floor raised on {len(self.pruned)} partition(s)"
        if self.skipped_reason:
            text += f"; {self.skipped_reason}"
        return text


def fold_offset_map(
    clients: FlowClients,
    floors: FloorSource | None = None,
    timeout: float = 300.0,
    truncate: bool = True,
    look: MapLook | None = None,
) -> FoldReport:
    """Fold the flow's offset map into its snapshots and truncate what was folded (module docstring).
    Raises MirrorflowError when it cannot (nothing is then changed or lost). `truncate=False`
    leaves the folded entries in place (what a crash right after the commit leaves). `look`: a
    `look_at_map` the caller took moments ago, used for the first look instead of a new read (an
    older look can only miss what the next fold finds; a fold reads again once it is fenced)."""
    flow = clients.flow
    report = FoldReport(flow.name)
    n_map = clients.partitions("target", offset_map_topic(flow))
    if not n_map:
        report.skipped_reason = "nothing copied yet (no offset-map topic)"
        return report
    _ensure_snapshot_topic(clients, n_map)
    # a look first, without a transaction: a pass with nothing to fold costs a read, no more
    read, lows = look if look is not None else look_at_map(clients, timeout)
    needs = dict(floors(sorted(read.maps))) if floors is not None and read.maps else {}
    writes = _plan(clients, read, needs, report)
    if not writes and not (truncate and any(lows.get(p, 0) < end for p, end in read.ends.items())):
        return report
    producer = clients.producer(
        "target",
        PRODUCER_DEFAULTS,
        {"transactional.id": fold_transactional_id(flow.client_name), "enable.idempotence": True, "acks": "all"},
    )
    try:
        try:
            producer.init_transactions(timeout)  # fences an older fold of this flow
        except KafkaException as exc:
            raise StateError(f"flow {flow.name}: cannot start folding the offset map: {_describe(exc)}") from None
        read, _ = look_at_map(clients, timeout)  # again, now that no other fold can commit
        writes = _plan(clients, read, needs, report)
        # the markers last: a reader that sees one has seen every snapshot written before it (only
        # where the end moved: an idle partition's marker is current)
        n_snap = clients.partitions("target", snapshot_topic(flow))
        writes += [
            (mp % n_snap, *_marker(mp, end))
            for mp, end in sorted(read.ends.items())
            if read.view.markers.get(mp) != end
        ]
        _commit(producer, snapshot_topic(flow), writes, timeout, flow.name)
    finally:
        clients.release(producer)
    if truncate:
        report.truncated = _truncate(clients, read.ends, timeout)
    return report


def look_at_map(clients: FlowClients, timeout: float = 300.0) -> MapLook:
    """The snapshots and the tail of every key, and the offset-map partitions' log starts."""
    store = StateStore(clients)
    try:
        read = store.read_map(None, timeout)
        topic = offset_map_topic(clients.flow)
        return read, {p: lo for p, (lo, _) in store.reader.offsets(topic, read.ends).items()}
    finally:
        if store.has_reader:
            clients.release(store.reader.consumer)


def _plan(
    clients: FlowClients, read: MapRead, needs: Mapping[Key, MapNeeds], report: FoldReport
) -> list[tuple[int, bytes, bytes]]:
    """The snapshot records to write (partition, key, value), with `report` filled in; markers
    excepted. Empty when every snapshot is current. A partition without `needs` (its source or its
    groups unreadable) is pruned by the run bound only, keeping the pins of the last fold."""
    flow = clients.flow
    n_map = read.view.map_partitions
    n_snap = clients.partitions("target", snapshot_topic(flow))
    max_runs = int(flow.props.get("offset.map.max.runs", 0)) or None
    view = read.view
    report.partitions, report.tail_entries = len(read.maps), sum(read.tail.values())
    report.runs, report.max_runs, report.pruned, report.landmarks = 0, 0, {}, 0
    writes: list[tuple[int, bytes, bytes]] = []
    for k in sorted(read.maps):
        need = needs.get(k)
        pm = read.maps[k].pruned(need.floor if need else None, max_runs, need.pins if need else None)
        folded = pm.folded()
        report.runs += len(pm.runs)
        report.max_runs = max(report.max_runs, len(pm.runs))
        report.landmarks += len(pm.marks) + len(pm.spans)
        old = view.snapshots.get(k)
        if pm.floor > (old.folded.floor if old else 0):
            report.pruned[f"{k[0]}-{k[1]}"] = pm.floor
        mp = state_partition(*k, n_map)
        # with trusted markers the new marker of its partition covers an unchanged snapshot
        up_to_date = n_snap == n_map or (old is not None and old.folded_to.get(mp) == read.ends.get(mp))
        if old is not None and old.folded == folded and up_to_date:
            continue
        snap = Snapshot(k[0], k[1], folded, {mp: read.ends[mp]})
        writes.append((state_partition(*k, n_snap), state_key(*k), snap.to_json()))
    report.snapshots_written = len(writes)
    return writes


def _marker(mp: int, end: int) -> tuple[bytes, bytes]:
    return marker_key(mp), Marker(mp, end).to_json()


def _commit(producer: Any, topic: str, writes: list[tuple[int, bytes, bytes]], timeout: float, flow: str) -> None:
    try:
        producer.begin_transaction()
        for partition, key, value in writes:
            producer.produce(topic, value, key, partition)
            producer.poll(0)
        producer.commit_transaction(timeout)
    except KafkaException as exc:
        err = kafka_error(exc)
        if err is not None and err.txn_requires_abort():
            try:
                producer.abort_transaction(timeout)
            except KafkaException:
                pass  # the broker aborts it after transaction.timeout.ms; readers skip it
        raise StateError(
            f"flow {flow}: the offset-map snapshots could not be committed to {topic!r} "
            f"(nothing changed; the next fold tries again): {_describe(exc)}"
        ) from None


def _truncate(clients: FlowClients, ends: Mapping[int, int], timeout: float) -> dict[int, int]:
    """delete_records below what the committed snapshots hold, per offset-map partition."""
    topic = offset_map_topic(clients.flow)
    want = [TopicPartition(topic, p, end) for p, end in sorted(ends.items()) if end > 0]
    if not want:
        return {}
    admin = clients.admin("target")
    out: dict[int, int] = {}
    futures = admin.delete_records(want, request_timeout=timeout)
    for tp, fut in futures.items():
        try:
            out[tp.partition] = fut.result(timeout + 5).low_watermark
        except KafkaException as exc:
            raise StateError(
                f"flow {clients.flow.name}: the offset map is folded, but truncating {topic!r} partition "
                f"{tp.partition} below {tp.offset} failed (the next fold tries again): {_describe(exc)}"
            ) from None
    return out


def _ensure_snapshot_topic(clients: FlowClients, map_partitions: int) -> None:
    """Create the snapshot topic (as many partitions as the offset-map topic) when missing."""
    flow = clients.flow
    topic = snapshot_topic(flow)
    if clients.partitions("target", topic):
        return
    conf = state_topic_configs(flow)[topic]
    new = NewTopic(topic, map_partitions, flow.props["state.topic.replication.factor"], config=conf)
    try:
        create_topics(clients.admin("target"), clients.connection("target"), [new], timeout=60)
    except MirrorflowError as exc:
        raise StateError(f"cannot create {topic!r} of flow {flow.name} on cluster {flow.target!r}: {exc}") from None
    clients.partitions("target", topic, refresh=True)


def _describe(exc: KafkaException) -> str:
    err = kafka_error(exc)
    return err.str() if err is not None else str(exc)
