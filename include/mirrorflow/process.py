"""Processes: children that end with the process that started them, and whether one is provably gone;
and a call run on a thread of its own, waited for (`background`).

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
import threading
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG = 1
# looked up here, not in the child: dlopen between fork and exec of a threaded process can deadlock.
# Linux only: elsewhere (a developer's macOS) the child only gets a session of its own.
_PRCTL = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """preexec_fn: a session of its own (a signal to the parent's group does not reach it), and
    SIGTERM (or `sig`) when the starting thread exits. Only for children waited for by the thread
    that starts them: a helper thread that ends early would take its child with it."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, sig)
    os.setsid()


# -- is a process provably gone? ---------------------------------------------------------------
# A lease held by a CLI run that was SIGKILLed (an OOM kill) would block the flow for the whole
# lease.timeout.seconds. Its process is provably gone only when we look at the same kernel and the
# same pid namespace on the same host, and the pid is free or now names a process started at
# another time (pids are reused). Anything less (another host, a container with its own pid
# namespace, no /proc) is no proof, and the lease is left to expire.


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> str:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22); '' when none."""
    stat = _read(f"/proc/{pid}/stat")
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def process_token(pid: int | None = None) -> str:
    """host|boot id|pid namespace|pid|start ticks of a process (default: this one); '' where the
    platform cannot tell (no /proc), so nothing can be proven about it later."""
    pid = os.getpid() if pid is None else pid
    boot, ns, start = _read("/proc/sys/kernel/random/boot_id"), _pid_namespace(), _start_ticks(pid)
    if not (boot and ns and start):
        return ""
    return "|".join((os.uname().nodename, boot, ns, str(pid), start))


def provably_gone(token: str) -> bool:
    """True only when `token` (process_token) names a process of this host, kernel and pid
    namespace that no longer exists; False when it may still run or nothing can be told."""
    parts = token.split("|")
    if len(parts) != 5:
        return False
    host, boot, ns, pid, start = parts
    here = process_token()
    if not here:
        return False
    my_host, my_boot, my_ns = here.split("|")[:3]
    if (host, boot, ns) != (my_host, my_boot, my_ns) or not pid.isdigit():
        return False
    return _start_ticks(int(pid)) != start  # '' (no such pid) or a newer process under a reused pid


def background(call: Callable[[], Any], name: str) -> Callable[[float | None], Any]:
    """Start `call` on a daemon thread now. The function returned waits for it -- at most `timeout`
    seconds, else TimeoutError (a thread cannot be stopped: the call may still be running) -- and
    returns what it returned, or raises what it raised."""
    done: list[Any] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            failed.append(exc)

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()

    def wait(timeout: float | None = None) -> Any:
        t.join(timeout)
        if t.is_alive():
            raise TimeoutError(f"{name} still running after {timeout:g} s")
        if failed:
            raise failed[0]
        return done[0]

    return wait
