"""`mirrorflow failback --flow A->B [--reseed] [--accept-loss] [--plan-id ID] [--dry-run] [--yes] [--json]`:
prints the plan (with its id), asks, starts B->A with exactly that plan (mirrorflow.ops.dr.failback), then runs
the flow's client-switch steps (`client.switch.failback`)."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import add_operation_args, command, confirmed, gated_exit, load_flow
from mirrorflow.ops.dr import inputs
from mirrorflow.params import add_flags, from_args


def _args(p: argparse.ArgumentParser) -> None:
    add_operation_args(
        p,
        "the failed-over flow, e.g. A->B (its reverse flow B->A starts)",
        "print the plan: the divergence, what B->A copies and where it starts, what B no longer holds; change nothing",
    )
    add_flags(p, inputs.FAILBACK)
    p.add_argument(
        "--plan-id",
        help="start only if the plan is still this one (the id a --dry-run printed); otherwise nothing is started",
    )


@command("failback", "start the reverse flow of a failed-over flow from its failover record (disaster recovery)", _args)
def _failback(args: argparse.Namespace) -> int:
    from mirrorflow.ops.dr.failback import failback
    from mirrorflow.ops.dr.failback_report import FailbackReport
    from mirrorflow.state.lease import whoami

    cfg, flow = load_flow(args)

    def confirm(report: FailbackReport) -> bool:
        plan = report.plan.id if report.plan else "?"
        question = f"Start {report.reverse} with plan {plan} as shown? Type the flow name {flow.name}: "
        return confirmed(args, report.render(), question, flow.name)

    rep = failback(
        cfg,
        flow,
        dry_run=args.dry_run,
        confirm=confirm,
        **from_args(args, inputs.FAILBACK),
        plan_id=args.plan_id,
        approved_by=whoami() + (" (--yes)" if args.yes else ""),
    )
    return gated_exit(args, rep)
