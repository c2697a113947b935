"""`mirrorflow dev up|status|down|restart|spark|registry`: local development clusters (real Apache Kafka,
KRaft), a local Spark Connect server and local schema registries (Apicurio). Registered with the product's
CLI through the `mirrorflow.commands` entry point group (devtools/pyproject.toml): the product never imports
this package."""

from __future__ import annotations

import argparse

from mirrorflow import config as config_mod
from mirrorflow.cli.registry import command, print_json, split_list
from mirrorflow_dev.kafka_release import DEFAULT_VERSION, supported_range


def _dev_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="dev_cmd", required=True)
    up = sub.add_parser("up", help="start local Kafka clusters (real Apache Kafka, KRaft)")
    up.add_argument("--clusters", help="comma-separated aliases (default: the clusters in the config)")
    up.add_argument(
        "--kafka-version",
        default="",
        metavar="V|ALIAS=V,...",
        help=f"the Apache Kafka release to run ({supported_range()}; default {DEFAULT_VERSION}): one for "
        "every cluster (4.4.0), per alias (A=3.9.2,B=4.4.0), or both (4.4.0,A=3.9.2); jars from Maven Central, "
        "cached per release in ~/.cache/mirrorflow",
    )
    up.add_argument("--sasl", default="", help="comma-separated aliases to run with SASL/PLAIN and ACLs enforced")
    up.add_argument("--tls", default="", help="aliases with a TLS listener (server certificate only; ACLs enforced)")
    up.add_argument(
        "--mtls", default="", help="aliases with mTLS: client certificates, principal = the certificate's CN"
    )
    up.add_argument("--scram", default="", help="aliases with SASL_SSL SCRAM-SHA-512 (users made with the Admin API)")
    up.add_argument(
        "--oauth",
        default="",
        help="aliases with SASL_SSL OAUTHBEARER and the broker's UNSECURED JWS validator: DEVELOPMENT ONLY, "
        "anyone can mint a token for any principal",
    )
    st = sub.add_parser("status", help="show the local clusters")
    st.add_argument("--json", action="store_true")
    sub.add_parser("down", help="stop the local clusters")
    rs = sub.add_parser(
        "restart", help="stop one local cluster and start it again on the same ports with the same data"
    )
    rs.add_argument("alias", help="the cluster to restart")
    rs.add_argument("--hard", action="store_true", help="SIGKILL (a crash) instead of SIGTERM (a clean shutdown)")
    rs.add_argument("--down", type=float, default=0.0, metavar="SECONDS", help="stay down this long (default 0)")
    _spark_args(sub)
    _registry_args(sub)


def _registry_args(sub: argparse._SubParsersAction) -> None:
    rp = sub.add_parser(
        "registry", help="local schema registries (Apicurio Registry 3.3.3, in memory), one per cluster"
    )
    rs = rp.add_subparsers(dest="registry_cmd", required=True)
    up = rs.add_parser("up", help="start one beside each local cluster on 127.0.0.1 (fetched once from Maven Central)")
    up.add_argument("--clusters", help="comma-separated aliases (default: the clusters in the config)")
    st = rs.add_parser("status", help="show them")
    st.add_argument("--json", action="store_true")
    rs.add_parser("down", help="stop them")


def _dev_registry(args: argparse.Namespace) -> int:
    from mirrorflow_dev.registry import DevRegistries

    regs = DevRegistries()
    if args.registry_cmd == "up":
        path = config_mod.config_path(args.config)
        cfg = config_mod.load(path) if path.exists() else None
        aliases = split_list(args.clusters) or (list(cfg.clusters) if cfg else ["A", "B"])
        wanted = dev_registry_ports(cfg)
        for r in regs.up(aliases, ports=wanted).values():
            print(f"{r.alias}: schema.registry.url: {r.confluent_url}  (Apicurio {r.url})  pid {r.pid}  log {r.log}")
        return 0
    if args.registry_cmd == "status":
        status = regs.status()
        if args.json:
            print_json(status)
        elif not status:
            print("no local schema registries (start them with `mirrorflow dev registry up`)")
        else:
            for s in status.values():
                state = "running" if s["running"] else "STOPPED"
                print(f"{s['alias']}: schema.registry.url: {s['schema.registry.url']}  {state}  pid {s['pid']}")
        return 0
    stopped = regs.down()
    print("stopped: " + (", ".join(f"{a}'s registry" for a in stopped) if stopped else "nothing was running"))
    return 0


def dev_registry_ports(cfg: config_mod.Config | None) -> dict[str, int]:
    """Local registries take the port of their cluster's `schema.registry.url` when it is on this machine."""
    from urllib.parse import urlsplit

    ports: dict[str, int] = {}
    for alias, cl in cfg.clusters.items() if cfg else []:
        url = urlsplit(cl.registry.get("schema.registry.url", "").split(",")[0])
        if url.hostname in ("127.0.0.1", "localhost") and url.port:
            ports[alias] = url.port
    return ports


