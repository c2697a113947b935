"""Backfill: copy a historical source range the flow has not copied yet (e.g. after a start at `latest`).

`mirrorflow backfill --flow A->B --from WHEN --to WHEN` and the backfill DAG plan, per source
partition of the flow (optionally only topics matching a regex), the range [from, to) minus the
ledger of what the flow already copied (`Progress.covered`), and copy it with the SAME copier and
writer as a normal run: every batch is one transaction holding its records, its offset-map entry
and the new progress, under the flow's lease, honouring the flow's state (paused or stopped: the
backfill is skipped with the reason). Units carry `backfill=True`, so the copier copies their
range wherever the progress stands (`copier.ranges_to_copy`); `Progress.next` never moves back.

Backfilled records land AFTER newer ones in the target partition (Kafka appends): target order is
not source order there. The offset map records where each record landed, so `mirrorflow
translate`, checkpoints and group sync stay exact for groups in either range.

Ranges retention already removed from the source are reported as gaps (not errors) and are not
written to the state, so a second identical backfill copies nothing and reports the same gaps.

The plan (WHEN bounds, the ledger subtracted, gaps, units) is `replication.plan.backfill_plan`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.inputs import backfill_inputs
from mirrorflow.replication.plan.backfill_plan import BackfillPartition
from mirrorflow.replication.plan.run_options import RunOptions
from mirrorflow.replication.run.run import ReplicationRun, RunSkipped
from mirrorflow.replication.run.run_kinds import Backfill
from mirrorflow.replication.run.run_report import RunReport
from mirrorflow.replication.run.scratch import Scratch
from mirrorflow.reporting import Report


@dataclass
class BackfillReport(Report):
    flow: str
    start: str  # the WHEN texts as parsed
    end: str
    topics: str | None
    dry_run: bool
    partitions: list[BackfillPartition] = field(default_factory=list)
    skipped: str | None = None  # the whole backfill was skipped (flow paused or stopped)
    run: RunReport | None = None  # the copy's report (None: dry run, skipped or nothing to copy)

    @property
    def ok(self) -> bool:
        return self.run is None or self.run.ok

    @property
    def offsets(self) -> int:
        return sum(p.offsets for p in self.partitions)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def lost(self) -> int:
        return sum(p.lost for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "from": self.start,
            "to": self.end,
            "topics": self.topics,
            "dry_run": self.dry_run,
            "skipped": self.skipped,
            "ok": self.ok,
            "offsets": self.offsets,
            "records": self.records,
            "bytes": self.run.bytes if self.run else 0,
            "lost": self.lost,
            "failed_units": self.run.failed_units if self.run else 0,
            "partitions": [p.to_dict() for p in self.partitions],
        }

    def lines(self) -> list[str]:
        what = f"backfill of flow {self.flow} from {self.start} to {self.end}" + (
            f" (topics {self.topics!r})" if self.topics else ""
        )
        if self.skipped:
            return [f"{what}: skipped: {self.skipped}"]
        if self.dry_run:
            head = f"{what} (dry run): would copy {self.offsets:,} records"
        else:
            b = self.run.bytes if self.run else 0
            head = f"{what}: copied {self.records:,} records, {b:,} bytes"
            if self.run and self.run.failed_units:
                head += f"; {self.run.failed_units} unit(s) FAILED"
        if self.lost:
            head += f"; {self.lost:,} offsets already removed by source retention (gaps below)"
        if any(p.status in ("partial", "failed", "fenced") for p in self.partitions):
            head += "; not all copied: run the same backfill again, it copies only what is still missing"
        return [head] + [f"  {p.line(self.dry_run)}" for p in self.partitions]


def apply_results(parts: list[BackfillPartition], results: list[dict[str, Any]]) -> None:
    """Fold the units' results (copier.UnitResult dicts) into the partitions; a gap the copy met
    (retention moved on since planning) is reported like the planned ones."""
    by_key = {(p.topic, p.partition): p for p in parts}
    rank = {"planned": 0, "skipped": 1, "ok": 2, "partial": 3, "fenced": 4, "failed": 5}
    for r in results:
        bp = by_key.get((r["topic"], r["partition"]))
        if bp is None:
            continue
        bp.records += int(r.get("records", 0))
        bp.bytes += int(r.get("bytes", 0))
        if r.get("lost_range"):
            a, b = r["lost_range"]
            bp.gaps.append((int(a), int(b)))
        if rank.get(r["status"], 0) > rank.get(bp.status, 0):
            bp.status = r["status"]
        if r.get("error"):
            bp.errors.append(str(r["error"]))
    for bp in parts:
        if bp.status == "planned" and not bp.skipped:
            bp.status = "ok" if not bp.todo else "idle"
        if bp.status == "skipped":  # every unit found its range already in the ledger
            bp.status = "ok"


# -- running --------------------------------------------------------------------------------------
def backfill(
    cfg: Config,
    flow: FlowConfig,
    start: str,
    end: str,
    mode: str = "submit",
    master: str | None = None,
    *,
    options: RunOptions | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> BackfillReport:
    """Plan and (unless `options.dry_run`) copy [start, end) of every partition of the flow (of those
    `options.topics` matches) minus its ledger, as a backfill run (replication.run.run.ReplicationRun), as
    `replication.run.runner.run_once` does a regular run. Bad WHEN values or regex: one ConfigError before
    any cluster is asked (ops.inputs.backfill_inputs, as the CLI and the DAG check them)."""
    asked = options or RunOptions()
    lo, hi, opts = backfill_inputs({"from": start, "to": end, "topics": asked.topics, "dry_run": asked.dry_run})
    report = BackfillReport(flow.name, str(lo), str(hi), asked.topics, asked.dry_run)
    run = ReplicationRun.local(
        cfg,
        flow,
        f"mirrorflow backfill --mode {mode}",
        kind=Backfill((lo, hi)),
        options=replace(opts, on_plan=asked.on_plan),
        log=log,
        label="cli-backfill",
    )
    with FlowClients(cfg, flow) as clients:
        try:
            run.begin(clients)
        except RunSkipped as skipped:
            report.skipped = str(skipped)
            return report
        return carry_out_backfill(run, clients, report, mode, master, Scratch.of(flow))


def carry_out_backfill(
    run: ReplicationRun, clients: FlowClients, report: BackfillReport, mode: str, master: str | None, scratch: Scratch
) -> BackfillReport:
    """After the run's `begin`: the run carried out as any other (plan, copy, report, the lease renewed
    and released: `mirrorflow backfill`, and the backfill DAG's one task when the copy runs on a Spark
    Connect server); a dry run only plans (it took no lease and writes nothing). `report` gets the
    plan's partitions and what the copy did to them."""
    if run.dry_run:
        run.make_plan(clients)
        report.partitions = run.parts
        return report
    try:
        report.run = run.carry_out(clients, mode, master, scratch)
    finally:
        report.partitions = run.parts
    apply_results(report.partitions, run.results)
    return report
