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

`OPERATION` declares them as an approved operation (ops.dr.gated): `failover` carries it out for the CLI
(plan, confirm, commit); the DAG runs them as its preflight and commit tasks with Airflow's approval step
between. A second failover of a stopped, failed-over flow
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

from collections.abc import Callable, Mapping
from typing import Any

from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.dr import inputs
from mirrorflow.ops.dr.caller import Caller
from mirrorflow.ops.dr.failover_commit import commit_failover
from mirrorflow.ops.dr.failover_drain import Drain
from mirrorflow.ops.dr.failover_plan import FailoverPlan
from mirrorflow.ops.dr.failover_preflight import plan_failover
from mirrorflow.ops.dr.failover_report import FailoverReport
from mirrorflow.ops.dr.gated import GatedOperation

# what only the CLI sets (how to drain, how often, whether), and its field of Drain: Drain's defaults otherwise
DOOR_ONLY = (("copy_mode", "copy_mode"), ("max_drain_runs", "max_runs"), ("drain", "enabled"))


def _plan(cfg: Config, flow: FlowConfig, params: Mapping[str, Any], caller: Caller) -> FailoverReport:
    door = {field: params[k] for k, field in DOOR_ONLY if params.get(k) is not None}
    drain = Drain(**door, max_lag=params["max_lag"])
    return plan_failover(
        cfg, flow, params["mode"], params["groups"], drain=drain, take_over=params["take_over"], caller=caller
    )


OPERATION: GatedOperation[FailoverReport] = GatedOperation(
    "failover",
    "committed",
    _plan,
    commit_failover,
    FailoverPlan.from_dict,
    # moving the groups a failover left alone moves no application: no client switch after it
    switches=lambda report: report.plan is not None and report.plan.moves_after is None,
    fields=inputs.FAILOVER,
)


def failover(
    cfg: Config,
    flow: FlowConfig,
    *,
    dry_run: bool = False,
    confirm: Callable[[FailoverReport], bool] = lambda r: True,
    plan_id: str | None = None,
    approved_by: str | None = None,
    via: str = "cli",
    log: Callable[[str], None] = lambda s: None,
    **params: Any,
) -> FailoverReport:
    """Plan, confirm, commit that plan, switch the clients (the CLI; `GatedOperation.carry_out`). `params`:
    its inputs (ops.dr.inputs.FAILOVER: `mode`, `groups`, `max_lag`, `take_over`; the fields' defaults
    where not given) and what only the CLI sets (`copy_mode`, `max_drain_runs`, `drain`: planned mode's
    drain, unless a dry run)."""
    OPERATION.refuse_unknown(params, tuple(k for k, _ in DOOR_ONLY))
    return OPERATION.carry_out(cfg, flow, params, Caller(via, approved_by, plan_id, dry_run, log), confirm)
