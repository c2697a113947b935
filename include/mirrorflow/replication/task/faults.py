"""Crash points of the copy: the seam through which tests kill a copy at a named step.

The copier calls `faults.reached(point, n)` at the steps below, at most once per batch (never per
record), with `n` = the number of records in the batch. Production code passes `NO_FAULTS`, which
does nothing. Tests drive the CLI and Spark subprocesses, so the crash is described by the
environment and read ONCE where a copy task starts (`from_env()`, in `runner.copy_direct` and the
Spark task), never on the copy path:

    MIRRORFLOW_TEST_CRASH="<point>[:<n>]"   SIGKILL this process the first time the copy reaches
                                            <point> with a batch of at least <n> records (any
                                            batch when ":<n>" is left out)
    MIRRORFLOW_TEST_CRASH_ONCE=<file>       crash only if <file> does not exist yet (and create
                                            it first), so the rerun passes
    MIRRORFLOW_TEST_HANG="<point>[:<n>]"    instead of a SIGKILL, stop there (sleep until killed):
                                            the copy is caught mid-run for a test to kill what runs
                                            it (a Spark Connect server); the _ONCE file applies too

Points, in the order a batch reaches them: after_init (once per unit, after init_transactions),
before_flush (batches with records only), after_flush, before_commit, after_commit.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

CRASH_ENV = "MIRRORFLOW_TEST_CRASH"
CRASH_ONCE_ENV = CRASH_ENV + "_ONCE"
HANG_ENV = "MIRRORFLOW_TEST_HANG"
POINTS = ("after_init", "before_flush", "after_flush", "before_commit", "after_commit")


class Faults(Protocol):
    def reached(self, point: str, n: int = 0) -> None:
        """The copy reached `point` with a batch of `n` records."""


class NoFaults:
    """Production: nothing happens at any point."""

    def reached(self, point: str, n: int = 0) -> None:
        pass


NO_FAULTS: Faults = NoFaults()


@dataclass(frozen=True)
class CrashPoint:
    """SIGKILL of this process when the copy reaches `point` with at least `min_records` (hang: the
    copy's thread sleeps there until the process is killed)."""

    point: str
    min_records: int = 0
    once_marker: str | None = None  # crash only while this file does not exist (it is created first)
    hang: bool = False

    def triggers(self, point: str, n: int) -> bool:
        return point == self.point and n >= self.min_records

    def reached(self, point: str, n: int = 0) -> None:
        if not self.triggers(point, n):
            return
        if self.once_marker:
            if os.path.exists(self.once_marker):
                return
            open(self.once_marker, "w").close()
        while self.hang:
            time.sleep(3600)
        os.kill(os.getpid(), signal.SIGKILL)


def parse_crash_spec(spec: str, once_marker: str | None = None, hang: bool = False) -> CrashPoint:
    """`"<point>[:<n>]"` as a CrashPoint; an unknown point is a ValueError (a typo would never crash)."""
    name, _, count = spec.partition(":")
    if name not in POINTS:
        env = HANG_ENV if hang else CRASH_ENV
        raise ValueError(f"{env}={spec!r}: unknown crash point {name!r} (one of {', '.join(POINTS)})")
    return CrashPoint(name, int(count or 0), once_marker or None, hang)


def from_env(env: Mapping[str, str] | None = None) -> Faults:
    """The crash point the environment asks for, or NO_FAULTS. Read once, where a copy task starts."""
    env = os.environ if env is None else env
    if env.get(HANG_ENV):
        return parse_crash_spec(env[HANG_ENV], env.get(CRASH_ONCE_ENV), hang=True)
    spec = env.get(CRASH_ENV)
    return parse_crash_spec(spec, env.get(CRASH_ONCE_ENV)) if spec else NO_FAULTS
