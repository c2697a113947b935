"""The records on a failed-over flow's source that never reached its target, read by its failback:
per partition the flow's filter matches on the source now, the offsets from where the flow stopped
(its progress when the failover plan was made, minus its ledger; a partition it never copied from its
log start) up to the source's end now. Two kinds, both kept on the source and never copied to the
target by any later step:

* **divergence**: the records the source held when the failover plan was made (below its end then,
  which the failover record keeps per partition): lost from the target's point of view;
* **split brain**: the records it accepted after (from that end on, and every record of a partition
  or topic born on the source after the plan): producers that still wrote to the source while the
  applications moved to the target.

By offsets, never by the records' timestamps (a producer may stamp event time). Only when the source
did not answer while the plan was made (an unplanned failover with the source down, or a failover
recorded before the ends were kept) does the split fall back to the timestamps, and the report says so."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError
from mirrorflow.ops.dr.failback_plan import Divergence, Key
from mirrorflow.ops.dr.failover_record import offsets
from mirrorflow.replication.plan.planner import source_offsets, source_partitions
from mirrorflow.state.offset_map import merge_ranges, subtract_ranges
from mirrorflow.state.store import StateStore

BY_OFFSETS, BY_TIMESTAMPS = "offsets", "timestamps"


def read_divergence(
    fc: FlowClients, record: dict[str, Any], failover_at: int
) -> tuple[list[Divergence], list[Divergence], str]:
    """(divergence, split brain, how they were told apart: BY_OFFSETS or BY_TIMESTAMPS); the source
    must answer."""
    flow = fc.flow
    replicated = offsets(record, "replicated_to")
    ends_then = offsets(record, "source_ends")
    try:
        parts = source_partitions(flow, fc.admin("source"), fc.outage_timeout)
        keys = sorted({(t, p) for t, p, _ in parts})
        ends = source_offsets(fc, keys, OffsetSpec.latest()) if keys else {}
        starts = source_offsets(fc, keys, OffsetSpec.earliest()) if keys else {}
    except MirrorflowError as exc:
        raise MirrorflowError(
            f"failback of {flow.name} needs cluster {flow.source!r} back (the divergence is read there): {exc}"
        ) from None
    progress = StateStore(fc).progress(keys)
    how = BY_OFFSETS if ends_then else BY_TIMESTAMPS
    reader = fc.reader("source")
    diverged, split = [], []
    try:
        for k in keys:
            prog = progress.get(k)
            start = max(replicated[k], 0) if k in replicated else starts[k]
            end = ends[k]
            ranges = subtract_ranges(start, end, list(prog.covered) if prog else []) if end > start else []
            if not ranges:
                continue
            if how == BY_OFFSETS:
                # a partition the plan did not see was born on the source after it: all split brain
                at = max(ends_then.get(k, start), start)
                parts_of = {
                    False: [(a, min(b, at)) for a, b in ranges if a < at],
                    True: [(max(a, at), b) for a, b in ranges if b > at],
                }
                counts = {kind: _count(reader, k, rs) for kind, rs in parts_of.items()}
            else:
                parts_of, counts = _by_timestamps(reader, k, ranges, failover_at)
            if parts_of[False]:
                diverged.append(Divergence(k[0], k[1], tuple(merge_ranges(parts_of[False])), counts[False]))
            if counts[True]:
                split.append(Divergence(k[0], k[1], tuple(merge_ranges(parts_of[True])), counts[True]))
    finally:
        fc.release(reader.consumer)
    return diverged, split, how


def _count(reader: Any, k: Key, ranges: list[tuple[int, int]]) -> int:
    return sum(1 for a, b in ranges for _ in reader.read(k[0], {k[1]: a}, timeout=120, stops={k[1]: b}))


def _by_timestamps(
    reader: Any, k: Key, ranges: list[tuple[int, int]], failover_at: int
) -> tuple[dict[bool, list[tuple[int, int]]], dict[bool, int]]:
    """The fallback: each range cut where the records' timestamps cross the failover's time
    ([first record of a category, next change))."""
    parts: dict[bool, list[tuple[int, int]]] = {False: [], True: []}
    counts = {False: 0, True: 0}
    for a, b in ranges:
        cur, lo = None, a
        for m in reader.read(k[0], {k[1]: a}, timeout=120, stops={k[1]: b}):
            after = m.timestamp()[1] >= failover_at
            if cur is not None and after != cur:
                parts[cur].append((lo, m.offset()))
                lo = m.offset()
            cur = after
            counts[after] += 1
        parts[bool(cur)].append((lo, b))  # no record at all: markers only, a divergence of 0
    return parts, counts
