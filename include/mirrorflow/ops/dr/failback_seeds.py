"""Where a failback starts the reverse flow Y->X of a failed-over flow X->Y, per partition of Y's topics
that Y->X's filter matches at the failback (also topics and partitions born on Y during the outage):
the ledger of offsets it must never copy, the records it copies, the inverse of X->Y's offset map
(identity policy), and what Y no longer holds (`read_seeds`; `plan_reseed` for an X rebuilt empty).

* **What X->Y wrote** comes from X->Y's own offset map (the target offset of every record it copied),
  never from Y's end at some moment; with exactly-once copies the commit marker after each of its
  transactions is its own too. Every other offset from where Y->X stands (its progress, else Y's log
  start) is read once (read_committed): a stretch without a committed record joins the ledger, one
  with records is copied. A partition X->Y never wrote (a topic or partition created on Y during the
  outage, every topic under the default policy) is copied whole, also when Y->X's
  `initial.position` is `latest`.
* **Checked against what X->Y recorded** (identity policy): the topic's ID (X->Y's progress), and that
  the last record X->Y wrote is still there with the leader epoch it had at the failover (the failover
  record's `target_last`; Kafka's leader epochs only grow, so a record at or below it with a higher
  epoch means the partition was truncated and written again: an unclean leader election). A
  recreated topic is Y's own from its start; a truncated partition is X->Y's only below the first
  offset written again (found by the epochs, exactly), Y's from there. The inverse map never covers
  what Y no longer holds, so Y's groups are never moved onto wrong offsets on X.
* **What Y no longer holds** (`Loss`): offsets below Y's log start that X->Y did not write (deleted by
  retention before the failback), offsets with no record in a compacted topic outside X->Y's writes
  (removed by the log cleaner: superseded values, tombstones after delete.retention.ms), a recreated
  topic or truncated partition (what was written there before is gone), a topic X->Y wrote that is
  gone. Counted and named; the failback starts only once the operator accepts them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import ConfigError, StateError
from mirrorflow.kafka.log_reader import LogReader
from mirrorflow.kafka.topic_admin import compacted_topics, list_offsets, topic_ids
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.dr.failback_plan import Inverse, Key, Loss, Seed
from mirrorflow.ops.dr.failover_record import offsets
from mirrorflow.replication.plan.planner import source_offsets, source_partitions
from mirrorflow.state.fencing import ABORTED_VALUE
from mirrorflow.state.flow_state import read_control
from mirrorflow.state.kept_apart import kept_ranges
from mirrorflow.state.landmarks import Span, encode_spans, inverted
from mirrorflow.state.offset_map import PartitionMap, Run, below_target, from_target, merge_ranges, subtract_ranges
from mirrorflow.state.records import Progress
from mirrorflow.state.store import StateStore


@dataclass
class TargetRead:
    """What a failback read on the reverse flow's source, and what it will write there."""

    seeds: list[Seed] = field(default_factory=list)
    inverse: dict[Key, Inverse] = field(default_factory=dict)
    losses: list[Loss] = field(default_factory=list)
    read_to: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> the end read to

    def digest(self) -> str:
        """The inverse offset map, in 16 hex digits (the plan carries this, not the runs)."""
        rows = []
        for k, inv in sorted(self.inverse.items()):
            rows.append([k[0], k[1], [[r.src, r.tgt, r.count] for r in inv.runs], inv.ranges])
            if inv.spans:  # (a plan without them keeps its id)
                rows[-1].append(encode_spans(inv.spans))
        return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def read_seeds(
    fc: FlowClients,
    rc: FlowClients,
    record: dict[str, Any],
    identity: bool,
    read_to: Mapping[str, int] | None = None,
    kept_here: Collection[Key] = (),
) -> TargetRead:
    """Per partition of the reverse flow's source (module docstring). `read_to` ("topic:partition" ->
    offset): read the target only up to these ends (a plan's, read again at its start), else up to
    its stable ends now. `kept_here`: the partitions of the reverse flow's target where this failback
    keeps records apart (its divergence and split brain): those the source lacks are reported (`_absent`)."""
    rev, out = rc.flow, TargetRead()
    bound = rc.outage_timeout
    parts = source_partitions(rev, rc.admin("source"), bound)
    keys = sorted((t, p) for t, p, _ in parts)
    written = sorted(offsets(record, "replicated_to")) if identity else []
    here = {t for t, _ in keys}
    out.losses += _gone_topics(rc, record, {t for t, _ in written} - here)
    absent = _absent(rc, sorted(set(kept_here) - set(keys))) if identity else []
    if not keys:
        out.seeds += absent
        return out
    store = StateStore(fc)
    fwd = store.offset_map([k for k in keys if k in set(written)]) if identity else {}
    fprog = store.progress([k for k in keys if k in set(written)]) if identity else {}
    old = StateStore(rc).progress(keys)
    kept = _kept_out(fc)
    admin, conn = rc.admin("source"), rc.connection("source")
    starts = source_offsets(rc, keys, OffsetSpec.earliest())
    stable = source_offsets(rc, keys, OffsetSpec.latest())  # read_committed: an open transaction stays out
    high = list_offsets(admin, conn, keys, OffsetSpec.latest(), committed=False, timeout=bound)
    if read_to is not None:
        stable = {k: read_to.get(f"{k[0]}:{k[1]}", v) for k, v in stable.items()}
    ids = topic_ids(admin, conn, here, bound) if identity else {}
    compacted = compacted_topics(admin, conn, here)
    counts = rc.partition_counts("target") if identity else {}
    on_target = [k for k in keys if counts.get(k[0], 0) > k[1]]
    # where the reverse flow's copies go after (a topic or partition born on the source: not there yet)
    rev_ends = list_offsets(rc.admin("target"), rc.connection("target"), on_target, OffsetSpec.latest(), False)
    # what the reverse flow's target (the failed-over flow's source) still holds: its map never places a
    # record below it (delete-records or retention took the original there)
    rev_starts = list_offsets(rc.admin("target"), rc.connection("target"), on_target, OffsetSpec.earliest(), False)
    last = {k: (int(v[0]), int(v[1])) for k, v in _pairs(record.get("target_last")).items()}
    exactly_once = bool(fc.flow.props["exactly.once"])
    reader, raw = rc.reader("source"), rc.reader("source", committed=False)
    try:
        for k in keys:
            facts = Facts(
                k, rev.source, fc.flow.name, old.get(k), fwd.get(k), fprog.get(k), ids.get(k[0], ""), starts[k],
                stable[k], high[k], last.get(k), kept.get(k, []), k[0] in compacted, exactly_once, rev_ends.get(k, -1),
                rev_starts.get(k, 0),
            )  # fmt: skip
            _partition(out, facts, reader, raw)
    finally:
        rc.release(reader.consumer)
        rc.release(raw.consumer)
    out.seeds += absent
    return out


