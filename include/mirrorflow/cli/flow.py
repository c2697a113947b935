"""`mirrorflow flow pause|resume|stop --flow A->B [--reason TEXT] [--force]` and `mirrorflow flow list [--json]`."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_config, print_json
from mirrorflow.errors import ConfigError


def _args(p: argparse.ArgumentParser) -> None:
    from mirrorflow.ops.control.inputs import ACTION, FORCE, REASON
    from mirrorflow.params import add_flags

    p.add_argument("action", choices=["list", *ACTION.choices], help=f"list the flows' states; {ACTION.help}")
    p.add_argument("--flow", help="the flow, e.g. A->B (pause, resume, stop)")
    add_flags(p, (REASON, FORCE))
    p.add_argument("--json", action="store_true", help="print JSON")


@command(
    "flow",
    "a flow's operating state: list; pause (no copy or topic sync, checkpoints go on), stop (nothing runs), resume",
    _args,
)
def _flow(args: argparse.Namespace) -> int:
    from mirrorflow.clients import FlowClients
    from mirrorflow.state.flow_state import flow_state
    from mirrorflow.state.lease import whoami

    if args.force and args.action != "resume":
        raise ConfigError([("--force", f"only with `mirrorflow flow resume`, not {args.action}")])
    if args.action == "list" and (args.flow or args.reason):
        flag = "--flow" if args.flow else "--reason"
        raise ConfigError([(flag, "`mirrorflow flow list` lists every flow: it takes no --flow or --reason")])
    cfg = load_config(args)
    if args.action == "list":
        rows = []
        for f in cfg.flows.values():
            with FlowClients(cfg, f) as clients:
                st = flow_state(clients)
            rows.append({"flow": f.name, "enabled": f.enabled, **st.to_dict(), "describe": st.describe()})
        if args.json:
            print_json(rows)
        else:
            for r in rows:
                print(f"{r['flow']}: {'enabled' if r['enabled'] else 'disabled'}, {r['describe']}")
        return 0
    if not args.flow:
        raise ConfigError([("--flow", f"`mirrorflow flow {args.action}` needs --flow, e.g. --flow A->B")])
    from mirrorflow.ops.control.flow_control import ACTIONS, control_flow

    flow = cfg.flow(args.flow)
    st = control_flow(cfg, flow, args.action, whoami(), "cli", args.reason or "", args.force)
    if args.json:
        print_json({"flow": flow.name, **st.to_dict()})
    else:
        print(f"flow {flow.name}: {st.describe()}")
        if st.state != ACTIONS[args.action]:
            print(f"note: the config declares state {st.state!r}, which applies over {ACTIONS[args.action]!r}")
    return 0
