"""What a failback reads before it changes anything: the divergence and the split brain on the
failed-over flow's source (`divergence`), and per partition of the reverse flow's source where it
starts, the ledger it must never copy and the inverse of the forward offset map (`plan_seeds`;
`plan_reseed` for a source rebuilt empty)."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError, StateError
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.dr.failback_report import Divergence, Seed
from mirrorflow.ops.dr.failover_record import offsets
from mirrorflow.replication.planner import source_offsets
from mirrorflow.state.flow_state import read_control
from mirrorflow.state.offset_map import Run, merge_ranges, subtract_ranges
from mirrorflow.state.store import StateStore

Key = tuple[str, int]
Inverse = tuple[list[Run], list[tuple[int, int]]]  # inverse runs, and the ranges their map entries cover


def divergence(fc: FlowClients, record: dict[str, Any], failover_at: int) -> tuple[list[Divergence], list[Divergence]]:
    """Per source partition of the failover record: [replicated, end now) minus the covered ledger,
    split by record timestamp at the failover's time into the divergence and the split brain."""
    replicated = offsets(record, "replicated_to")
    keys = sorted(replicated)
    if not keys:
        return [], []
    try:
        ends = source_offsets(fc, keys, OffsetSpec.latest())
    except MirrorflowError as exc:
        raise MirrorflowError(
            f"failback of {fc.flow.name} needs cluster {fc.flow.source!r} back (the divergence is read there): {exc}"
        ) from None
    progress = StateStore(fc).progress(keys)
    reader = fc.reader("source")
    diverged, split = [], []
    try:
        for t, p in keys:
            prog = progress.get((t, p))
            start, end = max(replicated[(t, p)], 0), ends[(t, p)]
            ranges = subtract_ranges(start, end, list(prog.covered) if prog else []) if end > start else []
            # each range is cut where the category changes: [first record of a category, next change)
            parts: dict[bool, list[tuple[int, int]]] = {False: [], True: []}
            counts = {False: 0, True: 0}
            for a, b in ranges:
                cur, lo = None, a
                for m in reader.read(t, {p: a}, timeout=120, stops={p: b}):
                    after = m.timestamp()[1] >= failover_at
                    if cur is not None and after != cur:
                        parts[cur].append((lo, m.offset()))
                        lo = m.offset()
                    cur = after
                    counts[after] += 1
                parts[bool(cur)].append((lo, b))  # no record at all: markers only, a divergence of 0
            if ranges:
                diverged.append(Divergence(t, p, tuple(merge_ranges(parts[False])), counts[False]))
            if counts[True]:
                split.append(Divergence(t, p, tuple(merge_ranges(parts[True])), counts[True]))
    finally:
        fc.release(reader.consumer)
    return [d for d in diverged if d.ranges], split


