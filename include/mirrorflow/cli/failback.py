"""`mirrorflow failback --flow A->B [--reseed] [--dry-run] [--yes] [--json]`: start B->A after A->B's failover."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import add_operation_args, command, confirmed, load_flow, print_report


def _args(p: argparse.ArgumentParser) -> None:
    add_operation_args(
        p,
        "the failed-over flow, e.g. A->B (its reverse flow B->A starts)",
        "print the divergence and where B->A starts, change nothing",
    )
    p.add_argument(
        "--reseed",
        action="store_true",
        help="A was rebuilt empty: B->A copies all of B's topics from their start (refused if A's topics hold records)",
    )


@command("failback", "start the reverse flow of a failed-over flow from its failover record (disaster recovery)", _args)
def _failback(args: argparse.Namespace) -> int:
    from mirrorflow.ops.dr.failback import failback
    from mirrorflow.ops.dr.failback_report import FailbackReport

    cfg, flow = load_flow(args)

    def confirm(report: FailbackReport) -> bool:
        question = f"Start {report.reverse} as shown? Type the flow name {flow.name}: "
        return confirmed(args, report.render(), question, flow.name)

    rep = failback(cfg, flow, args.dry_run, confirm, reseed=args.reseed)
    print_report(rep, args.json)
    return 0 if rep.done or args.dry_run or (rep.note or "").startswith("nothing to do") else 1
