"""Failback of a failed-over flow X->Y: start its reverse flow Y->X from what X->Y wrote.

Every record on Y that X->Y did not write reaches X exactly once, whenever it was written (before
the failover committed, while its approval waited, after), and nothing X already had is copied back:

* **What X->Y wrote** comes from X->Y's own offset map (its runs: the target offsets of every
  record it copied), never from Y's end at some moment. Per partition of Y's topic the reverse
  flow's progress gets a ledger (`Progress.covered`) that holds exactly those offsets; every other
  offset from where the reverse flow stands (its own progress, else Y's log start) is left to copy.
  The offsets between X->Y's records (its transaction markers, aborted attempts, or records other
  producers wrote in between) are read once (read_committed): a stretch without a committed record
  joins the ledger, a stretch with records stays to be copied. The reverse flow copies holes in its
  ledger like backfill/reseed do (planner: [next, end) minus the ledger), so its first run copies
  every record written on Y outside X->Y, in Y's order. The report counts them per partition
  (`written on Y outside X->Y: N records, will be copied`).
* **IdentityReplicationPolicy** (topics keep their names both ways): the reverse flow's offset map
  also gets the inverse of X->Y's map over what X->Y wrote (Y offset -> the original X offset), so
  Y->X's checkpoints translate a group on Y exactly, also one still reading records that came from
  X, and `verify` of Y->X checks them.
* **DefaultReplicationPolicy**: X->Y wrote only into Y's `X.T`, which is never copied back (MM2's
  cycle rule); every record of Y's own topic `T` reaches X as `Y.T` (from where Y->X stands, else
  from Y's log start).

Records on X that are not on Y, two categories, both kept on X (never deleted) and never copied to
Y by any later step (a failback back records them as done for X->Y):

* **divergence**: held by X when the failover plan was made (below X's end then, which the
  failover record keeps) and never copied by X->Y: lost from Y's point of view.
* **split brain**: accepted by X after that (from that end on, and every record of a topic or
  partition created on X since), i.e. producers that still wrote to X while the applications moved
  to Y. MirrorMaker 2 users expect a failback not to merge these silently; the report names them
  (ranges, counts) so the operator decides (re-produce them on Y, or drop them).
Both: per partition X->Y's filter matches on X now, X offsets at or above X->Y's progress that its
ledger does not cover (a partition it never copied: from its log start), up to X's end now; by
offsets, not the records' timestamps (failback_divergence). Where Y lacks such a topic or partition (no
sync took it across), the report says `not on Y yet`: when Y gets it later, Y->X copies it from its
beginning after X's records there, which the failback record names as kept (state_drift.only_kept).

The whole flow as it is at the failback: Y's topics and partitions the reverse filter matches, also
those created on Y during the outage, are copied back and counted; what Y no longer holds (deleted by
retention, removed by compaction, a topic recreated, a partition truncated since X->Y wrote it) is
counted and named, and stops the failback until the operator accepts it (failback_seeds).

Two steps, as a failover: `plan_failback` (failback_preflight) makes the plan, with an id derived from
its content; `commit_failback(plan)` (failback_commit) starts exactly that plan or, when what it was
built from moved, nothing. `OPERATION` declares them as an approved operation (ops.dr.gated); `failback`
carries it out for the CLI (plan, confirm, commit).

X rebuilt empty (`failback --reseed`): nothing of X's is kept, so Y->X starts each partition of Y's
topics at Y's log start in a new map epoch (as `mirrorflow reseed` does) and copies all of it; its
own map then moves the groups back exactly. X->Y's state (of the old X) gets a new epoch without
progress, so the failback back starts it at the rebuilt X's log start. Refused when X's topics hold
records (they would be duplicated).

Going back (the symmetric step): `mirrorflow failover --flow Y->X --mode planned` moves the groups
to X and stops Y->X; `mirrorflow failback --flow Y->X` then restarts X->Y by the same rule the other
way: X->Y's ledger gets what Y->X wrote on X (the records copied and the seeded inverse runs) and
the divergence and split-brain ranges of the earlier failback, so it copies only what was written
on X outside Y->X since (the records producers wrote on X after the failover back).

The reverse flow must be in the config. With the identity policy the pair X->Y / Y->X is a cycle,
which `config validate` accepts only when one of the two is `standby: true` (stopped until a
failback starts it); only one of the two runs at a time because a failover stops the flow it moves
away from and a failback refuses to start the reverse flow of a flow that is not stopped.

**Client switch** (ops.dr.client_switch): the flow's `client.switch.failback` steps (e.g. the readers
of the mirror move to X, the mirror from then on) are approved with the plan and run after the start,
in order, each timed and recorded in the reverse flow's history; a failing step leaves the failback
standing (the report's `switch` names it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.dr import inputs
from mirrorflow.ops.dr.caller import Caller
from mirrorflow.ops.dr.failback_commit import commit_failback
from mirrorflow.ops.dr.failback_plan import FailbackPlan
from mirrorflow.ops.dr.failback_preflight import is_identity, plan_failback
from mirrorflow.ops.dr.failback_report import FailbackReport
from mirrorflow.ops.dr.gated import GatedOperation
from mirrorflow.reporting import iso
from mirrorflow.state.flow_state import flow_state, read_control, read_controls
from mirrorflow.state.names import dag_id


def _plan(cfg: Config, flow: FlowConfig, params: Mapping[str, Any], caller: Caller) -> FailbackReport:
    return plan_failback(cfg, flow, params["reseed"], params["accept_loss"], caller.dry_run)


OPERATION: GatedOperation[FailbackReport] = GatedOperation(
    "failback", "started", _plan, commit_failback, FailbackPlan.from_dict, fields=inputs.FAILBACK
)


def failback(
    cfg: Config,
    flow: FlowConfig,
    *,
    dry_run: bool = False,
    confirm: Callable[[FailbackReport], bool] = lambda r: True,
    plan_id: str | None = None,
    approved_by: str | None = None,
    via: str = "cli",
    **params: Any,
) -> FailbackReport:
    """Plan, confirm, start that plan, switch the clients (the CLI; `GatedOperation.carry_out`), as
    `failover` does. `params`: its inputs (ops.dr.inputs.FAILBACK: `reseed`, `accept_loss`; the fields'
    defaults where not given)."""
    OPERATION.refuse_unknown(params)
    return OPERATION.carry_out(cfg, flow, params, Caller(via, approved_by, plan_id, dry_run), confirm)


def resume_problem(cfg: Config, flow: FlowConfig, force: bool = False) -> str | None:
    """Why `mirrorflow flow resume` must not start `flow` (None: it may). With the identity policy
    both ways, the pair must never run at once, and a flow whose reverse flow was failed over since
    it last ran restarts through `mirrorflow failback` of that flow (which starts it at the ends
    recorded by that failover), never by a plain resume that would copy the reverse flow's records
    back. Any flow failed over and not restarted since goes on through a failback too: a resume would
    copy to the target what the source accepted after the failover (the split brain a failback keeps
    apart); `force` allows it (the applications never moved)."""
    rev = next((f for f in cfg.flows.values() if f.source == flow.target and f.target == flow.source), None)
    with FlowClients(cfg, flow) as fc:
        own = read_controls(fc, ["failover", "failback"])
    rev_failover = None
    if rev is not None:
        with FlowClients(cfg, rev) as rc:
            rev_state, rev_failover = flow_state(rc), read_control(rc, "failover")
        if is_identity(flow) and is_identity(rev):
            if rev_state.state != "stopped":
                return (
                    f"the reverse flow {rev.name} is {rev_state.describe()}: with IdentityReplicationPolicy both "
                    f"running would copy records back and forth (stop it first, or fail over with "
                    f"`mirrorflow failover --flow {rev.name}`)"
                )
            started = own.get("failback")
            if rev_failover is not None and (
                started is None or int(started.get("failover_at", -1)) != int(rev_failover.get("at", 0))
            ):
                return (
                    f"{rev.name} was failed over at {iso(int(rev_failover.get('at', 0)))} and {flow.name} was not "
                    f"restarted since: run `mirrorflow failback --flow {rev.name}` (it starts {flow.name} at the ends "
                    f"that failover recorded; a plain resume would copy {rev.name}'s records back)"
                )
    failed_over, restarted = own.get("failover"), own.get("failback")
    if (
        force
        or failed_over is None
        or (restarted is not None and int(restarted.get("at", 0)) >= int(failed_over.get("at", 0)))
    ):
        return None
    at = int(failed_over.get("at", 0))
    if rev is not None and rev_failover is not None and int(rev_failover.get("at", 0)) > at:
        step = (
            f"the failback of {rev.name}, failed over since (`mirrorflow failback --flow {rev.name}`: it starts "
            f"{flow.name} at the ends that failover recorded)"
        )
    else:
        step = (
            f"the failback (`mirrorflow failback --flow {flow.name}`, DAG {dag_id('failback', flow.id)}), which "
            f"copies what was written on {flow.target!r} back"
        )
    return (
        f"it was failed over to {flow.target!r} at {iso(at)}: its next step is {step}; a resume would copy to "
        f"{flow.target!r} what {flow.source!r} accepted since the failover. If the applications never moved, "
        "resume with --force (the control DAG's Param force)"
    )
