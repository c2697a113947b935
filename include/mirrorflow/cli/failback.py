"""`mirrorflow failback --flow A->B [--dry-run] [--yes] [--json]`: start B->A from A->B's failover."""

from __future__ import annotations

import argparse
import sys

from mirrorflow.cli.registry import command, load_config, print_json


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the failed-over flow, e.g. A->B (its reverse flow B->A starts)")
    p.add_argument("--dry-run", action="store_true", help="print the divergence and where B->A starts, change nothing")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


@command("failback", "start the reverse flow of a failed-over flow from its failover record (disaster recovery)", _args)
def _failback(args: argparse.Namespace) -> int:
    from mirrorflow.ops.failback import FailbackReport, failback

    cfg = load_config(args)
    flow = cfg.flow(args.flow)

    def confirm(report: FailbackReport) -> bool:
        if args.yes:
            return True
        print(report.render(), file=sys.stderr)
        if not sys.stdin.isatty():
            print("mirrorflow: not confirmed (no terminal): run again with --yes", file=sys.stderr)
            return False
        answer = input(f"Start {report.reverse} as shown? Type the flow name {flow.name}: ")
        return answer.strip() == flow.name

    rep = failback(cfg, flow, args.dry_run, confirm)
    if args.json:
        print_json(rep.to_dict())
    else:
        print(rep.render())
    return 0 if rep.done or args.dry_run or (rep.note or "").startswith("nothing to do") else 1
