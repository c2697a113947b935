"""`mirrorflow replicate --flow A->B --once [--json]`: plan -> copy -> report without Airflow.

`--continuous` takes --topics and --dry-run as a one-shot run does; a flag that cannot apply is
refused with one error before anything runs (--seconds without --continuous, --once with it,
--max-records-per-partition with it: replication.run.continuous.check_options)."""

from __future__ import annotations

import argparse
import re

from mirrorflow.cli.registry import add_copy_mode_args, command, copy_mode, load_flow, print_report
from mirrorflow.errors import ConfigError


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument(
        "--once", action="store_true", help="one run (the default; schedules belong to Airflow): not with --continuous"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--continuous",
        action="store_true",
        help="keep copying (micro-batches every continuous.poll.ms) until --seconds pass, the flow is paused "
        "or stopped, or SIGTERM; each transaction is committed, none is left open",
    )
    p.add_argument("--seconds", type=float, help="only with --continuous: how long (default: continuous.run.seconds)")
    p.add_argument("--topics", help="only the flow's source topics this regex fully matches (the DAG's Param)")
    p.add_argument(
        "--max-records-per-partition",
        type=int,
        metavar="N",
        help="copy at most N offsets of each partition this run (not with --continuous)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="plan and report what would be copied; copy nothing (with --continuous too: the run then ends)",
    )
    add_copy_mode_args(p)


@command("replicate", "copy new records of a flow once: plan -> copy (Spark) -> report", _args)
def _replicate(args: argparse.Namespace) -> int:
    from mirrorflow.cli.progress import records_bar
    from mirrorflow.replication.run.continuous import check_options
    from mirrorflow.replication.run.runner import RunOptions, run_continuous, run_once

    if args.continuous and args.once:
        raise ConfigError([("--once", "one run or a continuous run: give --once or --continuous, not both")])
    if args.seconds is not None and not args.continuous:
        raise ConfigError([("--seconds", "how long a continuous run copies: only with --continuous")])
    if args.continuous:
        check_options(RunOptions(partition_limit=args.max_records_per_partition), "--max-records-per-partition")
    if args.max_records_per_partition is not None and args.max_records_per_partition < 1:
        raise ConfigError(
            [("--max-records-per-partition", f"must be at least 1, got {args.max_records_per_partition}")]
        )
    if args.topics:
        try:
            re.compile(args.topics)
        except re.error as exc:
            raise ConfigError([("--topics", f"not a regex ({exc}): {args.topics!r}")]) from None
    cfg, flow = load_flow(args)
    mode = copy_mode(args, cfg)
    with records_bar(args, cfg, flow) as (log, on_plan):
        opts = RunOptions(args.topics, args.max_records_per_partition, args.dry_run, on_plan)
        if args.continuous:
            rep = run_continuous(cfg, flow, mode=mode, master=args.master, log=log, seconds=args.seconds, options=opts)
        else:
            rep = run_once(cfg, flow, mode=mode, master=args.master, log=log, options=opts)
    print_report(rep, args.json)
    return 0 if rep.ok else 1
