"""`mirrorflow acls --flow A->B [--after-failover] [--apply] [--json]`: the ACLs the flow's principals need
(or, with --after-failover, what the applications' principals need on B after a failover)."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_flow, print_report
from mirrorflow.errors import ConfigError


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument("--apply", action="store_true", help="create the missing ACLs (needs ALTER on the clusters)")
    p.add_argument("--source-principal", help="the source principal (default: from the source cluster's settings)")
    p.add_argument("--target-principal", help="the target principal (default: from the target cluster's settings)")
    p.add_argument(
        "--source-admin", help="create/describe ACLs on the source through this cluster alias (e.g. an admin user)"
    )
    p.add_argument(
        "--target-admin", help="create/describe ACLs on the target through this cluster alias (e.g. an admin user)"
    )
    p.add_argument(
        "--after-failover",
        action="store_true",
        help="instead: the ACLs the applications' principals need on the target after a failover (consumers: READ "
        "on the topics they will read and on their groups; producers: WRITE and DESCRIBE on the topics they will "
        "write), derived from the ACLs they hold on the source (read through --source-admin), else from the topic "
        "ACLs replicated to the target; with --apply created through --target-admin",
    )
    p.add_argument("--offline", action="store_true", help="only print what is needed; do not ask the clusters")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


@command("acls", "print (or --apply) the ACLs a flow's source and target principals need", _args)
def _acls(args: argparse.Namespace) -> int:
    from mirrorflow.ops.acls.required_acls import acls_error, flow_acls

    if args.offline:  # asks no cluster: flags that need one would be ignored
        flags = (("--apply", args.apply), ("--source-admin", args.source_admin), ("--target-admin", args.target_admin))
        used = [f for f, v in flags if v]
        if used:
            raise ConfigError([("--offline", f"prints what is needed without asking the clusters: not with {used[0]}")])
        if args.after_failover:
            raise ConfigError([("--offline", "--after-failover reads the clusters' ACLs: not with --offline")])
    cfg, flow = load_flow(args)
    principals = {k: v for k, v in (("source", args.source_principal), ("target", args.target_principal)) if v}
    admins = {k: v for k, v in (("source", args.source_admin), ("target", args.target_admin)) if v}
    if args.after_failover:
        from mirrorflow.ops.acls.failover_acls import after_failover_acls

        rep = after_failover_acls(cfg, flow, args.apply, principals, admins)
    else:
        rep = flow_acls(cfg, flow, args.apply, principals, admins, check=not args.offline)
    print_report(rep, args.json)
    err = acls_error(rep)
    if err is not None:
        raise err
    return 0
