"""`mirrorflow status [--flow A->B] [--json]`: each flow's progress and lag, from the target."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_config, print_json


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", help="one flow (default: all)")
    p.add_argument("--json", action="store_true")


@command("status", "progress and lag of each flow, read from the target clusters", _args)
def status_cmd(args: argparse.Namespace) -> int:
    from mirrorflow.observe import status

    cfg = load_config(args)
    flows = [cfg.flow(args.flow)] if args.flow else list(cfg.flows.values())
    statuses = [status.flow_status(cfg, f) for f in flows]
    if args.json:
        print_json([s.to_dict() for s in statuses])
    else:
        print(status.render_text(statuses) or "no flows configured")
    return 1 if any(s.error for s in statuses) else 0
