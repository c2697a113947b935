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
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass


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
    status: str
    missing: int = 0


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


class PartitionMap:
    """All committed entries of one source partition, indexed for translation.

    Overlapping runs only appear when the flow ran with exactly.once=false (an at-least-once
    retry copies some records twice); then each source offset keeps its earliest target copy
    (the lowest target offset), so a resuming consumer may re-read duplicates but never skips.
    """

    def __init__(self, entries: Iterable[MapEntry]) -> None:
        entries = list(entries)
        self.epoch: int = max((e.epoch for e in entries), default=0)
        current = [e for e in entries if e.epoch == self.epoch]
        self.entries: list[MapEntry] = sorted(current, key=lambda e: (e.src_from, e.tgt_end))
        self.covered: list[tuple[int, int]] = merge_ranges((e.src_from, e.src_to) for e in self.entries)
        self.lost: int = sum(e.lost for e in self.entries)
        self.tgt_end: int | None = max((e.tgt_end for e in self.entries), default=None)
        runs = sorted((r for e in self.entries for r in e.runs if r.count > 0), key=lambda r: (r.src, r.tgt))
        self.runs: list[Run] = []
        upto = None  # end of the source offsets already assigned to a run
        for r in runs:
            if upto is not None and r.src < upto:
                if r.src_end <= upto:
                    continue
                cut = upto - r.src
                r = Run(r.src + cut, r.tgt + cut, r.count - cut)
            if self.runs and self.runs[-1].src_end == r.src and self.runs[-1].tgt + self.runs[-1].count == r.tgt:
                last = self.runs[-1]
                self.runs[-1] = Run(last.src, last.tgt, last.count + r.count)
            else:
                self.runs.append(r)
            upto = r.src_end
        self._starts = [r.src for r in self.runs]

    # -- queries ------------------------------------------------------------------------------
    @property
    def records(self) -> int:
        return sum(r.count for r in self.runs)

    @property
    def end(self) -> int | None:
        """The end of the last covered range (the next source offset to copy), None when empty."""
        return self.covered[-1][1] if self.covered else None

    @property
    def start(self) -> int | None:
        return self.covered[0][0] if self.covered else None

    def target_of(self, source_offset: int) -> int | None:
        """The target offset the record at `source_offset` was copied to (None: not a copied record)."""
        i = bisect.bisect_right(self._starts, source_offset) - 1
        if i >= 0 and source_offset < self.runs[i].src_end:
            r = self.runs[i]
            return r.tgt + (source_offset - r.src)
        return None

    def first_copied_at_or_after(self, source_offset: int) -> tuple[int, int] | None:
        """(source offset, target offset) of the first copied record at or after `source_offset`."""
        i = bisect.bisect_right(self._starts, source_offset) - 1
        if i >= 0 and source_offset < self.runs[i].src_end:
            r = self.runs[i]
            return source_offset, r.tgt + (source_offset - r.src)
        if i + 1 < len(self.runs):
            r = self.runs[i + 1]
            return r.src, r.tgt
        return None

    def translate(self, source_offset: int) -> Translation:
        g = source_offset
        if not self.entries:
            return Translation(g, None, "none")
        assert self.tgt_end is not None
        nxt = self.first_copied_at_or_after(g)
        first_covered = self.covered[0][0] if self.covered else None
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
            lo = min((e.src_from for e in self.entries), default=g)
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
        return f"PartitionMap(covered={self.covered}, runs={len(self.runs)}, tgt_end={self.tgt_end}, lost={self.lost})"
