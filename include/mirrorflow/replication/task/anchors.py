"""Anchoring partitions that have nothing to copy yet: their first progress, many at once.

A partition the flow has never copied, whose initial position is its end (an empty partition, or
`initial.position: latest`), is planned as a unit with an empty range (planner): its progress must
record where the flow starts it, or the next run would start it again at a later "latest" (skipping
what came in between) or at a later log start (losing, unseen, what source retention deleted
meanwhile). As a copy unit like any other, each such partition cost its own transactional producer,
init_transactions, the aborted transaction of fencing, a progress read and a commit: the first run
over 2,000 new partitions (200 of them with a record) took ~45 s on 2 cores, the brokers alone
~18 ms of CPU per unit. A copy task now writes the anchors of all its empty units at once, with one
idempotent producer and no transaction:

* the offset-map entry the unit would have committed: an empty range at the start, the target
  partition's high watermark as `tgt_end`. Offset-map entries merge commutatively
  (offset_map.PartitionMap: ranges merged, the largest `tgt_end`, the smallest start as the anchor,
  runs by source offset), so such an entry never changes where a copied record is placed, whatever
  it lands next to;
* the progress the unit would have committed, under the partition's ANCHOR key
  (state_topics.anchor_key), which StateStore.progress reads only for a partition without progress
  of its own: a copy's progress always wins, whether it was written before or after the anchor.

So an anchor needs no fencing for the copy's sake: nothing it writes can hide, undo or repeat what any
attempt at the partition (a zombie included) committed. It is still a write to the flow's target, which a
run that lost the flow's lease must not make: the task asks for the lease first (copier.anchor_all); a write
already in flight when the lease is lost is not stopped (open: docs/guarantees.md). Fencing stays where it
matters, before the first record:
the next unit of the partition fences its transactional.id, ends what earlier attempts left pending
and reads its progress (the anchor, or a copy's) as always. An anchor that is not acknowledged is
left to the unit path, which writes it in a transaction as before (see docs/replicate.md#fencing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.replication.plan.run_plan import Unit
from mirrorflow.state.names import offset_map_topic, progress_topic
from mirrorflow.state.offset_map import MapEntry
from mirrorflow.state.records import Progress
from mirrorflow.state.state_writer import StateWriter

Key = tuple[str, int]
FLUSH_S = 30.0  # one flush per kind of record: an anchor not acknowledged by then goes the unit path


def is_anchor(unit: Unit) -> bool:
    """A unit with nothing to copy, planned to anchor a fresh partition at its initial position
    (planner._partition_units); never a backfill's."""
    return unit.start == unit.end and not unit.backfill


def anchor_progress(unit: Unit, tgt_end: int) -> Progress:
    """What the unit would commit: the progress of its empty range, with the topics' identity."""
    fresh = Progress.empty(unit.topic, unit.partition)
    fresh = fresh.with_identity(unit.topic_id, unit.target_topic, unit.target_topic_id)
    return fresh.advanced(unit.start, unit.end, tgt_end, 0, -1)


def write_anchors(clients: FlowClients, units: Sequence[Unit]) -> dict[Key, Progress]:
    """Anchor the partitions of `units` (each `is_anchor`): their offset-map entries, then their
    anchor records (only where the entry was acknowledged). Returns the progress of each partition
    whose anchor the target acknowledged; the others (any failure: a missing target partition, an
    outage) are left to their copy units."""
    flow = clients.flow
    nprog = clients.partitions("target", progress_topic(flow))
    nmap = clients.partitions("target", offset_map_topic(flow))
    if not units or not nprog or not nmap:
        return {}
    try:
        ends = list_offsets(
            clients.admin("target"),
            clients.connection("target"),
            [(u.target_topic, u.partition) for u in units],
            OffsetSpec.latest(),
            committed=False,
            timeout=clients.admin_timeout,
        )
    except (MirrorflowError, KafkaException):
        return {}
    progress = {(u.topic, u.partition): anchor_progress(u, ends[(u.target_topic, u.partition)]) for u in units}
    writer = StateWriter(flow, nprog, nmap)
    producer = clients.producer("target", required={"enable.idempotence": True, "acks": "all"})
    try:
        entries = _written(
            producer,
            progress,
            lambda p, report: writer.write_entry(
                producer, MapEntry(p.topic, p.partition, p.next, p.next, (), p.tgt_end), report
            ),
        )
        anchored = _written(
            producer, {k: progress[k] for k in entries}, lambda p, report: writer.write_anchor(producer, p, report)
        )
    finally:
        clients.release(producer)
    return {k: progress[k] for k in anchored}


def _written(producer: Any, progress: dict[Key, Progress], produce: Any) -> set[Key]:
    """Produce one record per partition with `produce(progress, delivery report)`; the partitions
    whose record the target acknowledged."""
    acked: set[Key] = set()

    def report_for(key: Key) -> Any:
        def report(err: Any, _msg: Any) -> None:
            if err is None:
                acked.add(key)

        return report

    for key, p in progress.items():
        while True:
            try:
                produce(p, report_for(key))
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
            except KafkaException:  # not acknowledged: its unit writes it
                break
    with contextlib.suppress(KafkaException):
        producer.flush(FLUSH_S)
    return acked
