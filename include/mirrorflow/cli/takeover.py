"""`mirrorflow takeover --flow A->B [--mm2-offsets-topic T] [--mm2-connector NAME] [--mm2-source ALIAS]
[--mm2-quiet-seconds S] [--dry-run] [--yes] [--json]`: continue a flow exactly where a stopped MirrorMaker 2
left it, whether MM2 ran in dedicated mode, on a Kafka Connect cluster or under Strimzi."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import add_write_args, command, load_flow, print_report, say_nothing_written, writes


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument(
        "--mm2-offsets-topic",
        "--offsets-topic",
        help="MM2's Connect offsets topic on the target: the worker's offset.storage.topic (default: dedicated "
        "mode's mm2-offsets.<source>.internal; Strimzi: mirrormaker2-cluster-offsets)",
    )
    p.add_argument(
        "--mm2-connector",
        "--connector",
        help="the MirrorSourceConnector's name in Connect (e.g. A-to-B-MirrorSourceConnector; Strimzi: "
        "A->B.MirrorSourceConnector; default: the only one with offsets for the source in the offsets topic)",
    )
    p.add_argument("--mm2-source", help="the source cluster's alias in MM2's config (default: the flow's source)")
    p.add_argument(
        "--mm2-quiet-seconds",
        type=float,
        default=30.0,
        help="MM2 counts as stopped when its heartbeat into the target is older than this (default 30)",
    )
    add_write_args(p)


@command(
    "takeover",
    "continue a flow exactly where a stopped MirrorMaker 2 deployment left it (no record copied twice)",
    _args,
)
def _takeover(args: argparse.Namespace) -> int:
    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.takeover.from_mm2 import takeover

    cfg, flow = load_flow(args)
    dry = not writes(args)
    with FlowClients(cfg, flow) as clients:
        rep = takeover(
            clients,
            args.mm2_offsets_topic,
            args.mm2_source,
            dry_run=dry,
            quiet_s=args.mm2_quiet_seconds,
            connector=args.mm2_connector,
        )
    print_report(rep, args.json)
    say_nothing_written(args, "take over")
    return 0
