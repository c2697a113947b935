"""`mirrorflow failover --flow A->B [--mode planned|unplanned] [--groups REGEX] [--plan-id ID] [--dry-run] [--yes]
[--max-lag N] [--take-over] [--json]`: prints the plan (with its id), asks, commits exactly that plan
(mirrorflow.ops.dr.failover), then runs the flow's client-switch steps (`client.switch.failover`). On a flow
already failed over, `--groups` moves the groups it left alone."""

from __future__ import annotations

import argparse
import contextlib

from mirrorflow.cli.registry import add_operation_args, command, confirmed, gated_exit, load_flow


def _args(p: argparse.ArgumentParser) -> None:
    add_operation_args(
        p, "the flow to fail over, e.g. A->B (its groups move to B)", "print the preflight report, change nothing"
    )
    p.add_argument(
        "--mode",
        choices=["unplanned", "planned"],
        default="unplanned",
        help="unplanned (default): the source is lost, everything comes from the target; planned: the source "
        "is up (stop its producers first), drain it, then switch",
    )
    p.add_argument(
        "--groups",
        help="only the groups matching this regex (default: every group the flow checkpoints); on a flow already "
        "failed over: move the groups it left alone (or did not choose) that match",
    )
    p.add_argument(
        "--max-lag",
        type=int,
        metavar="N",
        help="planned mode: go on when the drain leaves at most N offsets not replicated in all (default: the "
        "drain must reach lag 0, else nothing changes)",
    )
    p.add_argument(
        "--copy-mode", choices=["submit", "inprocess", "direct"], default="submit", help="planned mode: how to drain"
    )
    p.add_argument(
        "--take-over",
        action="store_true",
        help="take the flow over from a run that holds its lease (e.g. a continuous run riding out the outage, a "
        "run of the other site's Airflow) or from another deployment (deployment.id) that owns its state: the "
        "commit (planned: the drain) takes the lease from it, fences the flow's copy transactions on the target so "
        "that run can never write there again, makes this deployment the flow's owner, and records who took the "
        "flow from whom in the operations history. Without it such a failover stops, naming the holder",
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
            args.mode,
            args.groups,
            args.dry_run,
            confirm,
            args.copy_mode,
            log=log,
            plan_id=args.plan_id,
            approved_by=approver,
            max_lag=args.max_lag,
            take_over=args.take_over,
        )
    return gated_exit(args, rep)
