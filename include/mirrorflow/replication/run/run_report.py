"""The report of one replication run: per partition records, bytes, lag, latency, gaps, errors.

A partition's lag is its source end when the report was made minus its progress. When the source's
end could not be read (the source away at the report), the lag is unknown (None), and says so: the
plan's end is an older figure, and a lag computed from it would claim a caught-up flow (0) that
nobody measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mirrorflow.replication.task.reader import OPEN_END
from mirrorflow.reporting import Report
from mirrorflow.state.run_log import MAX_ERRORS, PartitionRun, RunRecord


@dataclass
class PartitionReport:
    topic: str
    partition: int
    target_topic: str
    records: int = 0
    bytes: int = 0
    transactions: int = 0
    next_offset: int = -1  # the partition's progress after the run
    source_end: int = -1  # source end (last stable offset) when the report was made (-1: unknown)
    lag: int | None = 0  # source offsets not yet copied (None: the source end is unknown)
    lost: int = 0  # offsets lost to source retention before they were copied (this run)
    latency_ms: int = -1  # worst replication latency of the run (commit time - source timestamp)
    # MM2's replication-latency-ms / record-age-ms families over the run (-1: nothing timed)
    latency_min_ms: int = -1
    latency_avg_ms: int = -1
    age_min_ms: int = -1
    age_avg_ms: int = -1
    age_max_ms: int = -1
    timed_records: int = 0
    _sum_latency_ms: int = field(default=0, repr=False)
    _sum_age_ms: int = field(default=0, repr=False)
    status: str = "idle"  # idle | ok | partial | fenced | failed | skipped | stopped | waiting (for sync)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a partial unit left for the next run

    def add_times(self, r: dict[str, Any]) -> None:
        """Merge one unit's latency and age figures (copier.UnitResult)."""
        n = r.get("timed_records", 0)
        if not n:
            return
        pick = lambda a, b: b if a < 0 else min(a, b)  # noqa: E731
        self.latency_min_ms = pick(self.latency_min_ms, r["min_latency_ms"])
        self.age_min_ms = pick(self.age_min_ms, r["min_age_ms"])
        self.age_max_ms = max(self.age_max_ms, r["max_age_ms"])
        self.timed_records += n
        self._sum_latency_ms += r["sum_latency_ms"]
        self._sum_age_ms += r["sum_age_ms"]
        self.latency_avg_ms = self._sum_latency_ms // self.timed_records
        self.age_avg_ms = self._sum_age_ms // self.timed_records


