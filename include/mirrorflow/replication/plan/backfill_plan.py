"""The plan of a backfill: a historical source range, per partition, minus what the flow copied.

A backfill (`ops.backfill`, `mirrorflow backfill`, the backfill DAG) and an Airflow backfill of the
replicate DAG (an `interval` run, replication.run.run: the records of a past data interval) plan here: per source
partition the range [from, to) is resolved (`When`), the ledger of what the flow already copied
(`Progress.covered`) is subtracted, what source retention already removed is a gap (reported, never
copied, never written to the state), and the rest is cut into units flagged `backfill`, which the
copier copies wherever the progress stands (`copier.ranges_to_copy`). `plan_partition` and
`units_of` are pure; `plan_backfill` reads the inputs.

WHEN: `earliest` (the source log start), `latest` (the source end), `start` (where the flow's
copy of the partition begins: the lowest offset of its ledger), `offset:N`, or an ISO-8601 time
with a zone (the first offset whose timestamp is at or after it, `offsets_for_times`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import ConfigError
from mirrorflow.replication.plan.planner import (
    PartitionInput,
    gather_inputs,
    group_by_slot,
    identity_problem,
    new_plan,
    source_offsets,
    stopped_message,
)
from mirrorflow.replication.plan.run_plan import Plan, Unit
from mirrorflow.replication.plan.when import When, topic_pattern
from mirrorflow.reporting import as_dict
from mirrorflow.state.offset_map import subtract_ranges
from mirrorflow.state.store import StateStore

Key = tuple[str, int]


@dataclass
class BackfillPartition:
    """The backfill of one source partition: the resolved range, what it copies, what was lost."""

    topic: str
    partition: int
    target_topic: str
    start: int = -1  # the resolved range [start, end) (source offsets)
    end: int = -1
    log_start: int = -1  # the source's log start and end (last stable offset) when planned
    source_end: int = -1
    progress_next: int = -1  # the partition's progress (`next`) when planned; a backfill never moves it back
    todo: list[tuple[int, int]] = field(default_factory=list)  # the ranges to copy (not in the ledger)
    gaps: list[tuple[int, int]] = field(default_factory=list)  # removed by retention, never copied
    skipped: str = ""  # why nothing is planned here (no progress yet, stopped, waiting for sync)
    records: int = 0  # after the copy: records and bytes copied, and its status
    bytes: int = 0
    status: str = "planned"
    errors: list[str] = field(default_factory=list)

    @property
    def offsets(self) -> int:
        """Offsets to copy: records, unless transaction markers or compaction left holes."""
        return sum(b - a for a, b in self.todo)

    @property
    def lost(self) -> int:
        return sum(b - a for a, b in self.gaps)

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self, "offsets", "lost")

    def line(self, dry_run: bool) -> str:
        t = f"{self.topic}[{self.partition}] -> {self.target_topic}[{self.partition}]"
        if self.skipped:
            return f"{t}: skipped: {self.skipped}"
        empty = self.end <= self.start
        rng = "empty here (no record in it)" if empty else f"[{self.start}, {self.end})"
        todo = ", ".join(f"{a}..{b - 1}" for a, b in self.todo) or ("none" if empty else "none: all copied before")
        head = f"{t}: range {rng}: "
        if dry_run:
            text = head + f"would copy {self.offsets:,} records (offsets {todo})"
        else:
            text = head + f"copied {self.records:,} records, {self.bytes:,} bytes (offsets {todo}) [{self.status}]"
        if self.gaps:
            gaps = ", ".join(f"{a}..{b - 1}" for a, b in self.gaps)
            text += f"; gap: {self.lost:,} offsets ({gaps}) already removed by source retention"
        return text + "".join(f"; {e}" for e in self.errors)


# -- planning (pure) ------------------------------------------------------------------------------
def resolve(when: When, pi: PartitionInput, at_time: dict[Key, int]) -> int | None:
    """The source offset of a bound in one partition (None: `start` and nothing copied yet);
    `at_time`: the source's offsets for the time (`offsets_for_times`, -1: no record at or after)."""
    k = (pi.topic, pi.partition)
    if when.kind == "earliest":
        return pi.log_start
    if when.kind == "latest":
        return pi.end
    if when.kind == "offset":
        return min(when.value, pi.end)
    if when.kind == "time":
        off = at_time.get(k, -1)
        return off if 0 <= off <= pi.end else pi.end  # no record at or after the time: the end
    prog = pi.progress
    if prog is None or prog.next < 0:
        return None
    return prog.covered[0][0] if prog.covered else prog.next


