"""`mirrorflow drill --flow A->B [--groups REGEX] [--verify-from WHEN] [--shadow-suffix S] [--json]`:
rehearse the failover with nothing moved (mirrorflow.ops.dr.drill), its client-switch steps as a dry run.
Exit 1 when the drill found a problem (a plan that could not be committed, a verify mismatch, a client-switch
step that failed its dry run)."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_flow, print_report


def _args(p: argparse.ArgumentParser) -> None:
    from mirrorflow.ops.dr.inputs import DRILL
    from mirrorflow.params import add_flags

    p.add_argument("--flow", required=True, help="the flow whose failover to rehearse, e.g. A->B (it keeps running)")
    add_flags(p, DRILL)
    p.add_argument("--json", action="store_true", help="print the report as JSON")


@command("drill", "rehearse a flow's failover: plan, RPO, bounded verify, RTO; nothing moved (DR drill)", _args)
def _drill(args: argparse.Namespace) -> int:
    from mirrorflow.cli.progress import spinner
    from mirrorflow.ops.dr.drill import drill
    from mirrorflow.ops.dr.inputs import DRILL
    from mirrorflow.params import from_args

    cfg, flow = load_flow(args)
    with spinner(args, f"drill of {flow.name}") as log:
        rep = drill(cfg, flow, **from_args(args, DRILL), log=log)
    print_report(rep, args.json)
    return 0 if rep.ok else 1
