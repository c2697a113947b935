"""`mirrorflow verify --flow A->B [--topics REGEX] [--from WHEN | --since-last] [--to WHEN] [--record] [--json]`:
compare source and target over the copied ranges, through the offset map; exit 1 on a mismatch. The inputs
are declared once (mirrorflow.ops.verify.inputs.VERIFY), for this command and the verify DAG."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_flow, print_report


def _args(p: argparse.ArgumentParser) -> None:
    from mirrorflow.ops.verify.inputs import VERIFY
    from mirrorflow.params import add_flags

    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    add_flags(p, VERIFY)
    p.add_argument("--json", action="store_true", help="print JSON")


@command(
    "verify",
    "compare source and target record by record over the copied ranges (counts, checksums, the first "
    "difference per partition); exit 1 on a mismatch",
    _args,
)
def _verify(args: argparse.Namespace) -> int:
    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.verify.inputs import VERIFY
    from mirrorflow.ops.verify.verify import exit_code, verify_given
    from mirrorflow.params import from_args
    from mirrorflow.state.lease import whoami

    cfg, flow = load_flow(args)
    with FlowClients(cfg, flow) as clients:
        report = verify_given(clients, from_args(args, VERIFY), by=whoami())
    print_report(report, args.json)
    return exit_code(report)