@dataclass
class RunReport(Report):
    flow: str
    exactly_once: bool
    units: int = 0
    records: int = 0
    bytes: int = 0
    duration_s: float = 0.0  # whole run: plan + copy (incl. Spark start-up) + report
    copy_phase_s: float = 0.0  # first unit start .. last unit end, without Spark start-up
    spark_s: float = 0.0  # the spark-submit (or in-process job) wall time
    partitions: list[PartitionReport] = field(default_factory=list)
    failed_units: int = 0
    fenced_units: int = 0
    stopped_partitions: int = 0  # partitions whose state does not describe their topics any more
    skipped: str | None = None  # why the run copied nothing on purpose (the flow is paused or stopped)
    ends_unknown: str | None = None  # why the source's ends could not be read (every lag is unknown then)
    stopped_early: str | None = None  # why a continuous run stopped before its window ended (a pause, SIGTERM)
    DERIVED = ("ok", "lag", "lost", "max_latency_ms")

    @property
    def ok(self) -> bool:
        return self.failed_units == 0 and self.stopped_partitions == 0

    @property
    def lag(self) -> int | None:
        """The partitions' lag together; None when any partition's is unknown, or the run was skipped (it
        looked at no partition: never a made-up 0)."""
        if self.skipped:
            return None
        lags = [p.lag for p in self.partitions]
        return None if any(x is None for x in lags) else sum(x for x in lags if x is not None)

    @property
    def lost(self) -> int:
        return sum(p.lost for p in self.partitions)

    @property
    def max_latency_ms(self) -> int:
        return max((p.latency_ms for p in self.partitions), default=-1)

    def run_record(self, at: int) -> RunRecord:
        """The run's summary for the flow's run log (state.run_log): totals, the first errors, and
        the partitions that copied, lost or failed something."""
        parts = [
            PartitionRun(
                p.topic,
                p.partition,
                p.target_topic,
                p.status,
                p.records,
                p.bytes,
                p.lag,
                p.lost,
                (p.latency_min_ms, p.latency_avg_ms, p.latency_ms),
                (p.age_min_ms, p.age_avg_ms, p.age_max_ms),
            )
            for p in self.partitions
            if p.records or p.lost or p.errors or p.status not in ("idle", "skipped", "ok")
        ]
        errors = [f"{p.topic}[{p.partition}]: {e}" for p in self.partitions for e in p.errors]
        return RunRecord(
            "replicate",
            at,
            self.ok,
            round(self.duration_s, 3),
            round(self.copy_phase_s, 3),
            self.records,
            self.bytes,
            self.lag,
            self.lost,
            self.failed_units,
            self.stopped_partitions,
            self.skipped,
            errors[:MAX_ERRORS],
            parts,
        )

    def lines(self) -> list[str]:
        """The human report: a summary, then one line per partition that did or lacks something."""
        if self.skipped:
            return [f"flow {self.flow}: skipped: {self.skipped}"]
        mb = self.bytes / 1e6
        rate = f", {self.records / self.copy_phase_s:,.0f} records/s in the copy phase" if self.copy_phase_s > 0 else ""
        out = [
            f"flow {self.flow}: {self.records:,} records, {mb:,.1f} MB in {self.units} units, "
            f"{self.duration_s:.1f} s ({'exactly-once' if self.exactly_once else 'at-least-once'}{rate}); "
            f"lag {lag_text(self.lag, self.ends_unknown)}; "
            f"max latency {self.max_latency_ms if self.max_latency_ms >= 0 else '-'} ms"
            + (f"; {self.failed_units} unit(s) FAILED" if self.failed_units else "")
            + (f"; {self.fenced_units} unit(s) fenced" if self.fenced_units else "")
            + (f"; {self.stopped_partitions} partition(s) STOPPED" if self.stopped_partitions else "")
        ]
        if self.stopped_early:
            out.append(f"  stopped before its window ended: {self.stopped_early}")
        for p in self.partitions:
            if p.lost:
                out.append(
                    f"  partition {p.topic}[{p.partition}]: {p.lost:,} offsets lost to source retention "
                    "before they were copied"
                )
            for e in p.errors:
                out.append(f"  partition {p.topic}[{p.partition}]: {e}")
            for n in dict.fromkeys(p.notes):
                out.append(f"  partition {p.topic}[{p.partition}]: {n}")
            if p.records or p.lag:
                out.append(
                    f"  {p.topic}[{p.partition}] -> {p.target_topic}[{p.partition}]: {p.records:,} records, "
                    f"{p.bytes:,} bytes, next {p.next_offset}, lag {lag_text(p.lag)}"
                    + (f", latency {p.latency_ms} ms" if p.latency_ms >= 0 else "")
                    + f" [{p.status}]"
                )
        return out


def lag_text(lag: int | None, why: str | None = None) -> str:
    """A lag as the report prints it: the number, or `unknown` (and why)."""
    if lag is not None:
        return f"{lag:,}"
    return f"unknown ({why})" if why else "unknown"


