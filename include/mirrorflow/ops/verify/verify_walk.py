"""The comparison behind `mirrorflow verify`, pure: source and target records walked together
through the offset map's runs (no I/O; ops.verify feeds it records read from both clusters).

A run says source offsets src..src+n-1 landed at target offsets tgt..tgt+n-1. The runs of a
verified window are cut into *groups* in which target offsets grow with source offsets (one group
for a flow that only ever copied forwards; a backfill of an older range starts another). For each
group both sides are read once, in offset order, and walked together, holding one record of each:

* a source record and the target record its run places it at: a pair; key, value, headers and
  timestamp must be equal (a timestamp is compared only when the source had one, > 0, and the
  target topic does not stamp LogAppendTime: the copy lets the producer's clock stand in then);
* a copied source record whose target offset holds no record: `missing` (the target lost it:
  delete_records, retention, a recreated topic), or `compacted` when the target topic is compacted;
* a target record that a run places but whose source record is gone: `source-missing`, or
  `compacted` when the source topic is compacted;
* a committed source record in a covered range that no run places: `missing` (never copied);
* a target record inside the group's target span that no run of the map places: `extra` (written
  there by something other than this flow; between copies the target holds only commit markers).

Each checked source range gets record counts and a blake2b checksum per side over a canonical
encoding of what is compared; records one side lost to compaction are left out of both, so the
checksums are equal exactly when the range matches. Memory: the runs plus one record per side.
"""

from __future__ import annotations

import bisect
import hashlib
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple

from mirrorflow.state.offset_map import Run, below_target, merge_ranges

# what can differ, in the order a pair is compared
KINDS = ("key", "value", "headers", "timestamp", "missing", "source-missing", "extra")
TIMESTAMP_LOG_APPEND = 2  # confluent_kafka.TIMESTAMP_LOG_APPEND_TIME


