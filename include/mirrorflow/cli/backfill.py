"""`mirrorflow backfill --flow A->B [--topics REGEX] --from WHEN --to WHEN [--dry-run] [--json]`:
copy a historical source range the flow has not copied yet (see ops/backfill.py)."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import add_copy_mode_args, command, copy_mode, load_flow, print_report
from mirrorflow.replication.plan.when import WHEN_HELP


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument("--topics", help="only SOURCE topics this regex fully matches (default: every topic of the flow)")
    p.add_argument("--from", dest="start", required=True, help=f"range start: {WHEN_HELP}")
    p.add_argument("--to", dest="end", required=True, help=f"range end, exclusive: {WHEN_HELP}")
    p.add_argument("--dry-run", action="store_true", help="print per partition the range and records it would copy")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_copy_mode_args(p)


@command(
    "backfill",
    "copy a historical source range the flow has not copied yet (records land after newer ones on the target)",
    _args,
)
def _backfill(args: argparse.Namespace) -> int:
    from mirrorflow.cli.progress import records_bar
    from mirrorflow.ops.backfill import backfill
    from mirrorflow.replication.plan.when import When, topic_pattern

    When.parse(args.start, "--from")  # bad values: one clear error before the config is read
    When.parse(args.end, "--to")
    topic_pattern(args.topics)
    cfg, flow = load_flow(args)
    mode = copy_mode(args, cfg)
    # a bar of the planned records (rate, ETA) on a terminal; quiet with --json or without a TTY
    with records_bar(args, cfg, flow) as (log, on_plan):
        rep = backfill(
            cfg, flow, args.start, args.end, args.topics, args.dry_run, mode, args.master, log, on_plan=on_plan
        )
    print_report(rep, args.json)
    return 0 if rep.ok else 1
