"""The command registry: each `cli/<command>.py` module registers its commands with `@command`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from mirrorflow import config as config_mod
from mirrorflow.reporting import Report

Handler = Callable[[argparse.Namespace], int]
# (name, help, add_arguments, handler) of every command, in registration order.
COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], None], Handler]] = []


def command(name: str, help: str, args: Callable[[argparse.ArgumentParser], None] = lambda p: None):
    def deco(fn: Handler) -> Handler:
        COMMANDS.append((name, help, args, fn))
        return fn

    return deco


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def print_report(report: Report, as_json: bool) -> None:
    """A report as every command prints it: its to_dict() with --json, else its text (the lines a
    DAG task logs)."""
    if as_json:
        print_json(report.to_dict())
    else:
        print(report.render())


def load_config(args: argparse.Namespace) -> config_mod.Config:
    return config_mod.load(args.config)


def split_list(v: str | None) -> list[str]:
    """`a, b,` -> ["a", "b"] (comma-separated option values)."""
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def add_operation_args(p: argparse.ArgumentParser, flow_help: str, dry_run_help: str) -> None:
    """The arguments every disaster-recovery operation shares: --flow, --dry-run, --yes, --json."""
    p.add_argument("--flow", required=True, help=flow_help)
    p.add_argument("--dry-run", action="store_true", help=dry_run_help)
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def confirmed(args: argparse.Namespace, preflight: str, question: str, answer: str) -> bool:
    """Ask the operator to type `answer` after reading the preflight; --yes answers for them.

    Without a terminal nobody can answer, so the operation is refused rather than assumed.
    """
    if args.yes:
        return True
    print(preflight, file=sys.stderr)
    if not sys.stdin.isatty():
        print("mirrorflow: not confirmed (no terminal): run again with --yes", file=sys.stderr)
        return False
    return input(question).strip() == answer
