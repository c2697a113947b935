"""The `mirrorflow` command line: a thin shell over the core package.

Every command takes `--config PATH` (default: $MIRRORFLOW_CONFIG, else
include/config/mirrorflow.yaml). A MirrorflowError becomes one message on stderr and a non-zero
exit; anything else is a bug and keeps its traceback. One module per command group registers its
commands (`registry.command`); which modules the operations have is `mirrorflow.ops.registry`'s to say.
Results are rendered by the renderers of the core, which the DAG tasks use too. Other installed
packages add command groups through the `mirrorflow.commands` entry point group (each entry names a
module that registers its commands when loaded): the development harness (devtools/, `mirrorflow
dev`, `mirrorflow demo`) does, so the product never imports it.

May import: everything in `mirrorflow`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
from importlib.metadata import entry_points
from typing import NoReturn

from mirrorflow.cli.registry import COMMANDS
from mirrorflow.errors import MirrorflowError
from mirrorflow.ops.registry import cli_modules

# the order of `mirrorflow --help`; every operation's module (ops.registry) is loaded, one not placed here last
HELP_ORDER = (
    "config",
    "flow",
    "failover",
    "failback",
    "client_switch",
    "drill",
    "acls",
    "sync",
    "schemas",
    "replicate",
    "reseed",
    "takeover",
    "backfill",
    "groups",
    "status",
    "history",
    "verify",
)
COMMAND_MODULES = (*HELP_ORDER, *(m for m in cli_modules() if m not in HELP_ORDER))
COMMAND_GROUP = "mirrorflow.commands"  # entry points of other packages' command modules


def load_plugin_commands() -> list[str]:
    """Import every module the `mirrorflow.commands` entry points name (they register their
    commands); a module that fails to load is named on stderr and left out, the rest of the CLI works."""
    problems = []
    for ep in entry_points(group=COMMAND_GROUP):
        try:
            ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the whole CLI down
            problems.append(f"mirrorflow: commands {ep.name!r} ({ep.value}) could not be loaded: {exc}")
    for line in problems:
        print(line, file=sys.stderr)
    return problems


def build_parser() -> argparse.ArgumentParser:
    for mod in COMMAND_MODULES:
        importlib.import_module(f"mirrorflow.cli.{mod}")
    load_plugin_commands()
    parser = argparse.ArgumentParser(prog="mirrorflow", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", help="config file (default: $MIRRORFLOW_CONFIG, else include/config/mirrorflow.yaml)"
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, help_, add_args, fn in COMMANDS:
        p = sub.add_parser(name, help=help_)
        p.add_argument("--config", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        add_args(p)
        p.set_defaults(func=fn)
    return parser


def run() -> NoReturn:
    """The `mirrorflow` command: `main()`, then the process ends at once. A command has done and
    flushed all it does when `main` returns (its lease released, its records acknowledged); the
    interpreter's teardown that would follow (PySpark's client, pandas, gRPC, the Kafka clients'
    handles) took 0.2-0.5 s of every run (a steady run over 2,000 partitions: median 3.44 -> 2.92 s)."""
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except MirrorflowError as exc:
        print(f"mirrorflow: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
