"""`mirrorflow replicate --flow A->B --once [--json]`: plan -> copy -> report without Airflow.

The run's options are declared once (mirrorflow.ops.inputs.REPLICATE), for this command and the replicate
DAG's form. `--continuous` takes --topics and --dry-run as a one-shot run does; a flag that cannot apply is
refused with one error before anything runs (--seconds without --continuous, --once with it,
--max-records-per-partition with it: replication.run.continuous.check_options)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from mirrorflow.cli.registry import add_copy_mode_args, command, copy_mode, load_flow, print_report
from mirrorflow.errors import ConfigError


def _args(p: argparse.ArgumentParser) -> None:
    from mirrorflow.ops.inputs import REPLICATE
    from mirrorflow.params import add_flags

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
    add_flags(p, REPLICATE)
    add_copy_mode_args(p)


@command("replicate", "copy new records of a flow once: plan -> copy (Spark) -> report", _args)
def _replicate(args: argparse.Namespace) -> int:
    from mirrorflow.cli.progress import records_bar
    from mirrorflow.ops.inputs import REPLICATE, run_options
    from mirrorflow.params import from_args
    from mirrorflow.replication.run.continuous import check_options
    from mirrorflow.replication.run.runner import run_continuous, run_once

    if args.continuous and args.once:
        raise ConfigError([("--once", "one run or a continuous run: give --once or --continuous, not both")])
    if args.seconds is not None and not args.continuous:
        raise ConfigError([("--seconds", "how long a continuous run copies: only with --continuous")])
    given = run_options(from_args(args, REPLICATE))  # bad values: one clear error before the config is read
    if args.continuous:
        check_options(given, "--max-records-per-partition")
    cfg, flow = load_flow(args)
    mode = copy_mode(args, cfg)
    with records_bar(args, cfg, flow) as (log, on_plan):
        opts = replace(given, on_plan=on_plan)
        if args.continuous:
            rep = run_continuous(cfg, flow, mode=mode, master=args.master, log=log, seconds=args.seconds, options=opts)
        else:
            rep = run_once(cfg, flow, mode=mode, master=args.master, log=log, options=opts)
    print_report(rep, args.json)
    return 0 if rep.ok else 1
