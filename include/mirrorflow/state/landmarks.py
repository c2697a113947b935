"""What the offset map keeps of a partition below its floor, and where a group resumes there (pure).

The offset map is bounded (`offset.map.max.runs`): above its floor it keeps every run, so translation
is exact there. Below the floor it keeps, as MirrorMaker 2's OffsetSyncStore keeps exponentially
spaced offset syncs:

* the runs holding an offset some consumer group has committed (its **pins**): an idle group stays
  exact for as long as it stays idle;
* runs spaced exponentially back from the floor (**landmarks**, `landmark_offsets`, a few per
  octave of distance): precise near the floor, coarser further back;
* everything between them merged into **spans**: "`records` records with source offsets in
  [src, src_end) lie at target offsets in [tgt, tgt_end)", in order or not.

Translation never moves a group past a record it has not read: a group at source offset `g` resumes
at the lowest target offset any record at or after `g` may have (`Pieces.resume`), which is exact
where the map still knows, and earlier where it forgot (inside a span) or where target order is not
source order (a backfill copied older records after newer ones). `Pieces.rereads` bounds how many
records already read (source offset below `g`) a consumer resuming there reads again. This is MM2's
degradation (an earlier, known position: a re-read, never a skip), said out loud.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from mirrorflow.errors import StateError

# landmarks per octave of distance below the floor: in [floor - 2d, floor - d) they are spaced about
# d / 4 apart, so a group d offsets below the floor re-reads at most about d / 4 offsets' records
LANDMARKS_PER_OCTAVE_LOG2 = 2


def landmark_offsets(floor: int, lowest: int) -> list[int]:
    """The source offsets in [lowest, floor) whose runs stay as landmarks: in each octave
    (floor - 2^(k+1), floor - 2^k] the multiples of 2^max(0, k - LANDMARKS_PER_OCTAVE_LOG2). The
    grids are nested: as the floor rises, an offset only ever leaves them, so a landmark kept once
    is still there whenever its offset is chosen again."""
    out: list[int] = []
    k = 0
    while floor - (1 << k) >= lowest:
        step = 1 << max(0, k - LANDMARKS_PER_OCTAVE_LOG2)
        hi, lo = floor - (1 << k), max(lowest - 1, floor - (1 << (k + 1)))
        x = hi - hi % step
        while x > lo:
            out.append(x)
            x -= step
        k += 1
    return out


@dataclass(frozen=True)
class Span:
    """`records` copied records with source offsets in [src, src_end) at target offsets in
    [tgt, tgt_end), where exactly forgotten. `src` and `src_end - 1` are records' offsets."""

    src: int
    src_end: int
    tgt: int
    tgt_end: int
    records: int


def encode_spans(spans: Sequence[Span]) -> list[int]:
    """Spans as a flat list of 5-tuples (how the state records store them)."""
    return [x for s in spans for x in (s.src, s.src_end, s.tgt, s.tgt_end, s.records)]


def decode_spans(flat: list[int], what: str) -> tuple[Span, ...]:
    if len(flat) % 5:
        raise StateError(f"{what}: spans list of length {len(flat)} is not made of 5-tuples")
    return tuple(Span(*(int(x) for x in flat[i : i + 5])) for i in range(0, len(flat), 5))


class Piece(NamedTuple):
    """A run (exact: source src+i at target tgt+i) or a span, as the translation sees both."""

    src: int
    src_end: int
    tgt: int
    tgt_end: int
    records: int
    exact: bool


def run_piece(src: int, tgt: int, count: int) -> Piece:
    return Piece(src, src + count, tgt, tgt + count, count, True)


def span_piece(s: Span) -> Piece:
    return Piece(s.src, s.src_end, s.tgt, s.tgt_end, s.records, False)


def regular(pieces: Sequence[Piece]) -> bool:
    """Pieces (sorted by source offset) that do not overlap and whose targets follow source order."""
    return all(b.src >= a.src_end and b.tgt >= a.tgt_end for a, b in zip(pieces, pieces[1:], strict=False))


