"""`mirrorflow reseed --flow A->B --topic T [--dry-run] [--yes] [--force] [--json]`: restart a stopped topic."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import add_write_args, command, load_flow, print_json, say_nothing_written, writes
from mirrorflow.errors import ConfigError


def _args(p: argparse.ArgumentParser) -> None:
    from mirrorflow.ops.inputs import RESEED
    from mirrorflow.params import add_flags

    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    add_flags(p, RESEED)
    add_write_args(p)


@command(
    "reseed",
    "restart a topic whose state no longer describes it (recreated, truncated, renamed): copy it "
    "again from the source's start under a new offset-map epoch",
    _args,
)
def _reseed(args: argparse.Namespace) -> int:
    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.reseed import lines, reseed, to_dicts

    if args.dry_run and args.yes:
        raise ConfigError([("--yes", "writes the re-seed; --dry-run writes nothing: give one of them")])
    cfg, flow = load_flow(args)
    dry = not writes(args)
    with FlowClients(cfg, flow) as clients:
        plan = reseed(clients, args.topic, dry_run=dry, force=args.force)
    if args.json:
        print_json({"flow": flow.name, "topic": args.topic, "dry_run": dry, "partitions": to_dicts(plan)})
        return 0
    print("\n".join(lines(flow.name, args.topic, plan, dry)))
    say_nothing_written(args, "re-seed")
    return 0
