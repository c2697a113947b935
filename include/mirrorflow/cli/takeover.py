"""`mirrorflow takeover --flow A->B [--mm2-offsets-topic T] [--mm2-connector NAME] [--mm2-source ALIAS]
[--mm2-quiet-seconds S] [--dry-run] [--yes] [--json]`: continue a flow exactly where a stopped MirrorMaker 2
left it, whether MM2 ran in dedicated mode, on a Kafka Connect cluster or under Strimzi."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import add_write_args, command, load_flow, print_report, say_nothing_written, writes


def _args(p: argparse.ArgumentParser) -> None:
    from mirrorflow.ops.takeover.inputs import TAKEOVER
    from mirrorflow.params import add_flags

    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    add_flags(p, TAKEOVER)
    add_write_args(p)


@command(
    "takeover",
    "continue a flow exactly where a stopped MirrorMaker 2 deployment left it (no record copied twice)",
    _args,
)
def _takeover(args: argparse.Namespace) -> int:
    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.takeover.from_mm2 import takeover_given
    from mirrorflow.ops.takeover.inputs import TAKEOVER
    from mirrorflow.params import from_args

    cfg, flow = load_flow(args)
    with FlowClients(cfg, flow) as clients:
        rep = takeover_given(clients, from_args(args, TAKEOVER), dry_run=not writes(args))
    print_report(rep, args.json)
    say_nothing_written(args, "take over")
    return 0
