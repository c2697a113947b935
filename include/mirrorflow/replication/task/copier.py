"""Copying a task's units: their results, and where each partition's copy stands.

A unit is a planned source range of one partition; a task (one task slot, replication.task.task_copier)
copies all its units with one transactional producer, many partitions per transaction. The plan is
advisory: once the task has established its producer's epoch (older attempts fenced) it re-reads
its partitions' committed progress (read_committed) and copies only what the progress's ledger does
not cover yet, continuing right after the committed progress: never a hole, never a covered range
twice (`ranges_to_copy`). Offsets that source retention deleted before they were copied become a
gap event (an offset-map entry with `lost`, and the progress's `lost`/`gaps`), and the copy
continues at the log start (`retention_gap`). A unit that reaches `unit.max.bytes` stops after its
current batch (status `partial`) and the next run continues. `PartitionCopy` holds one partition's
ranges and its units' results (`UnitResult`, what reports and the run log need).

Clients are built inside the task (they cannot be pickled) by the task's FlowClients; executors
load the config themselves, so secrets never travel in the plan. Test crash points come in as a
`faults.Faults` chosen where the task starts (production: `NO_FAULTS`). The entry of every mode is
`task_copier.copy_planned`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.plan.run_plan import Unit
from mirrorflow.replication.task.reader import OPEN_END, Batch
from mirrorflow.state.offset_map import merge_ranges, subtract_ranges, uncovered
from mirrorflow.state.records import Progress

if TYPE_CHECKING:
    from mirrorflow.replication.task.transaction_writer import PartBatch


@dataclass
class UnitResult:
    topic: str
    partition: int
    target_topic: str
    status: str  # ok | partial (stopped at unit.max.bytes) | fenced | failed | skipped (nothing left)
    start: int  # planned range
    end: int
    copied_from: int = -1  # the source range this attempt covered
    copied_to: int = -1
    records: int = 0
    bytes: int = 0
    transactions: int = 0
    lost: int = 0  # offsets lost to source retention, recorded as a gap event
    lost_range: tuple[int, int] | None = None
    tgt_end: int = -1
    target_from: int = -1  # target offset of the first record this attempt wrote (-1: none)
    last_timestamp: int = -1  # source timestamp of the last copied record
    max_latency_ms: int = -1  # commit time minus source timestamp, worst record of the unit
    # MM2's replication-latency-ms and record-age-ms families (see `committed`): min, and a sum over
    # `timed_records` for the average; the record age's max is `max_age_ms`
    min_latency_ms: int = -1
    sum_latency_ms: int = 0
    min_age_ms: int = -1
    max_age_ms: int = -1
    sum_age_ms: int = 0
    timed_records: int = 0
    error: str | None = None
    error_type: str | None = None
    note: str | None = None  # why a unit is partial (what is left for the next run), not an error
    stopped: str | None = None  # why a continuous run's task stopped before the run's deadline
    offsets: int = 0  # source offsets this attempt accounted for: copied ranges (gaps included) and lost ones
    started: float = 0.0  # wall clock
    copy_started: float = 0.0  # after clients are up and progress was re-read
    finished: float = 0.0
    # (src_from, src_to, records, bytes) of each batch counted, to recount after an outage
    _batches: list[tuple[int, int, int, int]] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("_batches", None)
        return d

    def _time(self, batch: Batch, now_ms: int, opened_ms: int) -> None:
        first, last, n = batch.first_timestamp, batch.last_timestamp, len(batch.records)
        if n == 0 or first <= 0 or last <= 0:
            return
        lat = sorted((now_ms - first, now_ms - last))
        age = sorted((max(0, opened_ms - first), max(0, opened_ms - last)))
        self.min_latency_ms = lat[0] if self.min_latency_ms < 0 else min(self.min_latency_ms, lat[0])
        self.min_age_ms = age[0] if self.min_age_ms < 0 else min(self.min_age_ms, age[0])
        self.max_age_ms = max(self.max_age_ms, age[1])
        self.sum_latency_ms += n * (lat[0] + lat[1]) // 2
        self.sum_age_ms += n * (age[0] + age[1]) // 2
        self.timed_records += n

    def recount(self, progress: Progress) -> None:
        """After an outage, count only the batches the committed progress holds: a commit reported
        done whose transaction the broker did not keep is copied again and must not count twice."""
        ranges = list(progress.covered)
        kept = [b for b in self._batches if b[1] <= b[0] or uncovered(ranges, b[0], b[1]) == 0]
        if len(kept) != len(self._batches):
            if not kept or kept[0] != self._batches[0]:
                self.target_from = -1  # its first batch is copied again: the next commit says where it landed
            self._batches = kept
            self.offsets = sum(b[1] - b[0] for b in kept) + self.lost
            self.records = sum(b[2] for b in kept)
            self.bytes = sum(b[3] for b in kept)
            self.transactions = len(kept)

    def committed(self, batch: Batch, progress: Progress, opened_ms: int = 0, first_target: int = -1) -> None:
        """Count a batch whose transaction committed; `progress` is the progress after it. The
        latency (commit time - source timestamp) and record age (time the batch was opened -
        source timestamp) are measured on the batch's first and last records, whose timestamps
        bound the batch's when they ascend (the average weights each batch by its records)."""
        now_ms = int(time.time() * 1000)
        self._time(batch, now_ms, opened_ms or now_ms)
        self.copied_to = batch.src_to
        self.offsets += batch.src_to - batch.src_from
        self.records += len(batch.records)
        self.bytes += batch.nbytes
        self.transactions += 1
        self._batches.append((batch.src_from, batch.src_to, len(batch.records), batch.nbytes))
        self.tgt_end = progress.tgt_end
        if batch.records:
            if self.target_from < 0:
                self.target_from = first_target
            self.last_timestamp = batch.last_timestamp
            if batch.first_timestamp > 0:
                self.max_latency_ms = max(self.max_latency_ms, now_ms - batch.first_timestamp)


