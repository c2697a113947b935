"""`mirrorflow verify --flow A->B [--topics REGEX] [--from WHEN | --since-last] [--to WHEN] [--record] [--json]`:
compare source and target over the copied ranges, through the offset map; exit 1 on a mismatch."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_flow, print_report

WHEN = "earliest, latest, start (where the flow's copy began), offset:N or an ISO-8601 time with a zone"


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument("--topics", help="only SOURCE topics matching this regex (default: every topic of the flow)")
    p.add_argument("--from", dest="start", help=f"window start: {WHEN} (default: earliest)")
    p.add_argument(
        "--since-last",
        action="store_true",
        help="check each partition only from where the last verify that passed got to (its stored 'verified up "
        "to'; from the start where there is none or it no longer describes the partition), and record how far "
        "this one gets (implies --record)",
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="record on the target, per partition that matches, how far it is verified, so a later --since-last "
        "(or a planned failover) starts there",
    )
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
    from mirrorflow.ops.verify.verify import exit_code, verify_flow
    from mirrorflow.state.lease import whoami

    cfg, flow = load_flow(args)
    with FlowClients(cfg, flow) as clients:
        report = verify_flow(
            clients,
            args.topics,
            args.start,
            args.end,
            since_last=args.since_last,
            record=args.record or args.since_last,
            by=whoami(),
        )
    print_report(report, args.json)
    return exit_code(report)
