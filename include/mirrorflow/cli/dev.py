"""`mirrorflow dev up|status|down|restart`: local development clusters (real Apache Kafka, KRaft)."""

from __future__ import annotations

import argparse

from mirrorflow import config as config_mod
from mirrorflow.cli.registry import command, print_json, split_list


def _dev_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="dev_cmd", required=True)
    up = sub.add_parser("up", help="start local Kafka clusters (real Apache Kafka, KRaft)")
    up.add_argument("--clusters", help="comma-separated aliases (default: the clusters in the config)")
    up.add_argument("--sasl", default="", help="comma-separated aliases to run with SASL/PLAIN and ACLs enforced")
    st = sub.add_parser("status", help="show the local clusters")
    st.add_argument("--json", action="store_true")
    sub.add_parser("down", help="stop the local clusters")
    rs = sub.add_parser(
        "restart", help="stop one local cluster and start it again on the same ports with the same data"
    )
    rs.add_argument("alias", help="the cluster to restart")
    rs.add_argument("--hard", action="store_true", help="SIGKILL (a crash) instead of SIGTERM (a clean shutdown)")
    rs.add_argument("--down", type=float, default=0.0, metavar="SECONDS", help="stay down this long (default 0)")


def dev_ports(cfg: config_mod.Config | None) -> dict[str, int]:
    """Local clusters take the port their config entry names (127.0.0.1:PORT), so they match it."""
    ports: dict[str, int] = {}
    for alias, cl in cfg.clusters.items() if cfg else []:
        host, _, port = cl.bootstrap_servers.split(",")[0].rpartition(":")
        if host in ("127.0.0.1", "localhost") and port.isdigit():
            ports[alias] = int(port)
    return ports


@command("dev", "local development clusters", _dev_args)
def _dev(args: argparse.Namespace) -> int:
    from mirrorflow.dev.cluster import DevClusters

    dev = DevClusters()
    if args.dev_cmd == "up":
        cfg = (
            config_mod.load(args.config)
            if args.clusters is None or config_mod.config_path(args.config).exists()
            else None
        )
        aliases = split_list(args.clusters) or (list(cfg.clusters) if cfg else ["A", "B"])
        clusters = dev.up(aliases, sasl=split_list(args.sasl), ports=dev_ports(cfg))
        for c in clusters.values():
            print(f"{c.alias}: {c.bootstrap_servers}{'  (SASL/PLAIN, ACLs enforced)' if c.sasl else ''}")
        return 0
    if args.dev_cmd == "status":
        status = dev.status()
        if args.json:
            print_json(status)
        elif not status:
            print("no local clusters (start them with `mirrorflow dev up`)")
        else:
            for s in status.values():
                state = "running" if s["running"] else "STOPPED"
                line = f"{s['alias']}: {s['bootstrap.servers']}  {state}  pid {s['pid']}"
                if s["sasl"]:
                    line += "  SASL/PLAIN users: " + ", ".join(f"{u}/{p}" for u, p in s["users"].items())
                print(line)
        return 0
    if args.dev_cmd == "restart":
        c = dev.restart(args.alias, hard=args.hard, down_s=args.down)
        how = "killed (SIGKILL)" if args.hard else "stopped (SIGTERM)"
        print(f"{c.alias}: {how} and started again on {c.bootstrap_servers}, pid {c.pid}")
        return 0
    stopped = dev.down()
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0
