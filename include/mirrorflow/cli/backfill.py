"""`mirrorflow backfill --flow A->B [--topics REGEX] --from WHEN --to WHEN [--dry-run] [--json]`:
copy a historical source range the flow has not copied yet (see ops/backfill.py)."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_config, print_report
from mirrorflow.replication.backfill_plan import WHEN_HELP


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument("--topics", help="only SOURCE topics this regex fully matches (default: every topic of the flow)")
    p.add_argument("--from", dest="start", required=True, help=f"range start: {WHEN_HELP}")
    p.add_argument("--to", dest="end", required=True, help=f"range end, exclusive: {WHEN_HELP}")
    p.add_argument("--dry-run", action="store_true", help="print per partition the range and records it would copy")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--mode",
        choices=["submit", "inprocess", "connect", "direct"],
        default=None,
        help="as for replicate: submit: spark-submit (the default without spark.remote); inprocess: a "
        "SparkSession in this process; connect: the Spark Connect server of spark.remote (the default "
        "with it); direct: no Spark, units in threads (debugging)",
    )
    p.add_argument(
        "--master",
        help="Spark master (default: spark.master of the config, else local[*]); sc://HOST:PORT = a Spark "
        "Connect server (connect mode)",
    )


@command(
    "backfill",
    "copy a historical source range the flow has not copied yet (records land after newer ones on the target)",
    _args,
)
def _backfill(args: argparse.Namespace) -> int:
    from mirrorflow.cli.progress import records_bar
    from mirrorflow.ops.backfill import backfill
    from mirrorflow.replication.backfill_plan import When, topic_pattern

    When.parse(args.start, "--from")  # bad values: one clear error before the config is read
    When.parse(args.end, "--to")
    topic_pattern(args.topics)
    cfg = load_config(args)
    flow = cfg.flow(args.flow)
    mode = args.mode or ("connect" if cfg.spark.remote or (args.master or "").startswith("sc://") else "submit")
    # a bar of the planned records (rate, ETA) on a terminal; quiet with --json or without a TTY
    with records_bar(args, cfg, flow) as (log, on_plan):
        rep = backfill(
            cfg, flow, args.start, args.end, args.topics, args.dry_run, mode, args.master, log, on_plan=on_plan
        )
    print_report(rep, args.json)
    return 0 if rep.ok else 1