def build_report(
    flow: str,
    exactly_once: bool,
    plan_summary: list[dict],
    results: list[dict],
    ends: dict[tuple[str, int], int] | None = None,
    duration_s: float = 0.0,
    spark_s: float = 0.0,
    ends_unknown: str | None = None,
) -> RunReport:
    """Merge the plan's partitions and the units' results (dicts of copier.UnitResult). `ends`: the
    source ends read for the report; a partition without one has an unknown lag (`ends_unknown`:
    why they could not be read)."""
    rep = RunReport(
        flow, exactly_once, units=len(results), duration_s=duration_s, spark_s=spark_s, ends_unknown=ends_unknown
    )
    parts, owed = _planned(rep, plan_summary)
    accounted: dict[tuple[str, int], int] = {}  # offsets the run copied or named lost
    rank = {"idle": 0, "skipped": 1, "ok": 2, "partial": 3, "fenced": 4, "failed": 5, "stopped": 6}
    for r in results:
        key = (r["topic"], r["partition"])
        pr = parts.setdefault(key, PartitionReport(r["topic"], r["partition"], r["target_topic"]))
        pr.records += r.get("records", 0)
        pr.bytes += r.get("bytes", 0)
        pr.transactions += r.get("transactions", 0)
        pr.lost += r.get("lost", 0)
        if r.get("copied_to", -1) >= 0:
            pr.next_offset = max(pr.next_offset, r["copied_to"])
        if r.get("end", 0) >= OPEN_END:  # a followed partition: its lag is counted from its progress
            owed.pop(key, None)
        accounted[key] = accounted.get(key, 0) + r.get("offsets", 0)
        if r.get("note"):
            pr.notes.append(r["note"])
        pr.latency_ms = max(pr.latency_ms, r.get("max_latency_ms", -1))
        pr.add_times(r)
        if rank.get(r["status"], 0) > rank.get(pr.status, 0):
            pr.status = r["status"]
        if r.get("error"):
            pr.errors.append(r["error"])
        rep.stopped_early = rep.stopped_early or r.get("stopped")
        if r["status"] == "failed":
            rep.failed_units += 1
        if r["status"] == "fenced":
            rep.fenced_units += 1
        rep.records += r.get("records", 0)
        rep.bytes += r.get("bytes", 0)
    starts = [r["copy_started"] for r in results if r.get("copy_started")]
    finishes = [r["finished"] for r in results if r.get("finished")]
    if starts and finishes:
        rep.copy_phase_s = max(finishes) - min(starts)
    for key, pr in parts.items():
        # the end read now, never the plan's: an older end would make a lag nobody measured
        pr.source_end = (ends or {}).get(key, -1)
        pr.lag = _lag(pr, owed.get(key), accounted.get(key, 0))
    rep.partitions = sorted(parts.values(), key=lambda p: (p.topic, p.partition))
    return rep


def _planned(
    rep: RunReport, plan_summary: list[dict]
) -> tuple[dict[tuple[str, int], PartitionReport], dict[tuple[str, int], tuple[int, int]]]:
    """The planned partitions' reports (waiting and stopped ones with why), and per partition the offsets
    it owned and had not copied when planned, with the end then."""
    parts: dict[tuple[str, int], PartitionReport] = {}
    owed: dict[tuple[str, int], tuple[int, int]] = {}
    for s in plan_summary:
        key = (s["topic"], s["partition"])
        parts[key] = PartitionReport(s["topic"], s["partition"], s["target_topic"], next_offset=s["start"])
        if "uncopied" in s:
            owed[key] = (int(s["uncopied"]), int(s["planned_end"]))
        if s.get("waiting"):
            parts[key].status = "waiting"
            parts[key].errors.append(s["waiting"])
            if s["start"] < 0:  # nothing copied yet: it is owned from its log start (a new partition)
                owed[key] = (max(0, s["end"] - s["log_start"]), s["end"])
        if s.get("stopped"):
            parts[key].status = "stopped"
            parts[key].errors.append(s["stopped"])
            rep.stopped_partitions += 1
    return parts, owed


def _lag(pr: PartitionReport, owed: tuple[int, int] | None, accounted: int) -> int | None:
    """A partition's lag after the run: None without a source end read."""
    if pr.source_end < 0:
        return None
    if pr.status == "stopped":
        return pr.source_end  # a stopped partition replicates nothing of what its source holds
    if owed is not None:  # every offset it owns and has not copied, holes below `next_offset` included
        uncopied, planned_end = owed
        return max(0, uncopied + max(0, pr.source_end - planned_end) - accounted)
    if pr.next_offset >= 0:
        return max(0, pr.source_end - pr.next_offset)
    return pr.lag