def _absent(rc: FlowClients, kept: list[Key]) -> list[Seed]:
    """Partitions where the failback keeps records apart on the reverse flow's target (a partition or
    topic created on the failed-over flow's source that no sync took across before the failover) and
    that the reverse flow's source does not have, for the report and the plan (nothing is written for
    them). When the source gets them (an operator adds the partition, creates the topic), the reverse
    flow's planner finds their target partition holds only what the failback kept there
    (state_drift.only_kept) and copies them from their beginning, after it. Not where it has progress."""
    filters = FlowFilters.for_flow(rc.flow)
    kept = [k for k in kept if filters.should_replicate_topic(k[0])]
    if not kept:
        return []
    old = StateStore(rc).progress(kept)
    ends = list_offsets(
        rc.admin("target"), rc.connection("target"), kept, OffsetSpec.latest(), False, rc.outage_timeout
    )
    return [
        Seed(t, p, 0, 0, 0, ends[(t, p)], absent=True) for t, p in kept if (t, p) not in old or old[(t, p)].next < 0
    ]


@dataclass(frozen=True)
class Facts:
    """What a failback knows of one partition of the reverse flow's source before it reads it."""

    key: Key
    cluster: str  # the reverse flow's source (the failed-over flow's target)
    fwd_name: str  # the failed-over flow
    old: Progress | None  # the reverse flow's progress (an earlier round trip)
    pm: PartitionMap | None  # the failed-over flow's offset map of the partition (identity policy)
    fp: Progress | None  # the failed-over flow's progress of it
    topic_id: str  # the topic's ID now
    start: int  # the log start, the stable end and the high watermark now
    stable: int
    high: int
    last: tuple[int, int] | None  # the failed-over flow's last copy there and its leader epoch (the failover's)
    kept: list[tuple[int, int]]  # what earlier failbacks kept apart there
    compacted: bool
    exactly_once: bool
    rev_end: int  # where the reverse flow's copies go after, on its target (-1: not there yet)
    rev_start: int = 0  # the reverse flow's target's log start: the originals below it are gone

    @property
    def where(self) -> str:
        return f"{self.key[0]}[{self.key[1]}] on {self.cluster!r}"


