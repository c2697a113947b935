"""Progress on a terminal for the long commands (replicate, sync, failover), drawn by rich.

Quiet (no bar, no spinner, nothing added to the output) with --json or when stdout or stderr is not
a terminal, so scripts, pipes and CI logs see exactly the report. Bars go to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mirrorflow.config import Config, FlowConfig


def enabled(args: argparse.Namespace) -> bool:
    return not getattr(args, "json", False) and sys.stdout.isatty() and sys.stderr.isatty()


def plain_log(args: argparse.Namespace) -> Callable[[str], None]:
    """The step log without a terminal: to stderr, nothing with --json."""
    return (lambda s: None) if getattr(args, "json", False) else (lambda s: print(s, file=sys.stderr))


@contextmanager
def spinner(args: argparse.Namespace, what: str) -> Iterator[Callable[[str], None]]:
    """A spinner naming the current step (with the elapsed time); yields the step log, whose lines
    print above it."""
    if not enabled(args):
        yield plain_log(args)
        return
    from rich.console import Console

    console = Console(stderr=True)
    with console.status(what) as status:

        def log(line: str) -> None:
            console.print(line, highlight=False, markup=False)
            status.update(f"{what}: {line[:100]}")

        yield log


@contextmanager
def records_bar(args: argparse.Namespace, cfg: Config, flow: FlowConfig) -> Iterator[tuple[Callable[[str], None], Any]]:
    """For a replication run: yields (log, on_plan). on_plan(plan) starts a bar of the planned
    offsets (records, rate, ETA) that follows the committed progress on the target."""
    if not enabled(args):
        yield plain_log(args), None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from mirrorflow.replication.run.run_progress import ProgressPoller

    console = Console(stderr=True)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    pollers: list[ProgressPoller] = []
    with Progress(*columns, console=console, transient=False) as bar:

        def log(line: str) -> None:
            bar.console.print(line, highlight=False, markup=False)

        def on_plan(plan: Any) -> None:
            total = sum(u.records for u in plan.units)
            if not total:
                return
            task = bar.add_task(f"{flow.name} records", total=total, rate="")

            def update(done: int) -> None:
                bar.update(task, completed=min(done, total))
                speed = bar.tasks[task].speed
                bar.update(task, rate=f"{speed:,.0f} rec/s" if speed else "")

            pollers.append(ProgressPoller(cfg, flow, plan.units, update).start())

        try:
            yield log, on_plan
        finally:
            for p in pollers:
                p.stop()
