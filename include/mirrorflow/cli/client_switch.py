"""`mirrorflow client-switch --flow A->B --after failover|failback [--from STEP] [--dry-run] [--yes] [--json]`:
run a flow's client-switch steps (mirrorflow.ops.dr.client_switch) outside its failover or failback: again
from a step that failed (the operation stands), or as a dry run to check them (the drill does that too)."""

from __future__ import annotations

import argparse
import sys

from mirrorflow.cli.registry import add_operation_args, command, confirmed, load_flow, print_report


def _args(p: argparse.ArgumentParser) -> None:
    add_operation_args(
        p,
        "the flow whose steps to run, e.g. A->B (also for the steps of its failback)",
        "run every step as a dry run: each checks what it would do and says so; nothing changes",
    )
    p.add_argument(
        "--after",
        choices=["failover", "failback"],
        default="failover",
        help="the steps of the failover (client.switch.failover, default) or of the failback "
        "(client.switch.failback); without --dry-run only once that operation was done",
    )
    p.add_argument("--from", dest="start", metavar="STEP", help="start at this step (default: the first)")


@command("client-switch", "run a flow's client-switch steps again after its failover or failback (DR)", _args)
def _client_switch(args: argparse.Namespace) -> int:
    from mirrorflow.errors import StateError
    from mirrorflow.ops.dr.caller import Caller
    from mirrorflow.ops.dr.client_switch import (
        ClientSwitchError,
        check_switch_allowed,
        plan_switch,
        run_client_switch,
        switch_steps,
    )
    from mirrorflow.state.lease import whoami

    cfg, flow = load_flow(args)
    steps = plan_switch(flow, args.after)
    if not steps:
        print(f"flow {flow.name} has no client-switch steps after the {args.after} (client.switch.{args.after})")
        return 0
    if not args.dry_run:
        problem = check_switch_allowed(cfg, flow, args.after)
        if problem:
            raise StateError(f"client switch of {flow.name}: {problem}; nothing run (--dry-run checks the steps)")
        names = [s["name"] for s in switch_steps(flow, args.after)]
        first = names.index(args.start) if args.start in names else 0
        shown = "\n".join(f"  {s}" for s in steps[first:])
        question = f"Run these client-switch steps of {flow.name} now? Type the flow name: "
        if not confirmed(args, f"client-switch steps after the {args.after}:\n{shown}", question, flow.name):
            print("not confirmed: nothing run", file=sys.stderr)
            return 1
    by = whoami() + (" (--yes)" if args.yes else "")
    try:
        rep = run_client_switch(cfg, flow, args.after, Caller(by=by, dry_run=args.dry_run), start=args.start)
    except ClientSwitchError as exc:
        print_report(exc.report, args.json)
        print(f"mirrorflow: {exc}", file=sys.stderr)
        return 1
    print_report(rep, args.json)
    return 0