def plan_seeds(
    fc: FlowClients, rc: FlowClients, record: dict[str, Any], identity: bool
) -> tuple[list[Seed], dict[Key, Inverse]]:
    """Per partition of the reverse flow's source topics (the failed-over flow's topics, on its
    target): the ledger of offsets it must never copy (what the failed-over flow wrote there, the
    records the last failback kept out, stretches without a committed record between them), the
    records it copies, and (identity) the inverse of the forward map over what the forward flow wrote."""
    topics = sorted({t for t, _ in offsets(record, "replicated_to")})  # default policy: Y's own topics
    keys = [(t, p) for t in topics for p in range(rc.partitions("source", t, refresh=True))]
    if not keys:
        return [], {}
    fwd = StateStore(fc).offset_map(keys) if identity else {}  # identity: target topic == source topic
    old = StateStore(rc).progress(keys)
    kept = _kept_out(fc)  # what the failback that started the forward flow kept out of it
    starts = source_offsets(rc, keys, OffsetSpec.earliest())
    stable = source_offsets(rc, keys, OffsetSpec.latest())  # read_committed: an open transaction stays out
    rev_ends = (
        list_offsets(rc.admin("target"), rc.connection("target"), keys, OffsetSpec.latest(), committed=False)
        if identity
        else {}
    )
    reader = rc.reader("source")
    seeds: list[Seed] = []
    inverse: dict[Key, Inverse] = {}
    try:
        for k in keys:
            prev = old.get(k)
            base = prev.next if prev is not None and prev.next >= 0 else starts[k]
            pm = fwd.get(k)
            runs = [r for r in (pm.runs if pm is not None else []) if r.tgt + r.count > base]
            owned = [(max(r.tgt, base), r.tgt + r.count) for r in runs]
            pruned = -1
            if pm is not None and pm.first is not None and pm.floor > pm.first:
                # the map forgot where the records below its floor landed: they lie below its first run
                pruned = min((r.tgt for r in pm.runs), default=int(pm.tgt_end or base))
                owned.append((base, pruned))
            done = merge_ranges([*owned, *kept.get(k, ())])
            todo, empty, count = [], [], 0
            for a, b in subtract_ranges(base, max(stable[k], base), done):
                first, n = -1, 0
                for m in reader.read(k[0], {k[1]: a}, timeout=120, stops={k[1]: b}):
                    first = m.offset() if first < 0 else first
                    n += 1
                if n:  # copied by the reverse flow (from its first record: the stretch before is empty)
                    empty.append((a, first))
                    todo.append((first, b))
                    count += n
                else:
                    empty.append((a, b))
            ledger = merge_ranges([*done, *empty])
            nxt = next((b for a, b in ledger if a <= base < b), base)
            inv = []
            for r in runs:
                lo = max(r.tgt, base)
                inv.append(Run(lo, r.src + (lo - r.tgt), r.tgt + r.count - lo))
            inverse[k] = (sorted(inv, key=lambda r: r.src), merge_ranges([*owned, *empty]))
            seeds.append(
                Seed(
                    k[0],
                    k[1],
                    nxt,
                    base,
                    sum(r.count for r in inv),
                    rev_ends.get(k, -1),
                    count,
                    tuple(todo),
                    tuple(ledger),
                    pruned,
                )
            )
    finally:
        rc.release(reader.consumer)
    return seeds, inverse


def plan_reseed(rc: FlowClients, record: dict[str, Any]) -> list[Seed]:
    """--reseed: per partition of the reverse flow's source topics, copy everything from the log
    start (offsets, not read). Refused when a reverse target topic holds anything: copying all of Y
    into a source that still has records would duplicate them (the plain failback is for that)."""
    rev = rc.flow
    filters = FlowFilters.for_flow(rev)
    topics = sorted({t for t, _ in offsets(record, "replicated_to")})
    keys = [(t, p) for t in topics for p in range(rc.partitions("source", t, refresh=True))]
    if not keys:
        return []
    starts = source_offsets(rc, keys, OffsetSpec.earliest())
    stable = source_offsets(rc, keys, OffsetSpec.latest())
    remote = {t: filters.remote_topic(t) for t in topics}
    there = [(remote[t], p) for t, p in keys if rc.partitions("target", remote[t], refresh=True) > p]
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
    return [
        Seed(
            t,
            p,
            starts[(t, p)],
            starts[(t, p)],
            0,
            highs.get((remote[t], p), 0),
            stable[(t, p)] - starts[(t, p)],
            ((starts[(t, p)], stable[(t, p)]),),
        )
        for t, p in keys
    ]


def _kept_out(fc: FlowClients) -> dict[Key, list[tuple[int, int]]]:
    """The divergence and split-brain ranges of the failback that started `fc`'s flow (on its
    source, kept there): the reverse flow of a failback back must not copy them either."""
    rec = read_control(fc, "failback") or {}
    out: dict[Key, list[tuple[int, int]]] = {}
    for d in [*rec.get("divergence", []), *rec.get("split_brain", [])]:
        out.setdefault((str(d["topic"]), int(d["partition"])), []).extend((int(a), int(b)) for a, b in d["ranges"])
    return out