def _partition(out: TargetRead, f: Facts, reader: LogReader, raw: LogReader) -> None:
    """One partition's seed, inverse map and losses (module docstring)."""
    (t, p), fwd_name = f.key, f.fwd_name
    prev, runs, pruned_map = _written(out, f, reader)
    base = prev.next if prev is not None else f.start
    keep = from_target(runs, base)
    owned = [(r.tgt, r.tgt + r.count) for r in keep]
    pruned, below, forgot, spans = _below_the_floor(f, base) if pruned_map else (-1, [], [], [])
    # the commit marker after each of the forward flow's copy transactions (exactly once): never a record,
    # so neither lost nor removed by the cleaner. Only for counting: a run the forward flow's map got from a
    # failback's inverse seed (A's original records) has no marker after it, and the offset there may hold
    # a record written on B, which must be read like any other
    marks = _markers(runs) if f.exactly_once else []
    done = merge_ranges([*owned, *below, *f.kept])
    # offsets below the log start that the failed-over flow did not write: deleted before the failback
    origin = prev.next if prev is not None else (min((r.tgt for r in runs), default=0) if pruned < 0 else f.start)
    everything = merge_ranges([*((r.tgt, r.tgt + r.count) for r in runs), *marks, *f.kept])
    gone = subtract_ranges(origin, f.start, everything) if f.start > origin else []
    if gone:
        n = sum(b - a for a, b in gone)
        out.losses.append(
            Loss(t, p, "retention", tuple(gone), n,
                 f"deleted from {f.where} (retention, delete-records) before the failback, not written by {fwd_name}: "
                 "records (and their transaction markers) that never reach the other side")
        )  # fmt: skip
    todo, empty, holes, count = _read_the_rest(reader, f.key, subtract_ranges(base, max(f.stable, base), done))
    holes = _without(merge_ranges(holes), marks)
    if f.compacted and holes:
        holes = _without(holes, _own_aborts(raw, t, p, holes))
    if f.compacted and holes:
        out.losses.append(
            Loss(t, p, "compaction", tuple(holes), sum(b - a for a, b in holes),
                 f"no record left at these offsets of {f.where} outside {fwd_name}'s writes: removed by the log "
                 "cleaner (superseded values, and tombstones after delete.retention.ms; the transaction markers of "
                 "transactional producers there count too). The latest record of every key still there is copied")
        )  # fmt: skip
    ledger = merge_ranges([*done, *empty])
    nxt = next((b for a, b in ledger if a <= base < b), base)
    inv = [Run(r.tgt, r.src, r.count) for r in keep]
    inv, gone_there = _still_there([*forgot, *inv], f.rev_start)
    # the map entries cover what the forward flow wrote and B still holds and the stretches between (the
    # pruned stretch too: spans there raise the reverse map's floor, below which verify says not
    # checkable), never what the reverse flow's target no longer holds (no original to map to)
    out.inverse[f.key] = Inverse(
        sorted(inv, key=lambda r: r.src), _without(merge_ranges([*owned, *empty, *below]), gone_there), tuple(spans)
    )
    out.read_to[f"{t}:{p}"] = f.stable
    out.seeds.append(
        Seed(t, p, nxt, base, sum(r.count for r in inv), f.rev_end, count, tuple(todo), tuple(ledger), pruned)
    )