def u_where(unit: Unit) -> str:
    return f"{unit.topic}[{unit.partition}]"


def ranges_to_copy(unit: Unit, progress: Progress) -> list[tuple[int, int]]:
    """The parts of the unit the committed progress does not cover, starting right after it (a
    backfill unit: anywhere in its range, also below the progress)."""
    if unit.backfill:
        return subtract_ranges(unit.start, unit.end, progress.accounted())
    # `next` is the partition's first offset not accounted for: the holes above it are copied too
    start = progress.next if progress.next >= 0 else unit.start
    todo = subtract_ranges(start, unit.end, progress.accounted())
    if not todo and progress.next < 0 and unit.start >= unit.end:
        todo = [(unit.start, unit.start)]  # anchor a fresh partition's progress at its initial position
    return todo


def unclaimed(todo: list[tuple[int, int]], claimed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of `todo` that the merged `claimed` ranges leave; an empty range (a fresh
    partition's anchor) stays as it is."""
    return [piece for a, b in todo for piece in ([(a, b)] if a == b else subtract_ranges(a, b, claimed))]


def retention_gap(a: int, b: int, log_start: int) -> tuple[int, tuple[int, int] | None]:
    """Where copying [a, b) can start, and the range source retention deleted before it was copied."""
    if a >= log_start:
        return a, None
    start = min(log_start, b)
    return start, (a, start)


@dataclass(frozen=True)
class Range:
    """A source range of one unit to read: [a, b), and the gap event its first batch carries."""

    unit: int  # index of the unit in its PartitionCopy
    a: int
    b: int
    lost: tuple[int, int] | None = None


class PartitionCopy:
    """One source partition of a task: its units (in order) and their results, the ranges left to
    read from its committed progress, and how it ended."""

    def __init__(self, units: list[Unit], results: list[UnitResult]) -> None:
        self.units, self.results = units, results
        self.unit = units[0]
        self.key = (self.unit.topic, self.unit.partition)
        self.ranges: list[Range] = []
        self.at = 0  # the range being read
        self.failed = False
        self.status: str | None = None  # how it ended early: failed | fenced
        self.done_units: set[int] = set()  # units whose last batch was committed
        self.deferred: set[int] = set()  # units left to the next run (an earlier unit reached unit.max.bytes)
        self.planned = False  # its ranges were read off its committed progress

    @classmethod
    def of(cls, units: list[Unit], results: list[UnitResult]) -> list[PartitionCopy]:
        """The partitions of a task's units, in the order they first appear (units in order)."""
        by_key: dict[tuple[str, int], tuple[list[Unit], list[UnitResult]]] = {}
        for u, r in zip(units, results, strict=True):
            us, rs = by_key.setdefault((u.topic, u.partition), ([], []))
            us.append(u)
            rs.append(r)
        return [cls(us, rs) for us, rs in by_key.values()]

    def plan(self, progress: Progress, log_start: int, follow: bool) -> bool:
        """The ranges to read from `progress` (the committed truth); whether there are any. All of a
        partition's units are planned from the same progress, so a later unit leaves out what an
        earlier one reads: a unit copies from the progress's `next` (not from its planned start), and
        a ledger with holes below it would otherwise put a hole in two units and copy it twice."""
        self.ranges, self.at, self.planned = [], 0, True
        self.deferred = set()
        claimed: list[tuple[int, int]] = []  # merged, what earlier units of this partition read
        for i, (u, r) in enumerate(zip(self.units, self.results, strict=True)):
            if r.status in ("failed", "fenced"):
                continue
            if r.transactions:  # resumed after an outage: what the broker kept is the truth
                r.recount(progress)
            todo = unclaimed(ranges_to_copy(u, progress), claimed)
            claimed = merge_ranges([*claimed, *todo])
            if not todo:
                r.status = "skipped"
                continue
            r.status, r.note = "ok", None
            for a, b in todo:
                start, lost = retention_gap(a, b, log_start)
                if r.copied_from < 0:
                    r.copied_from = lost[0] if lost else a
                if follow and b >= OPEN_END and (progress.next < 0 or lost):
                    # followed: anchor a fresh partition's start (and record a gap) now, not with its
                    # first new record, so the next run continues from here even if none comes
                    self.ranges.append(Range(i, start, start, lost))
                    lost = None
                self.ranges.append(Range(i, start, b, lost))
        return bool(self.ranges)

    @property
    def current(self) -> Range | None:
        return self.ranges[self.at] if not self.failed and self.at < len(self.ranges) else None

    def advance(self, unit_full: bool, at: int = -1) -> None:
        """The current range was read to its end (or its unit to unit.max.bytes, at source offset
        `at`: the unit is partial, and the partition's other ranges, its own and its later units',
        wait for the next run, which continues at `at`: copying a later unit now would leave the
        rest of this one as a hole behind what was copied)."""
        done = self.ranges[self.at]
        self.at += 1
        if unit_full:
            self.results[done.unit].status = "partial"
            self.results[done.unit].note = f"unit.max.bytes reached at source offset {at}: the next run continues there"
            for rng in self.ranges[self.at :]:
                if rng.unit != done.unit:
                    r = self.results[rng.unit]
                    r.status, r.note = "partial", f"deferred to the next run (unit.max.bytes reached at offset {at})"
                    self.deferred.add(rng.unit)
            self.at = len(self.ranges)

    def last_of_unit(self) -> bool:
        """The current range is its unit's last."""
        nxt = self.at + 1
        return nxt >= len(self.ranges) or self.ranges[nxt].unit != self.ranges[self.at].unit

    @property
    def read_all(self) -> bool:
        return self.current is None

    @property
    def finished(self) -> bool:
        """Failed, or every unit with something to copy committed to its end."""
        todo = {rng.unit for rng in self.ranges}
        return self.failed or (self.planned and todo <= self.done_units | self.deferred)

    def committed(self, part: PartBatch, rng: Range, ends_unit: bool = False) -> None:
        r = self.results[rng.unit]
        if ends_unit:
            self.done_units.add(rng.unit)
        if part.lost_range:
            r.lost += part.lost_range[1] - part.lost_range[0]
            r.offsets += part.lost_range[1] - part.lost_range[0]
            r.lost_range = part.lost_range
        assert part.progress is not None
        r.committed(part.batch, part.progress, part.opened_ms, part.runs[0].tgt if part.runs else -1)

    def fail(self, err: MirrorflowError) -> None:
        self.end("failed", str(err), type(err).__name__)

    def end(self, status: str, error: str, error_type: str) -> None:
        """The partition stops here: its units not done end `status` with `error`."""
        self.failed, self.status = True, status
        for i, r in enumerate(self.results):
            if i in self.done_units:
                continue  # all of it committed before
            if r.status == "skipped" and not r.transactions:
                continue
            r.status, r.error, r.error_type = status, error, error_type


def reading_at_once(units: Iterable[Unit], lanes: int) -> int:
    """How many partitions a task reads at the same time: its lanes, or fewer when fewer of its
    partitions have records to copy (a quiet partition's lane fills no buffer). A followed
    partition (OPEN_END) counts as busy."""
    busy = {(u.topic, u.partition) for u in units if u.end > u.start}
    return max(1, min(lanes, len(busy)))
