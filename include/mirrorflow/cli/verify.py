"""`mirrorflow verify --flow A->B [--topics REGEX] [--from WHEN] [--to WHEN] [--json]`: compare source
and target over the copied ranges, through the offset map; exit 1 on a mismatch."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_config, print_report

WHEN = "earliest, latest, start (where the flow's copy began), offset:N or an ISO-8601 time with a zone"


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument("--topics", help="only SOURCE topics matching this regex (default: every topic of the flow)")
    p.add_argument("--from", dest="start", default="earliest", help=f"window start: {WHEN} (default: earliest)")
    p.add_argument("--to", dest="end", default="latest", help=f"window end, exclusive: {WHEN} (default: latest)")
    p.add_argument("--json", action="store_true", help="print JSON")


@command(
    "verify",
    "compare source and target record by record over the copied ranges (counts, checksums, the first "
    "difference per partition); exit 1 on a mismatch",
    _args,
)
def _verify(args: argparse.Namespace) -> int:
    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.verify import exit_code, verify_flow

    cfg = load_config(args)
    flow = cfg.flow(args.flow)
    with FlowClients(cfg, flow) as clients:
        report = verify_flow(clients, args.topics, args.start, args.end)
    print_report(report, args.json)
    return exit_code(report)