def _below_the_floor(f: Facts, base: int) -> tuple[int, list[tuple[int, int]], list[Run], list[Span]]:
    """Where the failed-over flow's map was pruned: (the target offset of its first run, the stretch from
    `base` below it, and that stretch mapped back as well as the map knows it: its landmarks exactly, its
    spans as spans, state.landmarks.inverted), so a group there resumes at or before its next record."""
    if f.pm is None:
        return -1, [], [], []
    pruned = min((r.tgt for r in f.pm.runs), default=int(f.pm.tgt_end or base))
    least, hi = max(f.pm.first or 0, f.rev_start), max(pruned, base)
    # a backfill put older records after newer ones: a span kept below the floor (by source offset) may lie
    # above the first run on the target, the flow's writes too (its landmarks there are runs: `_written`)
    above = [
        Span(max(p.tgt, hi), p.tgt_end, max(p.src, least), max(p.src_end, p.src, least), p.records)
        for p in f.pm.pieces_below
        if not p.exact and p.tgt_end > hi
    ]
    if pruned <= base:
        return pruned, [(s.src, s.src_end) for s in above], [], above
    after = f.pm.runs[0].src if f.pm.runs else f.pm.floor
    swapped, spans = inverted(f.pm.pieces_below, base, pruned, least, after)
    below = merge_ranges([(base, pruned), *((s.src, s.src_end) for s in above)])
    return pruned, below, [Run(*r) for r in swapped], [*spans, *above]


def _still_there(inv: list[Run], start: int) -> tuple[list[Run], list[tuple[int, int]]]:
    """The inverse runs cut to the originals the reverse flow's target still holds (at or above its log
    `start`), and the source ranges of the runs' parts below it: records deleted there (delete-records,
    retention) while the failed-over flow copied them, whose copies the failed-over target keeps. They are
    the failed-over flow's writes (never copied back) with nothing to map to."""
    return from_target(inv, start), [(r.src, r.src_end) for r in below_target(inv, start)]


def _written(out: TargetRead, f: Facts, reader: LogReader) -> tuple[Progress | None, list[Run], bool]:
    """What the failed-over flow wrote there that the partition still holds, checked against what it
    recorded: (the reverse flow's progress to go on from, the forward runs, whether its map was
    pruned). A recreated topic is the target's own from its start; a truncated partition the forward
    flow's only below the cut (both a Loss)."""
    (t, p), fwd_name, fp = f.key, f.fwd_name, f.fp
    prev = f.old if f.old is not None and f.old.next >= 0 else None
    runs = list(f.pm.runs) if f.pm is not None else []
    pruned_map = f.pm is not None and f.pm.first is not None and f.pm.floor > f.pm.first
    if pruned_map and runs and f.pm is not None:
        # a backfill put older records after newer ones: a landmark the map kept below its floor (by source
        # offset) may lie above its first run on the target, an exact write of the flow like the runs
        runs += from_target(f.pm.marks, min(r.tgt for r in runs))
    if fp is not None and fp.target_topic_id and f.topic_id and fp.target_topic_id != f.topic_id:
        out.losses.append(
            Loss(t, p, "recreated", (), -1,
                 f"{f.where} was recreated after {fwd_name} wrote it (topic ID {f.topic_id}; {fwd_name} wrote topic "
                 f"ID {fp.target_topic_id}): what was written to it before is gone. Once accepted, the new topic is "
                 f"taken as written there only: copied from its start, nothing of {fwd_name} mapped back")
        )  # fmt: skip
        return None, [], False
    if runs and f.last is not None:
        return prev, _truncated(out, f.key, reader, f.where, fwd_name, runs, f.last, f.high), pruned_map
    if runs and fp is not None and 0 <= f.high < fp.tgt_end:
        out.losses.append(
            Loss(t, p, "truncated", ((f.high, fp.tgt_end),), -1,
                 f"{f.where} ends at offset {f.high}, below the {fp.tgt_end} {fwd_name} wrote: it was truncated "
                 "since, and its failover was recorded by a mirrorflow that did not keep the leader epoch of the last "
                 "copy, so where it was cut cannot be told. The failback cannot start; copy what was written there "
                 f"since by other means, or drop the topic from {fwd_name}'s filter and fail back without it",
                 acceptable=False)
        )  # fmt: skip
    return prev, runs, pruned_map


def _read_the_rest(
    reader: LogReader, k: Key, stretches: list[tuple[int, int]]
) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int]], int]:
    """Read every stretch the failed-over flow did not write, once (read_committed): (the ranges the
    reverse flow copies, from each stretch's first record; the empty stretches before them; the
    offsets with no committed record; how many records to copy)."""
    t, p = k
    todo, empty, holes, count = [], [], [], 0
    for a, b in stretches:
        first, n, at = -1, 0, a
        for m in reader.read(t, {p: a}, timeout=120, stops={p: b}):
            first = m.offset() if first < 0 else first
            if m.offset() > at:
                holes.append((at, m.offset()))
            at, n = m.offset() + 1, n + 1
        if at < b:
            holes.append((at, b))
        if n:  # copied by the reverse flow (from its first record: the stretch before is empty)
            empty.append((a, first))
            todo.append((first, b))
            count += n
        else:
            empty.append((a, b))
    return todo, empty, holes, count


