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
        print_json(report.to_json())
    else:
        print(report.render())


def load_config(args: argparse.Namespace) -> config_mod.Config:
    return config_mod.load(args.config)


def load_flow(args: argparse.Namespace) -> tuple[config_mod.Config, config_mod.FlowConfig]:
    """The config and the flow its `--flow` names (an unknown name: one error listing the flows)."""
    cfg = load_config(args)
    return cfg, cfg.flow(args.flow)


def split_list(v: str | None) -> list[str]:
    """`a, b,` -> ["a", "b"] (comma-separated option values)."""
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def add_operation_args(p: argparse.ArgumentParser, flow_help: str, dry_run_help: str) -> None:
    """The arguments every disaster-recovery operation shares: --flow, --dry-run, --yes, --json."""
    p.add_argument("--flow", required=True, help=flow_help)
    p.add_argument("--dry-run", action="store_true", help=dry_run_help)
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def add_write_args(p: argparse.ArgumentParser) -> None:
    """--dry-run, --yes and --json of a command that writes only with --yes (reseed, takeover)."""
    p.add_argument("--dry-run", action="store_true", help="say what would be written, write nothing")
    p.add_argument("--yes", action="store_true", help="write it (without --yes: like --dry-run)")
    p.add_argument("--json", action="store_true", help="print JSON")


def writes(args: argparse.Namespace) -> bool:
    """Whether a command of `add_write_args` writes: --yes and not --dry-run."""
    return bool(args.yes and not args.dry_run)


def say_nothing_written(args: argparse.Namespace, to: str) -> None:
    """The hint after a run that wrote nothing for want of --yes (not with --dry-run or --json)."""
    if not args.yes and not args.dry_run and not args.json:
        print(f"nothing written: run again with --yes to {to}")


def add_copy_mode_args(p: argparse.ArgumentParser) -> None:
    """--mode and --master: where a command that copies runs the copy (replicate, backfill)."""
    p.add_argument(
        "--mode",
        choices=["submit", "inprocess", "connect", "direct"],
        default=None,
        help="submit: spark-submit (the default without spark.remote); inprocess: a SparkSession in this "
        "process; connect: the running Spark Connect server of spark.remote (the default with it); "
        "direct: no Spark, units in threads (debugging)",
    )
    p.add_argument(
        "--master",
        help="Spark master (default: spark.master of the config, else local[*]); sc://HOST:PORT = a Spark "
        "Connect server (connect mode)",
    )


def copy_mode(args: argparse.Namespace, cfg: config_mod.Config) -> str:
    """--mode, else connect when a Spark Connect server is configured or given as --master, else submit."""
    return args.mode or ("connect" if cfg.spark.remote or (args.master or "").startswith("sc://") else "submit")


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


def gated_exit(args: argparse.Namespace, report: Any) -> int:
    """Print an approved operation's report (ops.dr.gated); its exit code: 0 when it is done (or was
    before), or a dry run; 1 otherwise, and when a client-switch step failed (the operation stands, the
    step is named)."""
    from mirrorflow.ops.dr.gated import settled

    print_report(report, args.json)
    if report.switch is not None and report.switch.error:
        print(f"mirrorflow: {report.switch.error}", file=sys.stderr)
        return 1
    return 0 if settled(report) or args.dry_run else 1
