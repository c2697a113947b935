"""The kinds of replicate run, as strategies of one `ReplicationRun` (replication.run.run).

What differs between them is how they plan, whether a dry one takes the flow's lease, what they say
once planned and how long an idle one waits; every other step is the run's own:

* `Once`: the flow's new records (`mirrorflow replicate`, a scheduled DAG run);
* `Continuous`: every partition until a deadline (replication.run.continuous);
* `Interval`: the records of an Airflow backfill run's data interval, not copied yet (its DAG task
  waits for the lease: a run skipped because another holds it would look done);
* `Backfill`: a historical range (ops.backfill); a dry one takes no lease and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.replication.plan.backfill_plan import BackfillPartition, plan_backfill
from mirrorflow.replication.plan.planner import make_plan
from mirrorflow.replication.plan.run_options import RunOptions
from mirrorflow.replication.plan.run_plan import Plan
from mirrorflow.replication.plan.when import When
from mirrorflow.replication.run.continuous import check_options, continuous_plan, follow_spec, run_seconds


@dataclass(frozen=True)
class RunKind:
    """What a kind of run decides; by default a `Once` run's way."""

    waits_for_lease = False  # a run of a flow another run holds is skipped (the next one copies)

    def check(self, options: RunOptions) -> None:
        """Refuse, before the lease, an option this kind cannot honour (ConfigError)."""

    def leased(self, dry_run: bool) -> bool:
        """Whether the run takes the flow's lease (and may write to the target)."""
        return True

    def plan(self, clients: FlowClients, options: RunOptions, leased: bool) -> tuple[Plan, list[BackfillPartition]]:
        """The run's plan and (a window's kinds) its per-partition view of the window."""
        return make_plan(clients, options.topics, options.partition_limit), []

    def planned(self, plan: Plan, flow: str, dry_run: bool) -> list[str]:
        """What the run says once planned."""
        lines = []
        if dry_run:
            lines.append(
                f"dry run: would copy {sum(p['planned'] for p in plan.partitions):,} offsets of {flow}; copying nothing"
            )
            lines += [
                f"  {p['topic']}-{p['partition']}: would copy {p['planned']:,} offsets from {p['start']}"
                for p in plan.partitions
                if p["planned"]
            ]
        offsets = sum(u.records for u in plan.units)
        return lines + [
            f"planned {len(plan.units)} units in {len(plan.tasks)} tasks ({offsets:,} offsets) for flow {flow}"
        ]

    def idle_wait_s(self, flow: FlowConfig, plan: Plan, dry_run: bool) -> float:
        """How long a DAG run with nothing to copy waits before it ends (0: at once)."""
        return 0.0


@dataclass(frozen=True)
class Once(RunKind):
    """The flow's new records, from each partition's progress (holes included) to its end now."""


@dataclass(frozen=True)
class Continuous(RunKind):
    """Every partition, followed until the deadline (`seconds`, default continuous.run.seconds), a pause,
    a stop or SIGTERM (`stop_file`: created by this host's signal handler, seen by its Spark tasks)."""

    seconds: float | None = None
    stop_file: Path | None = None

    def check(self, options: RunOptions) -> None:
        check_options(options)

    def plan(self, clients: FlowClients, options: RunOptions, leased: bool) -> tuple[Plan, list[BackfillPartition]]:
        plan = continuous_plan(clients, options.topics)
        plan.follow = follow_spec(clients.flow, self.seconds, self.stop_file)
        return plan, []

    def planned(self, plan: Plan, flow: str, dry_run: bool) -> list[str]:
        if dry_run:
            would, n = sum(p["planned"] for p in plan.partitions), len(plan.partitions)
            return [f"dry run: would follow {n} partitions of {flow}, {would:,} offsets behind now; copying nothing"]
        seconds = plan.follow.seconds if plan.follow else 0.0
        return [
            f"continuous run of flow {flow}: {len(plan.units)} partitions in {len(plan.tasks)} tasks, "
            f"following for {seconds:g} s once the copy starts"
        ]

    def idle_wait_s(self, flow: FlowConfig, plan: Plan, dry_run: bool) -> float:
        """A DAG run with nothing to follow yet waits a while, so that Airflow does not start run after run."""
        return min(30.0, run_seconds(flow)) if not plan.units and not dry_run else 0.0


@dataclass(frozen=True)
class Interval(RunKind):
    """The records of [window) (an Airflow backfill run's data interval) the flow has not copied yet."""

    window: tuple[When, When]
    waits_for_lease = True

    def plan(self, clients: FlowClients, options: RunOptions, leased: bool) -> tuple[Plan, list[BackfillPartition]]:
        return plan_backfill(clients, *self.window, options.topics, fence=leased)


@dataclass(frozen=True)
class Backfill(Interval):
    """A historical range [window), minus the flow's ledger (ops.backfill)."""

    waits_for_lease = False

    def leased(self, dry_run: bool) -> bool:
        return not dry_run  # a dry backfill reads, without the lease, and writes nothing

    def planned(self, plan: Plan, flow: str, dry_run: bool) -> list[str]:
        if dry_run:
            return super().planned(plan, flow, dry_run)
        offsets = sum(u.records for u in plan.units)
        return [f"backfill: {len(plan.units)} units in {len(plan.tasks)} tasks ({offsets:,} offsets)"]