def _truncated(
    out: TargetRead,
    k: Key,
    reader: LogReader,
    where: str,
    fwd_name: str,
    runs: list[Run],
    last: tuple[int, int],
    high: int,
) -> list[Run]:
    """The failed-over flow's runs still on the target: all of them, unless the partition was truncated
    since its last copy (then the runs below the first offset written again, and a Loss naming it)."""
    t, p = k
    offset, epoch = last

    def newer(x: int) -> bool:
        """The first record at or after x has a higher leader epoch than the last copy had (or none is left)."""
        for m in reader.read(t, {p: x}, timeout=120, stops={p: high}):
            return (m.leader_epoch() or 0) > epoch
        return True

    if high > offset and not newer(offset):
        return runs
    lo, hi = min((r.tgt for r in runs), default=0), min(offset + 1, high)
    while lo < hi:  # epochs only grow along the log: the first offset from which every record is newer
        mid = (lo + hi) // 2
        if newer(mid):
            hi = mid
        else:
            lo = mid + 1
    cut = next((m.offset() for m in reader.read(t, {p: lo}, timeout=120, stops={p: min(offset + 1, high)})), lo)
    out.losses.append(
        Loss(t, p, "truncated", ((cut, offset + 1),), -1,
             f"{where} was truncated after {fwd_name} wrote it (an unclean leader election?): its last copy at offset "
             f"{offset} (leader epoch {epoch}) is " + ("gone" if high <= offset else "another record now")
             + f"; from offset {cut} on the partition was written again. What was written there before is gone. "
             f"Once accepted, {fwd_name}'s records count only below {cut} (its records above are on the other side "
             f"already) and everything from {cut} on is copied")
    )  # fmt: skip
    return [Run(r.src, r.tgt, min(r.count, cut - r.tgt)) for r in runs if r.tgt < cut]


