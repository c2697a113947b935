"""`mirrorflow failover --flow A->B [--mode planned|unplanned] [--groups REGEX] [--plan-id ID] [--dry-run] [--yes]
[--max-lag N] [--take-over] [--json]`: prints the plan (with its id), asks, commits exactly that plan
(mirrorflow.ops.dr.failover), then runs the flow's client-switch steps (`client.switch.failover`). On a flow
already failed over, `--groups` moves the groups it left alone."""

from __future__ import annotations

import argparse
import contextlib

from mirrorflow.cli.registry import add_operation_args, command, confirmed, gated_exit, load_flow
from mirrorflow.ops.dr import inputs
from mirrorflow.params import add_flags, from_args


def _args(p: argparse.ArgumentParser) -> None:
    add_operation_args(
        p, "the flow to fail over, e.g. A->B (its groups move to B)", "print the preflight report, change nothing"
    )
    add_flags(p, inputs.FAILOVER)
    p.add_argument(
        "--copy-mode", choices=["submit", "inprocess", "direct"], default="submit", help="planned mode: how to drain"
    )
    p.add_argument(
        "--plan-id",
        help="commit only if the plan is still this one (the id a --dry-run printed); otherwise nothing is committed",
    )


@command("failover", "move a flow's consumer groups to its target and stop the flow (disaster recovery)", _args)
def _failover(args: argparse.Namespace) -> int:
    from mirrorflow.ops.dr.failover import failover
    from mirrorflow.ops.dr.failover_report import FailoverReport
    from mirrorflow.state.lease import whoami

    cfg, flow = load_flow(args)

    def confirm(report: FailoverReport) -> bool:
        after = report.plan is not None and report.plan.moves_after
        question = (
            f"Fail over {flow.name}: commit plan {report.plan.id if report.plan else '?'} on {flow.target!r}"
            + ("? " if after else " and stop the flow? ")
            + "Type the flow name: "
        )
        return confirmed(args, report.render(), question, flow.name)

    from mirrorflow.cli.progress import plain_log, spinner

    approver = whoami() + (" (--yes)" if args.yes else "")
    with contextlib.ExitStack() as stack:
        # no question to ask: a spinner names each step; else the confirmation reads the terminal: plain lines
        quiet = args.yes or args.dry_run
        log = stack.enter_context(spinner(args, f"failover of {flow.name}")) if quiet else plain_log(args)
        rep = failover(
            cfg,
            flow,
            dry_run=args.dry_run,
            confirm=confirm,
            copy_mode=args.copy_mode,
            log=log,
            plan_id=args.plan_id,
            approved_by=approver,
            **from_args(args, inputs.FAILOVER),
        )
    return gated_exit(args, rep)
