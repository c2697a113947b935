"""The `mirrorflow` command line: a thin shell over the core package.

Every command takes `--config PATH` (default: $MIRRORFLOW_CONFIG, else
include/config/mirrorflow.yaml). A MirrorflowError becomes one message on stderr and a non-zero
exit; anything else is a bug and keeps its traceback. One module per command group registers its
commands (`registry.command`); results are rendered by the renderers of the core, which the DAG
tasks use too.

May import: everything in `mirrorflow`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from mirrorflow.cli.registry import COMMANDS
from mirrorflow.errors import MirrorflowError

COMMAND_MODULES = (
    "dev",
    "config",
    "flow",
    "failover",
    "failback",
    "drill",
    "acls",
    "sync",
    "replicate",
    "reseed",
    "takeover",
    "backfill",
    "groups",
    "status",
    "history",
    "verify",
    "demo",
)


def build_parser() -> argparse.ArgumentParser:
    for mod in COMMAND_MODULES:
        importlib.import_module(f"mirrorflow.cli.{mod}")
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except MirrorflowError as exc:
        print(f"mirrorflow: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
