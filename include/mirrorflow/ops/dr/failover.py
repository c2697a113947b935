"""Failover of a flow A->B: move its consumer groups to B and stop the flow (the DR runbook's step).

* **unplanned** (A is lost): everything comes from the TARGET -- progress (what was replicated),
  the checkpoints (where each group resumes) and the offset map behind them. The source is asked
  for its ends only to tell the RPO, and only if it answers.
* **planned** (A is up; stopping A's producers is the operator's step): drain first -- sync the
  topics, replicate until the lag is 0 (or `max_drain_runs` runs), checkpoint once more, verify --
  so the groups resume exactly where they stopped on A. The verify checks what was copied since
  the last verify that passed (ops.verify, `since_last`) and records how far it got.

Two steps, so that what is approved is what is committed:

* `plan_failover`: the preflight. Its **plan** (`FailoverPlan`, serialisable, with an id derived
  from its content) says per partition what was replicated (and the RPO), per group the exact
  target offsets it will commit, and which groups it leaves alone and why.
* `commit_failover(plan)`: under the flow's lease, re-reads what the plan was built from (progress,
  checkpoints, the groups on the target); if any of it moved it commits nothing and says what moved
  (`PlanMovedError`: make a new plan). Otherwise it commits exactly the plan's offsets (never
  backwards, never a group with active members), sets the flow to `stopped` and writes the failover
  record (who approved, the plan id, per-partition target ends, per-group offsets) to the target.

`failover` composes them for the CLI (plan, confirm, commit); the DAG runs them as its preflight and
commit tasks with Airflow's approval step between. A second failover of a stopped, failed-over flow
is a no-op that says so, naming the groups still to move -- those left alone at the failover (active
members on B) or never chosen by its `--groups`. With `groups` it moves them: a plan
bound to the failover record (`moves_after`), committed the same way (never backwards, never a
group with active members), recorded as a `failover` line in the operations history; the failover
record itself keeps the original failover.

A planned drain that cannot reach lag 0 in its runs (producers still writing) stops, naming the
partitions and their lag, unless the operator accepted a stated total lag (`max_lag`).

**Take-over** (`take_over`, the CLI's `--take-over`, the DAG's Param `take_over`): a failover needs
the flow's lease, and the flow's state must belong to this config's deployment. When a run holds
the lease (a continuous run riding out the outage, a run of the old site's Airflow) or another
deployment owns the flow (a DR-site Airflow with its own deployment.id), the preflight stops and
names the flag -- unless the operator confirmed the take-over. Then the commit (a planned
failover: before its drain, which needs the flow) takes the lease whoever holds it
(state.lease.FlowLease.take_over: that owner is fenced for good and this deployment owns the flow
from then on), fences the copy transactions of every partition on the target
(state.fencing.fence_copies) so the run taken over can never commit again, records who took the
flow from whom in the operations history, and goes on. Needs exactly-once copies (idempotent
producers cannot be fenced).

**Client switch** (ops.dr.client_switch): the flow's `client.switch.failover` steps are approved with
the plan (the report lists them, each callable imported before anything is committed) and run after
the commit, in order, each timed and recorded in the history; a dry run runs them as a dry run. A
failing step leaves the failover committed: the report's `switch` names it (its `error`).
"""

from __future__ import annotations

from collections.abc import Callable

from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.dr.client_switch import ClientSwitchError, SwitchReport, plan_switch, run_client_switch
from mirrorflow.ops.dr.failover_commit import commit_failover
from mirrorflow.ops.dr.failover_plan import PlanMovedError
from mirrorflow.ops.dr.failover_preflight import plan_failover
from mirrorflow.ops.dr.failover_report import FailoverReport
from mirrorflow.state.lease import whoami


def failover(
    cfg: Config,
    flow: FlowConfig,
    mode: str = "unplanned",
    groups: str | None = None,
    dry_run: bool = False,
    confirm: Callable[[FailoverReport], bool] = lambda r: True,
    copy_mode: str = "submit",
    max_drain_runs: int = 5,
    log: Callable[[str], None] = lambda s: None,
    drain: bool | None = None,
    plan_id: str | None = None,
    approved_by: str | None = None,
    via: str = "cli",
    max_lag: int | None = None,
    take_over: bool = False,
) -> FailoverReport:
    """Plan, confirm, commit that plan (the CLI; see the module docstring). Never raises for a refusal
    the report can explain (already failed over, not confirmed, a plan that cannot be committed);
    raises MirrorflowError for bad input or a drain left with more lag than `max_lag`, PlanMovedError
    when the state moved after the plan or the plan is not `plan_id`. `drain` (planned mode; default:
    unless a dry run)."""
    report = plan_failover(
        cfg,
        flow,
        mode,
        groups,
        dry_run,
        copy_mode,
        max_drain_runs,
        log,
        drain,
        max_lag=max_lag,
        take_over=take_over,
        via=via,
    )
    if report.plan is None:  # nothing to do
        return report
    if report.plan.moves_after is None:  # moving groups left alone moves no application
        report.switch_steps = plan_switch(flow, "failover")
    if plan_id and plan_id != report.plan.id:
        raise PlanMovedError(
            f"failover of {flow.name}: the plan is {report.plan.id} now, not {plan_id}: the state moved since "
            "that preflight (see this report); nothing committed"
        )
    if dry_run:
        report.note = "dry run: nothing changed"
        if report.switch_steps:
            report.switch = switch_after(cfg, flow, report, dry_run=True, by=approved_by, via=via, log=log)
        return report
    if report.plan.blocked or not confirm(report):
        report.note = (
            f"plan {report.plan.id} cannot be committed: {report.plan.blocked}; nothing changed"
            if report.plan.blocked
            else "not confirmed: nothing changed"
        )
        return report
    report = commit_failover(cfg, flow, report.plan, approved_by or whoami(), report, via=via)
    if report.done and report.switch_steps:
        report.switch = switch_after(cfg, flow, report, by=report.approved_by, via=via, log=log)
    return report


def switch_after(
    cfg: Config,
    flow: FlowConfig,
    report: FailoverReport,
    *,
    dry_run: bool = False,
    by: str | None = None,
    via: str = "cli",
    log: Callable[[str], None] = lambda s: None,
) -> SwitchReport:
    """The client-switch steps after the failover of `report` (its plan): what they did, a failed step
    included (its error in the SwitchReport: the failover stands)."""
    plan_id = report.plan.id if report.plan else None
    try:
        return run_client_switch(cfg, flow, "failover", dry_run=dry_run, by=by, via=via, plan_id=plan_id, log=log)
    except ClientSwitchError as exc:
        return exc.report
