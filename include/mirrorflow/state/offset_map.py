"""The offset map: exact source -> target offset translation for one source partition (pure, no I/O).

Every committed copy transaction writes one `MapEntry` to the flow's offset-map topic on the target
(see state.py and docs/state.md). An entry says which source offsets the transaction is
responsible for (`[src_from, src_to)`, gaps included: compaction holes, transaction markers and
aborted records have no record but are covered), where each copied record landed (`runs`: stretches
where source and target offsets are both consecutive) and the target offset right after the last
record written (`tgt_end`). `lost` > 0 marks a gap event: that many offsets right before
`src_from` were deleted by source retention before they were copied.

`PartitionMap.translate(g)` turns a committed source group offset `g` (= the next record the group
would read) into the target offset of the first copied record at or after `g` -- exact, no MM2-style
"+1" rounding -- so a consumer resuming there reads exactly the records it had not read yet.

The map stays bounded: `PartitionMap.folded()` is the whole map as one value (`Folded`, what the
snapshot topic stores, see state.snapshot), a map can be built from such a base plus the entries
written after it, and `pruned()` keeps every run at or above a floor and, below it, only the runs
groups sit in and exponentially spaced landmarks (state.landmarks). Merging is associative (ranges
merge, runs keep each offset's lowest target, `lost` adds up, each entry folded once), so folding
never changes a translation at or above the floor; below it a translation is exact where a group
is pinned and otherwise an earlier position (`reread`), never a later one.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property

from mirrorflow.state.landmarks import Piece, Pieces, Span, regular, run_piece, span_piece, thin


@dataclass(frozen=True)
class Run:
    """Source offsets src..src+count-1 were written to target offsets tgt..tgt+count-1."""

    src: int
    tgt: int
    count: int

    @property
    def src_end(self) -> int:
        return self.src + self.count


@dataclass(frozen=True)
class MapEntry:
    """One committed copy transaction of one source partition."""

    topic: str  # SOURCE topic
    partition: int  # SOURCE partition
    src_from: int  # covered source range [src_from, src_to), gaps included
    src_to: int
    runs: tuple[Run, ...]
    tgt_end: int  # target offset right after the last record written
    lost: int = 0  # offsets lost to source retention right before src_from (gap event)
    # the map epoch: re-seeding a recreated topic starts a new epoch (its first entry, with an empty
    # range and no runs, marks it); translation uses only the entries of the newest epoch
    epoch: int = 0
    # where records lie only approximately (a failback's inverse of what the failed-over flow's map
    # kept below its floor, state.landmarks.inverted): the map's floor rises over them
    spans: tuple[Span, ...] = ()

    @property
    def records(self) -> int:
        return sum(r.count for r in self.runs)


@dataclass(frozen=True)
class Translation:
    source_offset: int
    target_offset: int | None  # None only when nothing was ever copied
    # "exact": every source offset in [source_offset, next copied record) is covered
    # "end":   source_offset is at the end of the covered data (nothing newer copied yet): target = tgt_end
    # "ahead": source_offset beyond what was covered: target = tgt_end; `missing` = offsets not yet replicated
    # "before": source_offset before the first covered offset: target = first copied target offset;
    #           `missing` = offsets never replicated (source retention, initial position)
    # "gap":   some offsets in [source_offset, next copied record) were never covered: `missing` counts them
    # "none":  nothing copied for this partition
    # "reread": where the first record at or after source_offset landed is forgotten (the map was
    #           thinned there) or target order is not source order (a backfill): target = the lowest
    #           target any record at or after it may have; `reread` = at most that many records
    #           below source_offset are read again (never a skip)
    # "pruned": source_offset below the source's log start and every group when the map was last
    #           folded (moved there by hand): target = the nearest known position at or before it
    #           (None: an older snapshot forgot it, no translation); `reread` as above
    status: str
    missing: int = 0
    reread: int = 0  # records with a lower source offset a consumer resuming at target_offset reads again


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged (adjacent or overlapping) half-open ranges; empty ranges are dropped."""
    out: list[tuple[int, int]] = []
    for a, b in sorted((a, b) for a, b in ranges if b > a):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def uncovered(ranges: list[tuple[int, int]], lo: int, hi: int) -> int:
    """How many offsets of [lo, hi) the merged `ranges` do not cover."""
    if hi <= lo:
        return 0
    covered = 0
    i = max(bisect.bisect_right(ranges, (lo, float("inf"))) - 1, 0)
    while i < len(ranges):
        a, b = ranges[i]
        if a >= hi:
            break
        covered += max(0, min(b, hi) - max(a, lo))
        i += 1
    return (hi - lo) - covered


