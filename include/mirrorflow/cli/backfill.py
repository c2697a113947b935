"""`mirrorflow backfill --flow A->B [--topics REGEX] --from WHEN --to WHEN [--dry-run] [--json]`:
copy a historical source range the flow has not copied yet (see ops/backfill.py). The inputs are declared
once (mirrorflow.ops.inputs.BACKFILL), for this command and the backfill DAG."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import add_copy_mode_args, command, copy_mode, load_flow, print_report


def _args(p: argparse.ArgumentParser) -> None:
    from mirrorflow.ops.inputs import BACKFILL
    from mirrorflow.params import add_flags

    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    add_flags(p, BACKFILL)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_copy_mode_args(p)


@command(
    "backfill",
    "copy a historical source range the flow has not copied yet (records land after newer ones on the target)",
    _args,
)
def _backfill(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from mirrorflow.cli.progress import records_bar
    from mirrorflow.ops.backfill import backfill
    from mirrorflow.ops.inputs import BACKFILL, backfill_inputs
    from mirrorflow.params import from_args

    values = from_args(args, BACKFILL)
    _, _, opts = backfill_inputs(values)  # bad values: one clear error before the config is read
    cfg, flow = load_flow(args)
    mode = copy_mode(args, cfg)
    # a bar of the planned records (rate, ETA) on a terminal; quiet with --json or without a TTY
    with records_bar(args, cfg, flow) as (log, on_plan):
        options = replace(opts, on_plan=on_plan)
        rep = backfill(cfg, flow, values["from"], values["to"], mode, args.master, options=options, log=log)
    print_report(rep, args.json)
    return 0 if rep.ok else 1