def _spark_args(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("spark", help="a local Spark Connect server for the `connect` copy mode (spark.remote)")
    ss = sp.add_subparsers(dest="spark_cmd", required=True)
    up = ss.add_parser("up", help="start it on 127.0.0.1 (logs under the dev home)")
    up.add_argument(
        "--port",
        type=int,
        help="gRPC port (default: the port of the config's spark.remote when it is on this machine, else 15002 "
        "when free, else a free one)",
    )
    up.add_argument("--master", default="local[*]", help="its Spark master (default local[*])")
    st = ss.add_parser("status", help="show it")
    st.add_argument("--json", action="store_true")
    ss.add_parser("down", help="stop it")


def _dev_spark(args: argparse.Namespace) -> int:
    from mirrorflow_dev.spark import DevSparkServer

    server = DevSparkServer()
    if args.spark_cmd == "up":
        path = config_mod.config_path(args.config)
        wanted = dev_spark_port(config_mod.load(path) if path.exists() else None)
        s = server.up(args.port or wanted, args.master)
        print(f"Spark Connect: {s.remote}  pid {s.pid}  log {s.log}")
        if wanted and s.port == wanted and not args.port:
            print(f"the config's spark.remote ({path}) names it: runs use it")
        else:
            print(f"use it: spark.remote: {s.remote}  (or replicate --master {s.remote})")
        return 0
    if args.spark_cmd == "status":
        status = server.status()
        if args.json:
            print_json(status or {})
        elif not status:
            print("no local Spark Connect server (start it with `mirrorflow dev spark up`)")
        else:
            state = "running" if status["running"] else "STOPPED"
            print(f"Spark Connect: {status['remote']}  {state}  pid {status['pid']}  log {status['log']}")
        return 0
    print("stopped: Spark Connect server" if server.down() else "stopped: nothing was running")
    return 0


def dev_ports(cfg: config_mod.Config | None) -> dict[str, int]:
    """Local clusters take the port their config entry names (127.0.0.1:PORT), so they match it."""
    ports: dict[str, int] = {}
    for alias, cl in cfg.clusters.items() if cfg else []:
        host, _, port = cl.bootstrap_servers.split(",")[0].rpartition(":")
        if host in ("127.0.0.1", "localhost") and port.isdigit():
            ports[alias] = int(port)
    return ports


def dev_spark_port(cfg: config_mod.Config | None) -> int | None:
    """The local Connect server takes the port of the config's spark.remote when it is on this machine."""
    from mirrorflow.replication.executors.spark_connect import remote_address

    if cfg is None or not cfg.spark.remote:
        return None
    host, port = remote_address(cfg.spark.remote)
    return port if host in ("127.0.0.1", "localhost") else None


@command("dev", "local development clusters", _dev_args)
def _dev(args: argparse.Namespace) -> int:
    from mirrorflow_dev.cluster import DevClusters, kafka_versions
    from mirrorflow_dev.dev_cluster import SECURITY_KINDS

    dev = DevClusters()
    if args.dev_cmd == "up":
        cfg = (
            config_mod.load(args.config)
            if args.clusters is None or config_mod.config_path(args.config).exists()
            else None
        )
        aliases = split_list(args.clusters) or (list(cfg.clusters) if cfg else ["A", "B"])
        clusters = dev.up(
            aliases,
            sasl=split_list(args.sasl),
            ports=dev_ports(cfg),
            tls=split_list(args.tls),
            mtls=split_list(args.mtls),
            scram=split_list(args.scram),
            oauth=split_list(args.oauth),
            kafka_versions=kafka_versions(aliases, args.kafka_version),
        )
        for c in clusters.values():
            label = SECURITY_KINDS[c.security][1]
            print(f"{c.alias}: {c.bootstrap_servers}  Kafka {c.kafka_version}{f'  ({label})' if label else ''}")
        if any(c.security != "plaintext" for c in clusters.values()):
            print("client settings (CA, certificates, password files): mirrorflow dev status --json")
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
                line = f"{s['alias']}: {s['bootstrap.servers']}  Kafka {s['kafka.version']}  {state}  pid {s['pid']}"
                if s.get("security", "plaintext") != "plaintext":
                    line += f"  {s['security']} ({s['security.protocol']})"
                    if s.get("ssl.ca.location"):
                        line += f"  CA {s['ssl.ca.location']}"
                    line += "  users: " + ", ".join(s.get("users", {})) if s.get("users") else ""
                print(line)
        return 0
    if args.dev_cmd == "spark":
        return _dev_spark(args)
    if args.dev_cmd == "registry":
        return _dev_registry(args)
    if args.dev_cmd == "restart":
        c = dev.restart(args.alias, hard=args.hard, down_s=args.down)
        how = "killed (SIGKILL)" if args.hard else "stopped (SIGTERM)"
        print(f"{c.alias}: {how} and started again on {c.bootstrap_servers}, pid {c.pid}")
        return 0
    stopped = dev.down()
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0
