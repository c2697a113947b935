"""`mirrorflow backfill --flow A->B [--topics REGEX] --from WHEN --to WHEN [--dry-run] [--json]`:
copy a historical source range the flow has not copied yet (see replication/backfill.py)."""

from __future__ import annotations

import argparse
import sys

from mirrorflow.cli.registry import command, load_config, print_json
from mirrorflow.replication.backfill import WHEN_HELP


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument("--topics", help="only SOURCE topics this regex fully matches (default: every topic of the flow)")
    p.add_argument("--from", dest="start", required=True, help=f"range start: {WHEN_HELP}")
    p.add_argument("--to", dest="end", required=True, help=f"range end, exclusive: {WHEN_HELP}")
    p.add_argument("--dry-run", action="store_true", help="print per partition the range and records it would copy")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--mode",
        choices=["submit", "inprocess", "direct"],
        default="submit",
        help="submit: spark-submit (default); inprocess: a SparkSession in this process; "
        "direct: no Spark, units in threads (debugging)",
    )
    p.add_argument("--master", help="Spark master (default: spark.master of the config, else local[*])")


@command(
    "backfill",
    "copy a historical source range the flow has not copied yet (records land after newer ones on the target)",
    _args,
)
def _backfill(args: argparse.Namespace) -> int:
    from mirrorflow.replication.backfill import When, backfill, topic_pattern

    When.parse(args.start, "--from")  # bad values: one clear error before the config is read
    When.parse(args.end, "--to")
    topic_pattern(args.topics)
    cfg = load_config(args)
    flow = cfg.flow(args.flow)
    log = (lambda s: print(s, file=sys.stderr)) if not args.json else (lambda s: None)
    rep = backfill(cfg, flow, args.start, args.end, args.topics, args.dry_run, args.mode, args.master, log)
    if args.json:
        print_json(rep.to_dict())
    else:
        print(rep.render())
    return 0 if rep.ok else 1
