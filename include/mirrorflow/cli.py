"""The `mirrorflow` command line: a thin shell over the core package.

Every command takes `--config PATH` (default: $MIRRORFLOW_CONFIG, else
include/config/mirrorflow.yaml). A MirrorflowError becomes one message on stderr and a non-zero
exit; anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from . import config as config_mod
from .errors import MirrorflowError

Handler = Callable[[argparse.Namespace], int]
# (name, help, add_arguments, handler) for top-level commands; modules add theirs in COMMANDS below.
COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], None], Handler]] = []


def command(name: str, help: str, args: Callable[[argparse.ArgumentParser], None] = lambda p: None):
    def deco(fn: Handler) -> Handler:
        COMMANDS.append((name, help, args, fn))
        return fn
    return deco


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def load_config(args: argparse.Namespace) -> config_mod.Config:
    return config_mod.load(args.config)


# -- dev ----------------------------------------------------------------------------------------
def _dev_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="dev_cmd", required=True)
    up = sub.add_parser("up", help="start local Kafka clusters (real Apache Kafka, KRaft)")
    up.add_argument("--clusters", help="comma-separated aliases (default: the clusters in the config)")
    up.add_argument("--sasl", default="", help="comma-separated aliases to run with SASL/PLAIN and ACLs enforced")
    st = sub.add_parser("status", help="show the local clusters")
    st.add_argument("--json", action="store_true")
    sub.add_parser("down", help="stop the local clusters")


def _split(v: str | None) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def dev_ports(cfg: config_mod.Config | None) -> dict[str, int]:
    """Local clusters take the port their config entry names (127.0.0.1:PORT), so they match it."""
    ports: dict[str, int] = {}
    for alias, cl in (cfg.clusters.items() if cfg else []):
        host, _, port = cl.bootstrap_servers.split(",")[0].rpartition(":")
        if host in ("127.0.0.1", "localhost") and port.isdigit():
            ports[alias] = int(port)
    return ports


@command("dev", "local development clusters", _dev_args)
def _dev(args: argparse.Namespace) -> int:
    from .dev.cluster import DevClusters

    dev = DevClusters()
    if args.dev_cmd == "up":
        cfg = config_mod.load(args.config) if args.clusters is None or config_mod.config_path(args.config).exists() else None
        aliases = _split(args.clusters) or (list(cfg.clusters) if cfg else ["A", "B"])
        clusters = dev.up(aliases, sasl=_split(args.sasl), ports=dev_ports(cfg))
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
    stopped = dev.down()
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


# -- config -------------------------------------------------------------------------------------
def _config_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="config_cmd", required=True)
    sub.add_parser("validate", help="check the config file and report every problem with its key")
    imp = sub.add_parser("import", help="convert an mm2.properties or a Strimzi KafkaMirrorMaker2 resource")
    imp.add_argument("file")
    imp.add_argument("-o", "--output", help="write the YAML here instead of printing it")


@command("config", "validate or import configuration", _config_args)
def _config(args: argparse.Namespace) -> int:
    if args.config_cmd == "validate":
        cfg = load_config(args)
        print(f"{cfg.path}: OK ({len(cfg.clusters)} clusters, {len(cfg.flows)} flows: {', '.join(cfg.flows) or 'none'})")
        return 0
    from . import mm2_import

    text = mm2_import.import_file(args.file)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mirrorflow", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="config file (default: $MIRRORFLOW_CONFIG, else include/config/mirrorflow.yaml)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, help_, add_args, fn in COMMANDS:
        p = sub.add_parser(name, help=help_)
        p.add_argument("--config", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        add_args(p)
        p.set_defaults(func=fn)
    return parser


def main(argv: list[str] | None = None) -> int:
    _load_command_modules()
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MirrorflowError as exc:
        print(f"mirrorflow: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def _load_command_modules() -> None:
    """Commands that live beside their domain code register themselves on import."""
    import importlib

    for mod in ("mirrorflow.commands",):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


if __name__ == "__main__":
    # run as `python -m mirrorflow.cli`: commands register on the importable module, not __main__
    from mirrorflow.cli import main as _main

    sys.exit(_main())
