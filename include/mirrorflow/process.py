"""Child processes that end with the process that started them.

A child in a session of its own is out of reach of a signal to its parent's process group, and
nothing stops it when its parent is SIGKILLed (an Airflow worker's OOM kill, `kill -9` of the CLI):
an orphaned spark-submit would go on copying and renewing the flow's lease. PR_SET_PDEATHSIG asks
Linux to send the child a signal when the thread that started it exits; it survives exec, so it
reaches the JVM that spark-submit's scripts exec into.
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
# looked up here, not in the child: dlopen between fork and exec of a threaded process can deadlock.
# Linux only: elsewhere (a developer's macOS) the child only gets a session of its own.
_PRCTL = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)


def die_with_parent() -> None:
    """preexec_fn: a session of its own (a signal to the parent's group does not reach it), and
    SIGTERM when the starting thread exits. Only for children waited for by the thread that
    starts them: a helper thread that ends early would take its child with it."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)
    os.setsid()