class Rec(NamedTuple):
    """What verify compares of one record (`log_append`: the topic stamped the timestamp itself).
    A NamedTuple: one is made per record read, and that is most of what verify does."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int
    log_append: bool = False

    @classmethod
    def of(cls, m: Any) -> Rec:
        """A confluent_kafka Message as a Rec."""
        kind, ts = m.timestamp()
        h = m.headers()
        return cls(m.offset(), m.key(), m.value(), tuple(h) if h else (), ts, kind == TIMESTAMP_LOG_APPEND)


@dataclass(frozen=True)
class Mismatch:
    kind: str  # one of KINDS
    source_offset: int | None
    target_offset: int | None
    detail: str

    def line(self) -> str:
        src = "-" if self.source_offset is None else self.source_offset
        tgt = "-" if self.target_offset is None else self.target_offset
        return f"{self.kind} at source offset {src} / target offset {tgt}: {self.detail}"


@dataclass
class RangeCheck:
    """One covered source range [src_from, src_to) as checked, and where its runs put it on the target."""

    src_from: int
    src_to: int
    tgt_from: int = -1  # target offsets its runs span (-1: no run)
    tgt_to: int = -1
    source_records: int = 0
    target_records: int = 0
    matched: int = 0
    mismatches: int = 0
    compacted: int = 0  # copied records one side no longer holds because its topic is compacted
    source_checksum: str = ""
    target_checksum: str = ""

    @property
    def ok(self) -> bool:
        return self.mismatches == 0


class Tally:
    """The outcome of the walks of one partition: per range, per kind, and the first mismatch."""

    def __init__(self, ranges: list[RangeCheck]) -> None:
        self.ranges = ranges
        self.counts: dict[str, int] = {}
        self.first: Mismatch | None = None
        self.kept = 0  # target records a failback kept (Sides.kept): counted apart, never a mismatch
        self._hashes = [(_hasher(), _hasher()) for _ in ranges]
        self._starts = [r.src_from for r in ranges]

    def hash_source(self, i: int, r: Rec, with_timestamp: bool) -> None:
        self._hashes[i][0].update(encode(r, with_timestamp))

    def hash_target(self, i: int, r: Rec, with_timestamp: bool) -> None:
        self._hashes[i][1].update(encode(r, with_timestamp))

    def hash_both(self, i: int, data: bytes) -> None:
        hs, ht = self._hashes[i]
        hs.update(data)
        ht.update(data)

    def index(self, source_offset: int) -> int:
        """The range holding `source_offset` (the nearest one below it when none does)."""
        return max(0, bisect.bisect_right(self._starts, source_offset) - 1)

    def mismatch(self, i: int, m: Mismatch) -> None:
        self.ranges[i].mismatches += 1
        self.counts[m.kind] = self.counts.get(m.kind, 0) + 1
        if self.first is None:
            self.first = m

    def finish(self) -> None:
        for r, (hs, ht) in zip(self.ranges, self._hashes, strict=True):
            r.source_checksum, r.target_checksum = hs.hexdigest(), ht.hexdigest()


def _hasher() -> Any:
    return hashlib.blake2b(digest_size=16)


_NULL = b"\xff\xff\xff\xff"
_u32 = struct.Struct(">I").pack
_i64 = struct.Struct(">q").pack


def _field(b: bytes | None) -> bytes:
    return _NULL if b is None else _u32(len(b)) + b


def encode(r: Rec, with_timestamp: bool) -> bytes:
    """The canonical bytes of what is compared: key, value, headers (in order) and the timestamp."""
    k, v = r.key, r.value
    out = (_NULL if k is None else _u32(len(k)) + k) + (_NULL if v is None else _u32(len(v)) + v)
    out += _u32(len(r.headers))
    for name, value in r.headers:
        out += _field(name.encode()) + _field(value)
    return out + (_i64(r.timestamp) if with_timestamp else b"-")


def timestamps_comparable(src: Rec, tgt: Rec) -> bool:
    """The copy keeps CreateTime; a source without one (<= 0) gets the producer's clock, and a
    LogAppendTime target stamps its own."""
    return src.timestamp > 0 and not tgt.log_append


def difference(src: Rec, tgt: Rec) -> tuple[str, str] | None:
    """(kind, detail) of the first field that differs, or None."""
    if src.key != tgt.key:
        return "key", f"key {_short(src.key)} on the source, {_short(tgt.key)} on the target"
    if src.value != tgt.value:
        return "value", f"value {_short(src.value)} on the source, {_short(tgt.value)} on the target"
    if src.headers != tgt.headers:
        return "headers", f"headers {_names(src)} on the source, {_names(tgt)} on the target"
    if timestamps_comparable(src, tgt) and src.timestamp != tgt.timestamp:
        return "timestamp", f"timestamp {src.timestamp} on the source, {tgt.timestamp} on the target"
    return None


def _short(b: bytes | None, n: int = 24) -> str:
    if b is None:
        return "null"
    return f"{len(b)} bytes {b[:n]!r}{'...' if len(b) > n else ''}"


def _names(r: Rec) -> str:
    return "[" + ", ".join(f"{k}={_short(v, 8)}" for k, v in r.headers) + "]"


def group_runs(runs: list[Run]) -> list[list[Run]]:
    """Runs (sorted by source offset) cut where the target offset goes backwards."""
    groups: list[list[Run]] = []
    for r in runs:
        if groups and r.tgt >= groups[-1][-1].tgt + groups[-1][-1].count:
            groups[-1].append(r)
        else:
            groups.append([r])
    return groups


def clip(runs: Iterable[Run], lo: int, hi: int) -> list[Run]:
    """The parts of `runs` inside source offsets [lo, hi)."""
    out = []
    for r in runs:
        a, b = max(r.src, lo), min(r.src_end, hi)
        if a < b:
            out.append(Run(a, r.tgt + (a - r.src), b - a))
    return out


def deleted_on_target(runs: Iterable[Run], log_start: int) -> list[tuple[int, int]]:
    """The source ranges whose copies lie below the target's `log_start` (deleted there since: retention,
    delete-records), runs in source order; a stretch of such runs is one range, the gaps between them
    (transaction markers, aborted records) included, so the walk does not split at every marker."""
    out: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for r in sorted(runs, key=lambda r: r.src):
        low = below_target([r], log_start)
        if low:
            cur = (cur[0] if cur else r.src, low[0].src_end)
        if (not low or low[0].count < r.count) and cur:
            out.append(cur)
            cur = None
    if cur:
        out.append(cur)
    return merge_ranges(out)


class RunIndex:
    """Runs looked up by source or by target offset."""

    def __init__(self, runs: list[Run]) -> None:
        self.runs = runs
        self.by_tgt = sorted(runs, key=lambda r: r.tgt)
        self._src = [r.src for r in runs]
        self._tgt = [r.tgt for r in self.by_tgt]

    def target_of(self, s: int) -> int | None:
        i = bisect.bisect_right(self._src, s) - 1
        if i >= 0 and s < self.runs[i].src_end:
            return self.runs[i].tgt + (s - self.runs[i].src)
        return None

    def source_of(self, t: int) -> int | None:
        i = bisect.bisect_right(self._tgt, t) - 1
        if i >= 0 and t < self.by_tgt[i].tgt + self.by_tgt[i].count:
            return self.by_tgt[i].src + (t - self.by_tgt[i].tgt)
        return None


@dataclass(frozen=True)
class Sides:
    """What the walk needs to know about the two topics."""

    source_compacted: bool = False
    target_compacted: bool = False
    target_log_start: int = 0
    # target offsets [a, b) of records a failback kept on this target (the divergence and split
    # brain of the failed-over reverse flow, ops.dr.failback): not copies, so neither copies nor extra
    kept: tuple[tuple[int, int], ...] = ()
    # a verify since the last one: the target offset right after the copies that one verified (the
    # first group's target span starts there; walk_partition)
    target_from: int | None = None
    # target offsets [a, b) of copies of source offsets below the offset map's floor (its marks and
    # spans): the map forgot which source record each is, so they are not checkable, and not extra.
    # A backfill's island copied before the holes below it puts them among the checked copies.
    forgotten: tuple[tuple[int, int], ...] = ()

    def is_kept(self, target_offset: int) -> bool:
        return any(a <= target_offset < b for a, b in self.kept)

    def is_forgotten(self, target_offset: int) -> bool:
        return any(a <= target_offset < b for a, b in self.forgotten)


Reader = Callable[[int, int], Iterator[Rec]]  # the committed records of offsets [a, b), in order


def walk_partition(
    ranges: list[tuple[int, int]],
    runs: list[Run],
    all_runs: list[Run],
    source: Reader,
    target: Reader,
    sides: Sides,
    target_from: int | None = None,
) -> Tally:
    """Check the covered source `ranges` (sorted, disjoint) whose copies `runs` place (the map's
    runs clipped to them; `all_runs`: every run of the map). Each group of runs reads its share
    of the ranges from the source and its target span from the target, once; the target offsets
    between two groups' spans are read too. `target_from`: the first group's span starts there
    when lower (a verify since the last one: from the end of the copies it verified, so a record
    written between them and the next copy is found extra, as a verify from the start would)."""
    checks = []
    for a, b in ranges:
        rs = clip(runs, a, b)
        span = (min(r.tgt for r in rs), max(r.tgt + r.count for r in rs)) if rs else (-1, -1)
        checks.append(RangeCheck(a, b, *span))
    tally = Tally(checks)
    if not ranges:
        return tally
    groups = group_runs(runs) or [[]]
    everything = RunIndex(all_runs)
    spans = _target_spans(groups)
    if target_from is not None and groups[0] and 0 <= target_from < spans[0][0]:
        spans[0] = (target_from, spans[0][1])
    for gi, g in enumerate(groups):
        s_from = ranges[0][0] if gi == 0 else g[0].src
        s_to = groups[gi + 1][0].src if gi + 1 < len(groups) else ranges[-1][1]
        parts = [(max(a, s_from), min(b, s_to)) for a, b in ranges if b > s_from and a < s_to]
        src = chain.from_iterable(source(a, b) for a, b in parts)
        tgt = target(*spans[gi]) if g else iter(())

        def owns(t: int, gi: int = gi) -> bool:
            return next(j for j, (a, b) in enumerate(spans) if a <= t < b) == gi

        walk_group(tally, RunIndex(g), everything, owns, src, tgt, sides)
    tally.finish()
    return tally


def _target_spans(groups: list[list[Run]]) -> list[tuple[int, int]]:
    """The target offsets each group reads: from its first run to its last, and on to where the
    next group starts in target order (so a record between two groups is read, and found extra)."""
    spans = [(g[0].tgt, g[-1].tgt + g[-1].count) if g else (0, 0) for g in groups]
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    for i, j in zip(order, order[1:], strict=False):
        spans[i] = (spans[i][0], max(spans[i][1], spans[j][0]))
    return spans


def walk_group(
    tally: Tally,
    group: RunIndex,
    everything: RunIndex,
    owns_extra: Callable[[int], bool],
    source: Iterator[Rec],
    target: Iterator[Rec],
    sides: Sides,
) -> None:
    """Walk one group's source records (those of its covered ranges) and target records (its
    target span) together; `everything` holds every run of the map (a target record one of them
    places is not extra), `owns_extra(t)` says whether this group reports an extra at `t` (groups'
    target spans may overlap: each extra is reported once)."""
    s, t = next(source, None), next(target, None)
    last_src = group.runs[0].src if group.runs else 0
    while s is not None or t is not None:
        ts = group.target_of(s.offset) if s is not None else None
        if s is not None and ts is None:
            i = tally.index(s.offset)
            tally.ranges[i].source_records += 1
            tally.hash_source(i, s, s.timestamp > 0)
            tally.mismatch(i, Mismatch("missing", s.offset, None, "a committed source record no copy wrote"))
            s = next(source, None)
            continue
        st = group.source_of(t.offset) if t is not None else None
        if t is not None and st is None:
            if everything.source_of(t.offset) is None and owns_extra(t.offset) and not sides.is_forgotten(t.offset):
                if sides.is_kept(t.offset):
                    tally.kept += 1
                else:
                    i = tally.index(last_src)
                    tally.ranges[i].target_records += 1
                    tally.hash_target(i, t, True)
                    why = "a target record no copy of this flow wrote (between copies the target holds only markers)"
                    tally.mismatch(i, Mismatch("extra", None, t.offset, why))
            t = next(target, None)
            continue
        if s is not None and t is not None and ts == t.offset:
            _pair(tally, s, t)
            last_src = s.offset
            s, t = next(source, None), next(target, None)
        elif s is not None and (t is None or (ts is not None and ts < t.offset)):
            assert ts is not None
            _lost_on_target(tally, s, ts, sides)
            last_src = s.offset
            s = next(source, None)
        else:
            assert t is not None and st is not None
            _lost_on_source(tally, st, t, sides)
            last_src = st
            t = next(target, None)


def _pair(tally: Tally, s: Rec, t: Rec) -> None:
    i = tally.index(s.offset)
    r = tally.ranges[i]
    r.source_records += 1
    r.target_records += 1
    with_ts = timestamps_comparable(s, t)
    diff = difference(s, t)
    if diff is None:  # the same bytes on both sides: encoded once
        tally.hash_both(i, encode(s, with_ts))
        r.matched += 1
    else:
        tally.hash_source(i, s, with_ts)
        tally.hash_target(i, t, with_ts)
        tally.mismatch(i, Mismatch(diff[0], s.offset, t.offset, diff[1]))


def _lost_on_target(tally: Tally, s: Rec, t: int, sides: Sides) -> None:
    i = tally.index(s.offset)
    r = tally.ranges[i]
    r.source_records += 1
    if sides.target_compacted and t >= sides.target_log_start:
        r.compacted += 1
        return
    tally.hash_source(i, s, s.timestamp > 0)
    where = (
        f"below the target's log start {sides.target_log_start} (deleted on the target)"
        if t < sides.target_log_start
        else "no record at that target offset"
    )
    tally.mismatch(i, Mismatch("missing", s.offset, t, f"the copy of this source record is gone: {where}"))


def _lost_on_source(tally: Tally, s: int, t: Rec, sides: Sides) -> None:
    i = tally.index(s)
    r = tally.ranges[i]
    r.target_records += 1
    if sides.source_compacted:
        r.compacted += 1
        return
    tally.hash_target(i, t, True)
    why = "the source no longer holds the record this target record was copied from"
    tally.mismatch(i, Mismatch("source-missing", s, t.offset, why))
