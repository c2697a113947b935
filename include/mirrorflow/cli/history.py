"""`mirrorflow history --flow A->B [--limit N] [--json]`: the flow's operations, oldest first."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_flow, print_json


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument("--limit", type=int, default=50, help="the newest N operations (default 50)")
    p.add_argument("--json", action="store_true", help="print JSON")


@command(
    "history",
    "a flow's operations history (pause, resume, stop, failover, failback, takeover, reseed): who, when, "
    "why, read from the target",
    _args,
)
def _history(args: argparse.Namespace) -> int:
    from mirrorflow.clients import FlowClients
    from mirrorflow.state.history import read_history

    cfg, flow = load_flow(args)
    with FlowClients(cfg, flow) as clients:
        ops = read_history(clients, args.limit)
    if args.json:
        print_json([o.to_dict() for o in ops])
    elif not ops:
        print(f"flow {flow.name}: no operation recorded yet")
    else:
        for o in ops:
            print(o.line())
    return 0