def subtract_ranges(lo: int, hi: int, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [lo, hi) that the merged `ranges` do not cover, in order."""
    out: list[tuple[int, int]] = []
    cur = lo
    for a, b in ranges:
        if b <= cur:
            continue
        if a >= hi:
            break
        if a > cur:
            out.append((cur, min(a, hi)))
        cur = max(cur, b)
        if cur >= hi:
            break
    if cur < hi:
        out.append((cur, hi))
    return out


def merge_runs(runs: Iterable[Run]) -> list[Run]:
    """Runs merged into non-overlapping, sorted runs; where runs overlap (an at-least-once retry
    copied a record twice) each source offset keeps its lowest target offset, its earliest copy.

    Per source offset this is a minimum, so merging is associative and order-free: folding entries
    into a snapshot and the snapshot with later entries gives the same runs as merging them all.
    """
    rs = sorted((r for r in runs if r.count > 0), key=lambda r: (r.src, r.tgt))
    if all(a.src_end <= b.src for a, b in zip(rs, rs[1:], strict=False)):
        return _joined(rs)
    # overlaps: sweep the elementary intervals; the covering run with the smallest tgt - src wins
    bounds = sorted({r.src for r in rs} | {r.src_end for r in rs})
    out: list[Run] = []
    active: list[tuple[int, int, int]] = []  # heap of (tgt - src, src_end, index)
    i = 0
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        while i < len(rs) and rs[i].src <= lo:
            heapq.heappush(active, (rs[i].tgt - rs[i].src, rs[i].src_end, i))
            i += 1
        while active and active[0][1] <= lo:
            heapq.heappop(active)
        if active:
            out.append(Run(lo, lo + active[0][0], hi - lo))
    return _joined(out)


def _joined(runs: list[Run]) -> list[Run]:
    """Sorted non-overlapping runs with adjacent ones (both offsets consecutive) joined."""
    out: list[Run] = []
    for r in runs:
        if out and out[-1].src_end == r.src and out[-1].tgt + out[-1].count == r.tgt:
            out[-1] = Run(out[-1].src, out[-1].tgt, out[-1].count + r.count)
        else:
            out.append(r)
    return out


def clip_runs(runs: list[Run], floor: int) -> list[Run]:
    """The parts of sorted runs at or above source offset `floor`."""
    i = bisect.bisect_right([r.src_end for r in runs], floor)
    out = runs[i:]
    if out and out[0].src < floor:
        cut = floor - out[0].src
        out[0] = Run(floor, out[0].tgt + cut, out[0].count - cut)
    return out


def from_target(runs: Iterable[Run], at: int) -> list[Run]:
    """The parts of runs (in any order) at or above target offset `at` (clip_runs cuts by source offset)."""
    return [
        Run(r.src + max(0, at - r.tgt), max(r.tgt, at), r.count - max(0, at - r.tgt))
        for r in runs
        if r.tgt + r.count > at
    ]


def below_target(runs: Iterable[Run], at: int) -> list[Run]:
    """The parts of runs (in any order) below target offset `at` (what from_target leaves out)."""
    return [Run(r.src, r.tgt, min(r.count, at - r.tgt)) for r in runs if r.tgt < at and r.count > 0]


def runs_below(runs: list[Run], floor: int) -> list[Run]:
    """The parts of sorted runs below source offset `floor` (what clip_runs leaves out)."""
    out = []
    for r in runs:
        if r.src >= floor:
            break
        out.append(r if r.src_end <= floor else Run(r.src, r.tgt, floor - r.src))
    return out


def clip_ranges(ranges: list[tuple[int, int]], floor: int) -> list[tuple[int, int]]:
    """The parts of sorted merged ranges at or above `floor`."""
    return [(max(a, floor), b) for a, b in ranges if b > floor]


@dataclass(frozen=True)
class Folded:
    """A partition's offset map merged into one value: what a snapshot record stores.

    `runs` hold every run at or above `floor`; below it `marks` (runs kept exactly: where groups
    sat, the landmarks) and `spans` (the rest, merged) keep where a translation may resume, and
    `pins` the group offsets the last fold that could read them kept exact; below `forgotten` (a
    snapshot of a mirrorflow before landmarks pruned there) nothing is known. `covered` holds what
    lies at or above `covered_from` (None: `floor`, as snapshots before landmarks; the source's log
    start and every group's offset: no translation needs less); `first` and `end` keep the first
    covered source offset and the end of the last covered range of everything ever folded (so
    "before", "gap" and "ahead" stay exact), `anchor` the smallest entry start (for a map of empty
    gap events only). `entries` counts the folded entries (0: nothing copied).
    """

    epoch: int = 0
    entries: int = 0
    covered: tuple[tuple[int, int], ...] = ()
    runs: tuple[Run, ...] = ()
    tgt_end: int | None = None
    lost: int = 0
    first: int | None = None
    end: int | None = None
    anchor: int | None = None
    floor: int = 0
    covered_from: int | None = None
    marks: tuple[Run, ...] = ()
    spans: tuple[Span, ...] = ()
    pins: tuple[int, ...] = ()
    forgotten: int | None = None


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


class PartitionMap:
    """The offset map of one source partition: a folded base (a snapshot, maybe none) plus the
    committed entries after it, indexed for translation.

    Only the newest epoch counts: entries (or a base) of an older epoch are dropped. Overlapping
    runs only appear when the flow ran with exactly.once=false (an at-least-once retry copies some
    records twice); each source offset keeps its earliest target copy (`merge_runs`), so a resuming
    consumer may re-read duplicates but never skips. At or above `floor` every run is kept and
    translation is exact; below it only what `pruned` kept (see state.landmarks).
    """

    def __init__(self, entries: Iterable[MapEntry] = (), base: Folded | None = None) -> None:
        entries = list(entries)
        base = base or Folded()
        self.epoch: int = max([base.epoch, *(e.epoch for e in entries)])
        if base.epoch < self.epoch:
            base = Folded(epoch=self.epoch)
        current = [e for e in entries if e.epoch == self.epoch]
        self.count: int = base.entries + len(current)
        self.covered_from: int = base.floor if base.covered_from is None else base.covered_from
        seeded = {s for e in current for s in e.spans}
        self.floor: int = max(base.floor, max((s.src_end for s in seeded), default=0))
        nonempty = [e.src_from for e in current if e.src_to > e.src_from]
        self.first: int | None = _min(base.first, min(nonempty, default=None))
        self.anchor: int | None = _min(base.anchor, min((e.src_from for e in current), default=None))
        ranges = merge_ranges([*base.covered, *((e.src_from, e.src_to) for e in current)])
        self.end: int | None = _max(base.end, ranges[-1][1] if ranges else None)
        self.covered: list[tuple[int, int]] = clip_ranges(ranges, self.covered_from)
        self.lost: int = base.lost + sum(e.lost for e in current)
        self.tgt_end: int | None = _max(base.tgt_end, max((e.tgt_end for e in current), default=None))
        runs = merge_runs([*base.runs, *(r for e in current for r in e.runs)])
        self.runs: list[Run] = clip_runs(runs, self.floor)
        # below the floor: what the last fold kept, and what was copied there since (a backfill)
        below = runs_below(runs, self.floor)
        self.marks: list[Run] = merge_runs([*base.marks, *below]) if below else list(base.marks)
        self.spans: list[Span] = list(base.spans)
        if seeded - set(self.spans):  # a failback re-run writes the same entries again
            self.spans = sorted(seeded.union(self.spans), key=lambda s: (s.src, s.tgt))
        self.pins: tuple[int, ...] = base.pins
        self.forgotten: int | None = base.forgotten
        self._starts = [r.src for r in self.runs]
        # a backfill copied older records after newer ones: target order is not source order here
        self.reordered: bool = any(b.tgt < a.tgt for a, b in zip(self.runs, self.runs[1:], strict=False))
        if self.marks or self.spans:  # and below the floor (few pieces, all before the runs)
            low = self.pieces_below
            self.reordered |= not regular(low) or bool(self.runs and low[-1].tgt_end > self.runs[0].tgt)

    @cached_property
    def pieces_below(self) -> list[Piece]:
        """The marks and spans as pieces, in source order."""
        return sorted([*(run_piece(r.src, r.tgt, r.count) for r in self.marks), *(span_piece(s) for s in self.spans)])

    @cached_property
    def _pieces(self) -> Pieces:
        """Every run and span, indexed (built when a translation needs more than the runs)."""
        return Pieces([*self.pieces_below, *(run_piece(r.src, r.tgt, r.count) for r in self.runs)], in_order=True)

    # -- folding and pruning ------------------------------------------------------------------
    def folded(self) -> Folded:
        """This map as one value (what a snapshot stores); PartitionMap(later, base=m.folded())
        translates exactly as a map of all the entries."""
        return Folded(
            self.epoch,
            self.count,
            tuple(self.covered),
            tuple(self.runs),
            self.tgt_end,
            self.lost,
            self.first,
            self.end,
            self.anchor,
            self.floor,
            None if self.covered_from == self.floor else self.covered_from,
            tuple(self.marks),
            tuple(self.spans),
            self.pins,
            self.forgotten,
        )

    def pruned(
        self, floor: int | None = None, max_runs: int | None = None, pins: Iterable[int] | None = None
    ) -> PartitionMap:
        """This map bounded: `floor` (the source's log start and every group's committed offset: no
        translation needs less; it never goes down) drops the covered ranges below it, and at most
        `max_runs` runs are kept above the map's floor, which rises to the oldest run kept. Below
        the map's floor only the runs holding a `pins` offset (the groups' committed offsets; None:
        those of the last fold) and landmarks stay, the rest merges into spans (state.landmarks).
        Translation stays exact at or above the floor and at every pin."""
        low = max(self.covered_from, floor if floor is not None else self.covered_from)
        f = max(self.floor, low)
        dense = clip_runs(self.runs, f)
        if max_runs is not None and len(dense) > max_runs:
            f = max(f, dense[-max_runs].src if max_runs > 0 else (self.end or f))
        kept_pins = self.pins if pins is None else tuple(sorted(set(pins)))
        below = merge_runs([*self.marks, *runs_below(self.runs, f)])
        keep, spans = thin([(r.src, r.tgt, r.count) for r in below], self.spans, kept_pins, f)
        marks = [below[i] for i in keep]
        if (f, low, kept_pins, marks, spans) == (self.floor, self.covered_from, self.pins, self.marks, self.spans):
            return self
        base = replace(
            self.folded(),
            floor=f,
            covered_from=None if low == f else low,
            runs=tuple(clip_runs(self.runs, f)),
            covered=tuple(clip_ranges(self.covered, low)),
            marks=tuple(marks),
            spans=tuple(spans),
            pins=kept_pins,
        )
        return PartitionMap((), base)

    # -- queries ------------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        """How many committed entries the map was built from (a snapshot counts what it folded)."""
        return self.count

    @property
    def records(self) -> int:
        """Copied records the map still places exactly at or above the floor."""
        return sum(r.count for r in self.runs)

    @property
    def start(self) -> int | None:
        """The first covered source offset (also when pruned), None when nothing was covered."""
        return self.first

    def target_of(self, source_offset: int) -> int | None:
        """The target offset the record at `source_offset` was copied to (None: not a copied record,
        or below the floor)."""
        i = bisect.bisect_right(self._starts, source_offset) - 1
        if i >= 0 and source_offset < self.runs[i].src_end:
            r = self.runs[i]
            return r.tgt + (source_offset - r.src)
        return None

    def first_copied_at_or_after(self, source_offset: int) -> tuple[int, int] | None:
        """(source offset, target offset) of the first copied record at or after `source_offset`
        among the runs at or above the floor."""
        i = bisect.bisect_right(self._starts, source_offset) - 1
        if i >= 0 and source_offset < self.runs[i].src_end:
            r = self.runs[i]
            return source_offset, r.tgt + (source_offset - r.src)
        if i + 1 < len(self.runs):
            r = self.runs[i + 1]
            return r.src, r.tgt
        return None

    def translate(self, source_offset: int) -> Translation:
        """Where a group that committed `source_offset` resumes on the target: exactly at its next
        record where the map knows it, else the lowest target any record at or after it may have
        (status `reread`, saying how many records at most it reads again). Never later."""
        g = source_offset
        if not self.count:
            return Translation(g, None, "none")
        assert self.tgt_end is not None
        # in source order, at or above the floor the runs alone say it (what lies below is read)
        plain = not self.reordered and (g >= self.floor or not (self.marks or self.spans))
        if self.forgotten is not None and g < self.forgotten and self.first is not None and self.first < self.forgotten:
            return Translation(g, None, "pruned")  # a mirrorflow before landmarks pruned these: unknown
        if g < self.covered_from and self.first is not None and self.first < self.covered_from:
            t = self._pieces.resume(g, self.tgt_end)
            return Translation(g, t, "pruned", 0, self._pieces.rereads(g, t))
        tr = self._located(g, self.first_copied_at_or_after(g) if plain else self._pieces.next_known(g))
        if plain:
            return tr
        assert tr.target_offset is not None
        t = self._pieces.resume(g, tr.target_offset)
        n = self._pieces.rereads(g, t)
        if n or self._pieces.inside_span(g):
            return Translation(g, t, "reread", tr.missing, n)
        return tr if t == tr.target_offset else replace(tr, target_offset=t)

    def rereads(self, source_offset: int, target_offset: int) -> int:
        """At most how many copied records below `source_offset` lie at `target_offset` or later:
        what a consumer that committed `source_offset` reads again when it resumes there."""
        if not self.reordered and (source_offset >= self.floor or not (self.marks or self.spans)):
            nxt = self.first_copied_at_or_after(source_offset)
            exact = nxt[1] if nxt is not None else self.tgt_end
            if exact is not None and target_offset >= exact:
                return 0
        return self._pieces.rereads(source_offset, target_offset)

    def _located(self, g: int, nxt: tuple[int, int] | None) -> Translation:
        """The translation of `g` given the first record known at or after it (`nxt`)."""
        assert self.tgt_end is not None
        first_covered = self.first
        if nxt is not None:
            src, tgt = nxt
            missing = uncovered(self.covered, g, src)
            if missing == 0:
                return Translation(g, tgt, "exact")
            if first_covered is not None and g < first_covered:
                return Translation(g, tgt, "before", missing)
            return Translation(g, tgt, "gap", missing)
        # nothing copied at or after g: resume at the end of what was written
        end = self.end
        if end is None:  # only empty gap events so far
            lo = self.anchor if self.anchor is not None else g
            if g < lo:
                return Translation(g, self.tgt_end, "before", lo - g)
            return Translation(g, self.tgt_end, "ahead" if g > lo else "end", max(0, g - lo))
        if g > end:
            return Translation(g, self.tgt_end, "ahead", g - end)
        missing = uncovered(self.covered, g, end)
        if missing == 0:
            return Translation(g, self.tgt_end, "end")
        if first_covered is not None and g < first_covered:
            return Translation(g, self.tgt_end, "before", missing)
        return Translation(g, self.tgt_end, "gap", missing)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return (
            f"PartitionMap(covered={self.covered}, runs={len(self.runs)}, tgt_end={self.tgt_end}, "
            f"lost={self.lost}, floor={self.floor}, marks={len(self.marks)}, spans={len(self.spans)})"
        )
