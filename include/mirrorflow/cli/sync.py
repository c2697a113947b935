"""`mirrorflow sync --flow A->B [--dry-run] [--json] [--only topics,configs,acls]`."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_config, print_report
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.metadata.sync_report import CONCERNS


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow to sync, e.g. A->B")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--only", help=f"comma-separated concerns (default: all of {','.join(CONCERNS)})")


@command("sync", "create remote topics, add partitions, sync topic configs and ACLs for a flow", _args)
def _sync(args: argparse.Namespace) -> int:
    from mirrorflow.cli.progress import spinner

    with spinner(args, f"syncing {args.flow}: {args.only or ','.join(CONCERNS)}"):
        report = sync_flow(load_config(args), args.flow, args.only, dry_run=args.dry_run)
    print_report(report, args.json)
    return 0 if report.ok else 1