def _without(ranges: list[tuple[int, int]], out: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`ranges` (merged) without the offsets in `out`."""
    if not out or not ranges:
        return ranges
    lo, hi = ranges[0][0], ranges[-1][1]
    return subtract_ranges(lo, hi, merge_ranges([*subtract_ranges(lo, hi, ranges), *out]))


def _own_aborts(raw: LogReader, t: str, p: int, holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """In holes of a compacted topic: the aborted records mirrorflow's copies wrote there to end what an
    earlier epoch left pending (state.fencing.abort_pending, read read_uncommitted while the cleaner
    has not removed them yet), each with the offset after it, where its abort marker lies. Neither is
    a record the cleaner removed; any other hole stays unexplained."""
    own: list[tuple[int, int]] = []
    for a, b in holes:
        for m in raw.read(t, {p: a}, timeout=120, stops={p: b}):
            if m.key() == ABORTED_VALUE and ("mirrorflow", b"aborted") in (m.headers() or []):
                own.append((m.offset(), m.offset() + 2))
    return merge_ranges(own)


def _markers(runs: list[Run]) -> list[tuple[int, int]]:
    """Where the commit marker after each exactly-once transaction of the failed-over flow lies: the
    offset right after a run that the next run does not continue (a transaction's records are one or
    more runs on consecutive target offsets, its marker follows them)."""
    ordered = sorted(runs, key=lambda r: r.tgt)
    out = []
    for i, a in enumerate(ordered):
        end = a.tgt + a.count
        if i + 1 == len(ordered) or ordered[i + 1].tgt > end:
            out.append((end, end + 1))
    return out


def _pairs(raw: Any) -> dict[Key, Any]:
    out: dict[Key, Any] = {}
    for key, v in dict(raw or {}).items():
        topic, _, part = str(key).rpartition(":")
        out[(topic, int(part))] = v
    return out


def plan_reseed(rc: FlowClients, read_to: Mapping[str, int] | None = None) -> TargetRead:
    """--reseed: per partition of the reverse flow's source topics, copy everything from the log
    start (offsets, not read). Refused when a reverse target topic holds anything: copying all of Y
    into a source that still has records would duplicate them (the plain failback is for that); and
    under the default policy, where Y holds X's former records in `X.<topic>`, which the reverse flow
    never copies back (MM2's cycle rule): a rebuilt X would get only Y's own records."""
    rev = rc.flow
    filters = FlowFilters.for_flow(rev)
    if filters.remote_topic("t") != "t":
        raise ConfigError(
            [
                (
                    f"flows.{rev.name}.replication.policy.class",
                    f"failback --reseed rebuilds cluster {rev.target!r} from {rev.source!r}, but under the default "
                    f"replication policy the records {rev.target} had are on {rev.source} as {rev.target}.<topic>, "
                    f"which {rev.name} never copies back (MirrorMaker 2's cycle rule): a rebuilt {rev.target} would "
                    f"get only what was written on {rev.source} itself, under {rev.source}.<topic>. Restore "
                    f"{rev.target}'s topics from {rev.target}.<topic> on {rev.source} first (e.g. with a flow that "
                    "renames them back), or use IdentityReplicationPolicy for both flows",
                )
            ]
        )
    keys = sorted((t, p) for t, p, _ in source_partitions(rev, rc.admin("source"), rc.outage_timeout))
    if not keys:
        return TargetRead()
    starts = source_offsets(rc, keys, OffsetSpec.earliest())
    stable = source_offsets(rc, keys, OffsetSpec.latest())
    if read_to is not None:
        stable = {k: read_to.get(f"{k[0]}:{k[1]}", v) for k, v in stable.items()}
    counts = rc.partition_counts("target")
    there = [(t, p) for t, p in keys if counts.get(t, 0) > p]
    admin, conn = rc.admin("target"), rc.connection("target")
    lows = list_offsets(admin, conn, there, OffsetSpec.earliest(), committed=False)
    highs = list_offsets(admin, conn, there, OffsetSpec.latest(), committed=False)
    full = [f"{t}[{p}] ({highs[(t, p)] - lows[(t, p)]:,} offsets)" for t, p in there if highs[(t, p)] > lows[(t, p)]]
    if full:
        raise StateError(
            f"failback --reseed of {rev.name} copies all of {rev.source}'s topics into {rev.target}, but "
            f"{rev.target} still holds records in " + ", ".join(full[:10]) + ": they would be duplicated; "
            f"use the failback without --reseed (it copies only what {rev.source} got outside the flow), or "
            f"empty those topics first"
        )
    seeds = [
        Seed(t, p, starts[(t, p)], starts[(t, p)], 0, highs.get((t, p), 0), stable[(t, p)] - starts[(t, p)],
             ((starts[(t, p)], stable[(t, p)]),))
        for t, p in keys
    ]  # fmt: skip
    return TargetRead(seeds, read_to={f"{t}:{p}": stable[(t, p)] for t, p in keys})


def _gone_topics(rc: FlowClients, record: Mapping[str, Any], gone: set[str]) -> list[Loss]:
    """A `deleted` loss per topic the failed-over flow wrote that the reverse flow's source no longer has
    (only one there when the failover committed: `_there_at_failover`)."""
    counts = rc.partition_counts("source") if gone else {}
    return [
        Loss(t, -1, "deleted", (), -1,
             f"topic {t!r} no longer exists on {rc.flow.source!r}: what was written to it there after the failover "
             "is gone; the failback leaves it out")
        for t in sorted(gone)
        if not counts.get(t) and _there_at_failover(record, t)
    ]  # fmt: skip


def _there_at_failover(record: Mapping[str, Any], topic: str) -> bool:
    """Whether the failed-over flow's target had `topic` when the failover committed (its record's
    `target_ends`: -1 where the partition was not there). A topic it has progress for but never
    created there (its records were kept on its source by an earlier failback, no sync took it across)
    holds nothing to lose. An older record without ends: taken as there."""
    ends = [v for (t, _), v in offsets(record, "target_ends").items() if t == topic]
    return not ends or any(v >= 0 for v in ends)


def _kept_out(fc: FlowClients) -> dict[Key, list[tuple[int, int]]]:
    """The divergence and split-brain ranges of the failback that started `fc`'s flow (on its
    source, kept there): the reverse flow of a failback back must not copy them either."""
    return kept_ranges(read_control(fc, "failback"), ("divergence", "split_brain"))
