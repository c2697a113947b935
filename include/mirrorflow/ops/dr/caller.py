"""Who asks for an approved operation, and through which door: one value the protocol hands down.

A failover, a failback and their client-switch steps record who approved them and through which door
(`state.history`), check that the plan committed is the one that person saw, and say what they would do
in a dry run. These four travel together from the CLI or a DAG task through the preflight, the commit
and every step; one value keeps them together instead of four parameters at each stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Caller:
    via: str = "cli"  # the door: cli | airflow | status-page (state.history)
    by: str | None = None  # who approved (None: this process's user, state.lease.whoami)
    plan_id: str | None = None  # the plan they saw (None: the one the preflight finds)
    dry_run: bool = False  # say what would be done; change nothing
    log: Callable[[str], None] = _quiet  # progress lines (the terminal, the task's log)


CLI = Caller()  # the default: this process's user at the terminal, whatever plan the preflight finds, for real
