"""A failback's start (`commit_failback(plan)`): under the reverse flow's lease, reads again what the
plan was built from (the target up to the same ends) and writes nothing when any of it moved
(`PlanMovedError`); else exactly the plan's seeds (the reverse flow's ledger and inverse offset map),
the reverse flow set running, the failback record (its plan, who approved it, what was lost and
accepted, the split brain counted up to now) and the operations history's line. With
`mirror.read.only`, the side that becomes the mirror is made read-only first (metadata.read_only:
the DENY WRITE for User:* on the reverse flow's remote topics there, before anything else is written)."""

from __future__ import annotations

from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, StateError
from mirrorflow.metadata.read_only import deny_or_raise, is_read_only
from mirrorflow.ops.dr.failback_plan import FailbackPlan, divergence_dict, loss_dict, plan_moves, seed_dict
from mirrorflow.ops.dr.failback_preflight import (
    already_done,
    build_plan,
    checked_reverse,
    failover_record,
    is_identity,
    require_stopped,
)
from mirrorflow.ops.dr.failback_report import FailbackReport
from mirrorflow.ops.dr.failover_plan import PlanMovedError
from mirrorflow.ops.dr.failover_record import offsets
from mirrorflow.ops.dr.seed_writer import write_reseed, write_seeds
from mirrorflow.reporting import iso
from mirrorflow.state.flow_state import read_control, set_flow_state, write_control
from mirrorflow.state.history import record_operation
from mirrorflow.state.kept_apart import kept_ranges
from mirrorflow.state.lease import local_owner, whoami
from mirrorflow.state.run_lease import take_lease
from mirrorflow.state.state_topics import ensure_state_topics


def commit_failback(
    cfg: Config,
    flow: FlowConfig,
    plan: FailbackPlan,
    approved_by: str,
    report: FailbackReport | None = None,
    via: str = "",
) -> FailbackReport:
    """Start exactly `plan` (module docstring), recording `approved_by` (and the door, `via`, in the
    operations history). PlanMovedError, nothing written, when what the plan was built from moved;
    StateError for a plan that cannot be started."""
    rev = checked_reverse(cfg, flow, plan.reseed)
    if (plan.flow, plan.reverse) != (flow.name, rev.name):
        raise ConfigError([("plan", f"plan {plan.id} is the failback of {plan.flow}, not of {flow.name}")])
    if plan.blocked:
        raise StateError(f"failback plan {plan.id} of {flow.name} cannot be started: {plan.blocked}")
    if report is None:
        report = FailbackReport(flow.name, rev.name, is_identity(flow), False, reseed=plan.reseed)
    report.show(plan)
    report.approved_by = approved_by
    with FlowClients(cfg, flow) as fc, FlowClients(cfg, rev) as rc:
        record = failover_record(fc, rev.name)
        report.failover_at = int(record.get("at", 0))
        if already_done(rc, report):
            return report
        require_stopped(fc, rev.name)
        previous = read_control(rc, "failback")
        ensure_state_topics(rc)  # the reverse flow may never have run
        lease = take_lease(rc, *local_owner("mirrorflow failback"))
        try:
            now, inverse = build_plan(fc, rc, record, plan.reseed, plan.accept_loss, dict(plan.read_to))
            moved = plan_moves(plan, now)
            if moved or now.id != plan.id:
                raise PlanMovedError(
                    f"failback of {flow.name}: nothing started: the state moved since plan {plan.id} was made (now "
                    f"{now.id}): "
                    + "; ".join(moved[:20] or ["what the plan was read from"])
                    + (f"; and {len(moved) - 20} more" if len(moved) > 20 else "")
                    + ". Run the preflight again and approve the new plan."
                )
            if is_read_only(rev):  # the mirror first (checked, then denied): never writable once copied into
                report.read_only = deny_or_raise(rc, f"failback of {flow.name}")
            # the split brain, counted up to the source's end now: records it accepted while the approval waited
            report.split_since_plan = sum(d.records for d in now.split_brain) - sum(d.records for d in plan.split_brain)
            report.show(now)
            if plan.reseed:
                write_reseed(fc, rc, list(now.seeds), sorted(offsets(record, "replicated_to")))
            else:
                write_seeds(rc, list(now.seeds), inverse)
            _started(rc, report, now, record, previous, approved_by, via)
        finally:
            lease.release()
    report.done = True
    return report


def _started(
    rc: FlowClients,
    report: FailbackReport,
    plan: FailbackPlan,
    record: dict[str, Any],
    previous: dict[str, Any] | None,
    approved_by: str,
    via: str,
) -> None:
    """The reverse flow running, the failback record and the history's line."""
    why = f"failback of {report.flow} (failed over at {iso(report.failover_at)})"
    why += f", plan {plan.id} approved by {approved_by}"
    set_flow_state(rc, "running", why, whoami(), via=via)
    write_control(
        rc,
        "failback",
        {
            "at": report.at_ms,
            "of": report.flow,
            "failover_at": report.failover_at,
            "failover_plan": str(record.get("plan") or ""),
            "by": whoami(),
            "approved_by": approved_by,
            "plan": plan.id,
            "reseed": plan.reseed,
            "accept_loss": plan.accept_loss,
            "split_by": plan.split_by,
            "divergence": [divergence_dict(d) for d in plan.divergence],
            "split_brain": [divergence_dict(d) for d in plan.split_brain],
            # what earlier failbacks kept on the same target stays there, apart (verify)
            "kept_earlier": [] if plan.reseed else _kept_ranges(previous),
            "losses": [loss_dict(x) for x in plan.losses],
            "seeds": [seed_dict(s) for s in plan.seeds],
        },
    )
    figures = {
        "partitions": len(plan.seeds),
        "to copy": plan.to_copy,
        "divergence": report.diverged,
        "split brain": report.split,
    }
    if plan.losses:
        figures["lost (accepted)"] = sum(max(x.offsets, 0) for x in plan.losses)
    if report.read_only is not None:
        figures["made read-only"] = len(report.read_only)
    record_operation(
        rc,
        "failback",
        approved_by,
        via=via,
        summary=f"started by the failback of {report.flow}" + (" (reseed)" if plan.reseed else ""),
        figures=figures,
    )


def _kept_ranges(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every range a failback record says is kept on its reverse flow's target (state.kept_apart), as
    the next failback's record carries them on (`kept_earlier`; the latest record is the only one read),
    so `verify` of the reverse flow counts the records every failback kept as kept, not as `extra`, round
    trip after round trip."""
    return [
        {"topic": t, "partition": p, "ranges": [list(r) for r in ranges]}
        for (t, p), ranges in sorted(kept_ranges(record).items())
    ]
