"""A failover's commit (`commit_failover(plan)`): under the flow's lease (taken over when the plan
says so), re-reads what the plan was built from and commits nothing when any of it moved
(`PlanMovedError`); else exactly the plan's offsets (never backwards, never a group with active
members), the flow stopped, the failover record and the operations history's line written; a read-only
mirror promoted (metadata.read_only: its DENY lifted, a `promote` line in the history)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, DeploymentConflictError, LeaseError, MirrorflowError, StateError
from mirrorflow.groups.offset_sync import commit_group_plans
from mirrorflow.metadata.read_only import promote
from mirrorflow.ops.dr.failover_plan import FailoverPlan, PlanMovedError, plan_moves
from mirrorflow.ops.dr.failover_preflight import build_plan, group_pattern
from mirrorflow.ops.dr.failover_record import done_note, failed_over, last_copies, moved_groups, record_id
from mirrorflow.ops.dr.failover_report import FailoverReport
from mirrorflow.ops.dr.lease_takeover import TAKE_OVER_HINT, take_over_flow
from mirrorflow.state.flow_state import set_flow_state, write_control
from mirrorflow.state.history import record_operation
from mirrorflow.state.lease import FlowLease, local_owner, whoami
from mirrorflow.state.run_lease import take_lease
from mirrorflow.state.store import StateStore


def commit_failover(
    cfg: Config,
    flow: FlowConfig,
    plan: FailoverPlan,
    approved_by: str,
    report: FailoverReport | None = None,
    via: str = "",
) -> FailoverReport:
    """Commit exactly `plan` (module docstring), recording `approved_by` (and the door, `via`, in the
    operations history). PlanMovedError, nothing committed, when what the plan was built from moved;
    StateError for a plan that cannot be committed."""
    if (plan.flow, plan.target) != (flow.name, flow.target):
        raise ConfigError([("plan", f"plan {plan.id} is for flow {plan.flow}, not {flow.name}")])
    if plan.blocked:
        raise StateError(f"failover plan {plan.id} of {flow.name} cannot be committed: {plan.blocked}")
    if report is None:
        report = FailoverReport(flow.name, flow.target, plan.mode, False, plan=plan)
    report.approved_by = approved_by
    with FlowClients(cfg, flow) as clients:
        done = failed_over(clients)
        if plan.moves_after is None and done is not None:
            report.note = done_note(clients, done)
            report.promoted = promote(clients, approved_by, via)  # what an interrupted commit left
            return report
        if plan.moves_after is not None and (done is None or record_id(done) != plan.moves_after):
            raise PlanMovedError(
                f"failover plan {plan.id} moves groups after failover {plan.moves_after} of {flow.name}, but the "
                + ("flow is not failed over now" if done is None else f"flow's failover is {record_id(done)} now")
                + ": nothing committed. Run the preflight again."
            )
        lease = _lease(clients, plan, report, approved_by, via)
        try:
            now = _plan_now(clients, plan, done)
            moved = plan_moves(plan, now)
            if moved:
                raise PlanMovedError(
                    f"failover of {flow.name}: nothing committed: the state moved since plan {plan.id} was made"
                    f" (now {now.id}): "
                    + "; ".join(moved[:20])
                    + (f"; and {len(moved) - 20} more" if len(moved) > 20 else "")
                    + ". Run the preflight again and approve the new plan."
                    + (f" (The take-over stands: {report.take_over}.)" if plan.take_over else "")
                )
            if plan.moves_after is None:
                _commit(clients, report, plan, now, via)
            else:
                _commit_after(clients, report, plan, via)
        finally:
            lease.release()
    return report


def _lease(clients: FlowClients, plan: FailoverPlan, report: FailoverReport, approved_by: str, via: str) -> FlowLease:
    """The flow's lease for the commit: taken over (its copies fenced) when the operator confirmed it, else
    taken as a run takes it (refused, naming the take-over, while another holds it)."""
    if plan.take_over:
        keys = [(p.topic, p.partition) for p in plan.partitions]
        lease, report.take_over = take_over_flow(clients, approved_by, via, f"failover of plan {plan.id}", keys)
        return lease
    try:
        return take_lease(clients, *local_owner("mirrorflow failover"))
    except (LeaseError, DeploymentConflictError) as exc:
        raise type(exc)(f"failover of {clients.flow.name}: {exc}. {TAKE_OVER_HINT}") from None


def _plan_now(clients: FlowClients, plan: FailoverPlan, done: dict[str, Any] | None) -> FailoverPlan:
    """`plan` made again from the state now, to compare (plan_moves): after failover `done` when it moves
    groups after one."""
    pattern = group_pattern(plan.groups_regex)
    if done is None:
        return build_plan(clients, plan.mode, plan.groups_regex, pattern, None)
    now = build_plan(clients, plan.mode, plan.groups_regex, pattern, None, moved_groups(done))
    return replace(now, moves_after=plan.moves_after)


def _commit(clients: FlowClients, report: FailoverReport, plan: FailoverPlan, now: FailoverPlan, via: str) -> None:
    flow = clients.flow
    report.committed, errors = commit_group_plans(clients.admin("target"), plan.groups, clients.admin_timeout)
    if errors:
        raise MirrorflowError(
            f"failover of {flow.name}: committing the offsets of plan {plan.id} failed for "
            + "; ".join(f"{g}: {e}" for g, e in sorted(errors.items()))
            + " (the flow is not stopped; fix and run the failover again: it never moves an offset backwards)"
        )
    write_control(
        clients,
        "failover",
        {
            # when the plan was made, however it is committed: the failback splits the records the
            # source accepted at this time into the divergence (before) and the split brain (after)
            "at": plan.at_ms or report.at_ms,
            "mode": plan.mode,
            "by": whoami(),
            "approved_by": report.approved_by,
            "plan": plan.id,
            # read again at the commit (producers may write to B while the approval waits)
            "target_ends": {f"{p.target_topic}:{p.partition}": p.target_end for p in now.partitions},
            "replicated_to": {f"{p.topic}:{p.partition}": p.replicated_to for p in plan.partitions},
            "groups": plan.commits(),
            "left_alone": [g.group for g in plan.groups if g.action == "left-alone"],
            "take_over": report.take_over if plan.take_over else None,
            # what the failback checks: the source's ends when the plan was made (divergence / split
            # brain by offsets) and the last copy on the target with its leader epoch (truncation)
            "source_ends": dict(plan.source_ends),
            "target_last": last_copies(clients, StateStore(clients).progress()),
        },
    )
    why = f"failed over to {flow.target!r} ({plan.mode}), plan {plan.id} approved by {report.approved_by}"
    # the history line is the failover's; the cause makes every skipped run name the failback as the next step
    set_flow_state(clients, "stopped", why, whoami(), cause="failover")
    report.done = True
    try:
        _record(clients, report, plan, via)
    except StateError as exc:
        raise StateError(f"flow {flow.name} was failed over (plan {plan.id}), but {exc}") from None
    report.promoted = promote(clients, str(report.approved_by), via)


def _commit_after(clients: FlowClients, report: FailoverReport, plan: FailoverPlan, via: str) -> None:
    """Commit a plan moving groups after the failover; the failover record stays the failover's, the
    operations history gets the line."""
    flow = clients.flow
    report.committed, errors = commit_group_plans(clients.admin("target"), plan.groups, clients.admin_timeout)
    if errors:
        raise MirrorflowError(
            f"moving groups of {flow.name} after its failover: committing plan {plan.id} failed for "
            + "; ".join(f"{g}: {e}" for g, e in sorted(errors.items()))
            + (f" (committed: {', '.join(sorted(report.committed))})" if report.committed else "")
            + "; run it again: it never moves an offset backwards"
        )
    report.done = True
    moved = sorted(report.committed)
    try:
        record_operation(
            clients,
            "failover",
            str(report.approved_by),
            via=via,
            summary=f"moved groups left alone: {', '.join(moved)} (plan {plan.id}, after failover {plan.moves_after})",
            figures={"groups committed": len(moved), "offsets committed": sum(report.committed.values())},
        )
    except StateError as exc:
        raise StateError(
            f"the groups {', '.join(moved)} of {flow.name} were moved (plan {plan.id}), but {exc}"
        ) from None


def _record(clients: FlowClients, report: FailoverReport, plan: FailoverPlan, via: str) -> None:
    """The failover's line in the flow's operations history (state.history)."""
    record_operation(
        clients,
        "failover",
        str(report.approved_by),
        via=via,
        summary=f"{plan.mode} failover to {clients.flow.target!r}, plan {plan.id}: the flow is stopped",
        figures={
            "groups committed": len(report.committed),
            "offsets committed": sum(report.committed.values()),
            "groups left alone": sum(g.action == "left-alone" for g in plan.groups),
            "not replicated": report.not_replicated,
        },
    )