def plan_partition(
    pi: PartitionInput, lo: When, hi: When, times: dict[str, dict[Key, int]], flow: str
) -> BackfillPartition:
    """What to copy of one partition: [from, to) minus the ledger, split at the log start (below it: gaps)."""
    bp = BackfillPartition(pi.topic, pi.partition, pi.target_topic, log_start=pi.log_start, source_end=pi.end)
    bp.progress_next = pi.progress.next if pi.progress is not None else -1
    if 0 <= pi.target_partitions <= pi.partition:
        bp.skipped = (
            f"target topic {pi.target_topic!r} does not have this partition yet "
            f"(run the sync DAG or `mirrorflow sync --flow {flow}` first)"
        )
        return bp
    why = identity_problem(pi)
    if why is not None:
        bp.skipped = stopped_message(why, flow, pi.topic, pi.target_topic)
        return bp
    a, b = resolve(lo, pi, times.get("from", {})), resolve(hi, pi, times.get("to", {}))
    if a is None or b is None:
        bp.skipped = (
            "the flow has not copied this partition yet, so `start` is unknown "
            f"(run `mirrorflow replicate --flow {flow}` first, or give an offset or time)"
        )
        return bp
    bp.start, bp.end = a, b
    covered = list(pi.progress.covered) if pi.progress is not None else []
    if b > a:
        bp.gaps = subtract_ranges(a, min(b, pi.log_start), covered) if a < pi.log_start else []
        lo_copy = max(a, pi.log_start)
        bp.todo = subtract_ranges(lo_copy, b, covered) if b > lo_copy else []
    return bp


def units_of(bp: BackfillPartition, pi: PartitionInput, max_records: int) -> list[Unit]:
    """The backfill units of one partition, at most `max_records` offsets each, in order."""
    units = []
    for a, b in bp.todo:
        s = a
        while s < b:
            e = min(b, s + max(1, max_records))
            units.append(
                Unit(
                    pi.topic,
                    pi.partition,
                    pi.target_topic,
                    s,
                    e,
                    pi.log_start,
                    pi.topic_id,
                    pi.target_topic_id,
                    backfill=True,
                )
            )
            s = e
    return units


# -- planning (I/O) -------------------------------------------------------------------------------
def plan_backfill(
    clients: FlowClients, lo: When, hi: When, topics: str | None = None, fence: bool = True
) -> tuple[Plan, list[BackfillPartition]]:
    """The backfill's plan (units flagged `backfill`) and its per-partition view. `fence`: abort
    open transactions of the flow first (only under the lease; a dry run reads without it)."""
    flow = clients.flow
    pattern = topic_pattern(topics)
    gathered = gather_inputs(clients, None if fence else StateStore(clients).progress())
    inputs = gathered.partitions
    if pattern is not None:
        inputs = [pi for pi in inputs if pattern.fullmatch(pi.topic)]
        if not inputs:
            raise ConfigError([("--topics", f"no source topic of flow {flow.name} matches {topics!r}")])
    keys = [(pi.topic, pi.partition) for pi in inputs]
    times: dict[str, dict[Key, int]] = {}
    for tag, when in (("from", lo), ("to", hi)):
        if when.kind == "time" and keys:
            times[tag] = source_offsets(clients, keys, OffsetSpec.for_timestamp(when.value))
    parts, per_partition = [], []
    for pi in sorted(inputs, key=lambda x: (x.topic, x.partition)):
        bp = plan_partition(pi, lo, hi, times, flow.name)
        parts.append(bp)
        units = units_of(bp, pi, int(flow.props["unit.max.records"]))
        if units:
            per_partition.append(units)
    summary = [
        {
            "topic": p.topic,
            "partition": p.partition,
            "target_topic": p.target_topic,
            "log_start": p.log_start,
            "end": p.source_end,
            # the report's lag counts from the progress, which a backfill never moves back
            "start": p.progress_next if p.progress_next >= 0 else p.start,
            "planned": p.offsets,
            "units": sum(1 for us in per_partition for u in us if (u.topic, u.partition) == (p.topic, p.partition)),
            "lost_expected": p.lost,
            "has_progress": True,
            "backfill": p.to_dict(),
        }
        for p in parts
    ]
    return new_plan(clients, gathered, group_by_slot(per_partition, gathered.slot_of), summary), parts


def partitions_of(plan: Plan | None) -> list[BackfillPartition]:
    """The per-partition view a backfill plan carries (for the DAG's report task)."""
    names = set(BackfillPartition.__dataclass_fields__)
    out = []
    for s in plan.partitions if plan is not None else []:
        d = {k: v for k, v in s["backfill"].items() if k in names}
        d["todo"] = [tuple(r) for r in d.get("todo", [])]
        d["gaps"] = [tuple(r) for r in d.get("gaps", [])]
        out.append(BackfillPartition(**d))
    return out