class Pieces:
    """The runs and spans of a partition, sorted by source offset, indexed to answer where a group
    resumes and how much it re-reads."""

    def __init__(self, pieces: Iterable[Piece], in_order: bool = False) -> None:
        self.items = list(pieces) if in_order else sorted(pieces)
        self.starts = [p.src for p in self.items]
        n = len(self.items)
        # lowest target offset of the pieces from i on; highest source end of the pieces up to i
        self.suffix_min = [0] * n
        low = None
        for i in range(n - 1, -1, -1):
            low = self.items[i].tgt if low is None else min(low, self.items[i].tgt)
            self.suffix_min[i] = low
        self.prefix_max_end = []
        high = -1
        for p in self.items:
            high = max(high, p.src_end)
            self.prefix_max_end.append(high)
        # in source order with targets in the same order, nothing overlapping: the cheap case
        self.regular = regular(self.items)

    def _holding(self, g: int) -> list[Piece]:
        """The pieces that start at or before `g` and end after it."""
        out = []
        j = bisect.bisect_right(self.starts, g) - 1
        while j >= 0 and self.prefix_max_end[j] > g:
            if self.items[j].src_end > g:
                out.append(self.items[j])
            j -= 1
        return out

    def next_known(self, g: int) -> tuple[int, int] | None:
        """(source, target) offset of the first record at or after `g` as far as known: the record at
        `g` in an exact run, else the start of the next piece (a span's lowest target). Inside a span
        (the record unknown) `g` itself with the span's lowest target."""
        holding = self._holding(g)
        for p in holding:
            if p.exact:
                return g, p.tgt + (g - p.src)
        if holding:
            return g, min(p.tgt for p in holding)
        i = bisect.bisect_right(self.starts, g)
        return (self.items[i].src, self.items[i].tgt) if i < len(self.items) else None

    def inside_span(self, g: int) -> bool:
        """`g` lies after the first record of a span: where its next record landed is forgotten."""
        return any(not p.exact and p.src < g for p in self._holding(g))

    def resume(self, g: int, default: int) -> int:
        """The lowest target offset any record at or after source offset `g` may have (`default`,
        the target's end of the copied data, when there is none): resuming there skips nothing."""
        best = default
        i = bisect.bisect_right(self.starts, g)
        if i < len(self.items):
            best = min(best, self.suffix_min[i])
        for p in self._holding(g):
            best = min(best, p.tgt + (g - p.src) if p.exact else p.tgt)
        return best

    def rereads(self, g: int, t: int) -> int:
        """At most how many records with a source offset below `g` lie at target offset `t` or later:
        what a consumer that had read up to `g` reads again when it resumes at `t`."""
        i = bisect.bisect_right(self.starts, g - 1)  # pieces starting below g: items[:i]
        total = 0
        for j in range(i - 1, -1, -1):
            p = self.items[j]
            if self.regular and p.tgt_end <= t:
                break  # in order: every earlier piece lies below t as well
            hi = min(p.src_end, g)
            if p.exact:
                total += max(0, hi - max(p.src, p.src + (t - p.tgt)))
            elif p.tgt_end > t:
                total += min(p.records, hi - p.src, p.tgt_end - max(t, p.tgt))
        return total


def thin(
    runs: Sequence[tuple[int, int, int]], spans: Sequence[Span], pins: Iterable[int], floor: int
) -> tuple[list[int], list[Span]]:
    """What to keep below `floor` of `runs` ((src, tgt, count), sorted by src) and `spans`: the
    indexes of the runs kept exactly (those holding a pinned offset, and the landmarks: the last run
    starting at or before each of `landmark_offsets`) and the spans that replace the
    others (a lone run between two kept ones stays a run: a span would not be smaller). Thinning
    what it returned again changes nothing."""
    starts = [r[0] for r in runs]
    keep: set[int] = set()
    for p in pins:  # the run holding p, or when p is in a hole the run after it (its next record)
        i = bisect.bisect_right(starts, p) - 1
        if i >= 0 and p < runs[i][0] + runs[i][2]:
            keep.add(i)
        elif i + 1 < len(runs):
            keep.add(i + 1)
    for x in landmark_offsets(floor, starts[0] if starts else floor):
        keep.add(bisect.bisect_right(starts, x) - 1)
    # walk runs and spans in source order: what lies between two kept runs becomes one span
    order = sorted(
        [(r[0], 0, i) for i, r in enumerate(runs)] + [(s.src, 1, i) for i, s in enumerate(spans)],
    )
    kept: list[int] = []
    out: list[Span] = []
    group: list[tuple[int, int]] = []  # (kind, index) of the pieces since the last kept run

    def close() -> None:
        if len(group) == 1 and group[0][0] == 0:
            kept.append(group[0][1])  # a lone run: cheaper than a span
        elif group:
            ps = [run_piece(*runs[i]) if kind == 0 else span_piece(spans[i]) for kind, i in group]
            out.append(
                Span(
                    min(p.src for p in ps),
                    max(p.src_end for p in ps),
                    min(p.tgt for p in ps),
                    max(p.tgt_end for p in ps),
                    sum(p.records for p in ps),
                )
            )
        group.clear()

    for _, kind, i in order:
        if kind == 0 and i in keep:
            close()
            kept.append(i)
        else:
            group.append((kind, i))
    close()
    return sorted(kept), out


def inverted(
    pieces: Sequence[Piece], lo: int, hi: int, least: int, after: int
) -> tuple[list[tuple[int, int, int]], list[Span]]:
    """What a map's pieces below its floor (source -> target) say the other way round over target
    offsets [lo, hi) (a failback maps the failed-over flow's target back to its source): the exact runs
    as (src, tgt, count) and the spans, each with source and target swapped and cut to [lo, hi). Where
    no piece places the stretch from `lo` to the first piece (the map forgot it: a snapshot of a
    mirrorflow before landmarks), a span says its records came from somewhere in [least, the first
    piece's source), or [least, `after`) (the source offset of the first run above the floor) without one.
    The spans' sources are raised to `least` (the lowest source offset that can hold them: the first it
    copied, the source's log start now), so a group resumes at or before its next record, never past it."""
    runs: list[tuple[int, int, int]] = []
    spans: list[Span] = []
    for p in pieces:
        a, b = max(p.tgt, lo), min(p.tgt_end, hi)
        if a >= b:
            continue
        if p.exact:
            runs.append((a, p.src + (a - p.tgt), b - a))
        else:
            src = max(p.src, least)
            spans.append(Span(a, b, src, max(p.src_end, src), min(p.records, b - a)))
    placed = sorted([(r[0], r[1]) for r in runs] + [(s.src, s.tgt) for s in spans])
    first, source = placed[0] if placed else (hi, after)
    if first > lo:
        spans.append(Span(lo, first, least, max(source, least), first - lo))
    return sorted(runs), sorted(spans, key=lambda s: (s.src, s.tgt))
