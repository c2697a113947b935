"""The harness's server processes: free ports on loopback, whether a process lives, a bounded stop.

Every server of the harness (brokers, Spark, PostgreSQL, MirrorMaker 2) is a child the harness
started, found again through the pid a state file recorded, so `dev down` works from a later process.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

STOP_TIMEOUT_S = 30.0
PORT_TRIES = 3
# a drawn port, reserved for every process of this user (`reserve`): a file per port, for this long
RESERVATIONS = Path(tempfile.gettempdir()) / f"mirrorflow-ports-{os.getuid()}"
RESERVED_S = 600.0
T = TypeVar("T")


def alive(pid: int | None, marker: str | None = None) -> bool:
    """Whether `pid` runs (a zombie counts as gone). With `marker`: and is still the process the caller
    recorded, one of its command line's arguments being `marker` (a broker's server.properties). pids wrap at 32768
    here and a full run spawns tens of thousands of processes: a recorded pid of a server that died by
    other means may name another worker's broker by the time someone stops it."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return marker is None
    try:  # a zombie child of this process counts as gone
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(") ", 1)[1].split()[0] == "Z":
                return False
    except OSError:
        return False
    return marker is None or marker.encode() in _argv(pid)


def _argv(pid: int | None) -> list[bytes]:
    """The process's command line, an element per argument (a port's setting must not match a longer port)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def reap(pid: int) -> None:
    """Collect a child's exit status (no zombie left); nothing for a process that is not our child."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def hold(port: int, timeout: float) -> socket.socket | None:
    """A socket bound to `port` (not listening: connecting is refused, as to the stopped server) once
    the port is free, within `timeout`; None while it is still taken. Held while a server is down
    for a restart, so that no other process is handed the port meanwhile: a broker restart test of a
    full run (2026-12-01) found its port taken after a 20 s outage and could not start it again."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return s
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)


def server_ports() -> tuple[int, int]:
    """Where the harness's servers listen: below the kernel's ephemeral range, which it draws both the
    local ports of outgoing connections and every bind to port 0 from. A server's port taken from that
    range was anyone's while the server was stopped: a full run (2026-12-01) found a restarting broker's
    controller port and a `dev up`'s recorded port taken ("port ... is still in use")."""
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    if low - 10000 >= 2000:
        return 10000, low - 1
    if 65535 - high >= 2000:
        return high + 1, 65535
    return low, high  # no room outside it: inside, as the kernel hands out ports


def free_port(taken: set[int] | None = None) -> int:
    """A port free on loopback now (`server_ports`), not in `taken`, which it joins: two servers of one
    broker whose listeners got the same port failed its storage format ("Each listener must have a
    different port") in a full run. Nor one another process drew in the last RESERVED_S (`reserve`)."""
    low, high = server_ports()
    while True:
        port = random.randint(low, high)
        if taken is not None and port in taken:
            continue
        with socket.socket() as s:
            try:  # without SO_REUSEADDR (not port_free): a port `hold` keeps for a stopped server is refused
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if not reserve(port):
            continue
        if taken is not None:
            taken.add(port)
        return port


def reserve(port: int) -> bool:
    """Whether `port` is this caller's: no process of this user drew it in the last RESERVED_S. A server
    binds its port up to a minute after the draw (Airflow's api-server after `db migrate`, a JVM
    starting), and a sibling test worker drawing meanwhile would find it free: the reservation (a file
    made with O_EXCL, its age the draw's) covers that window. After it the port is bound (the OS
    refuses it to others), held (`hold`) or free again."""
    RESERVATIONS.mkdir(exist_ok=True)
    path = RESERVATIONS / str(port)
    for _ in range(2):
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return True
        except FileExistsError:
            try:
                if time.time() - path.stat().st_mtime < RESERVED_S:
                    return False
                path.unlink()  # an old draw's: its server bound the port long ago or never will
            except FileNotFoundError:
                pass
    return False


def on_a_free_port(start: Callable[[int], T], taken: str, first: int | None = None) -> T:
    """`start(port)` on a free port (`first`, a server's usual port, tried first). A server binds its port
    seconds after the port was found free (a JVM starting, initdb first), and another process (a broker of a
    sibling test worker, an outgoing connection given that port) may take it meanwhile: when the error
    `start` raises names `taken` (the server's bind failure), a new port is tried, PORT_TRIES times in all."""
    for attempt in range(1, PORT_TRIES + 1):
        try:
            return start(first if attempt == 1 and first else free_port())
        except Exception as exc:
            if taken not in str(exc) or attempt == PORT_TRIES:
                raise
    raise AssertionError("unreachable")


def stop(
    pid: int | None,
    sig: int = signal.SIGTERM,
    group: bool = False,
    timeout: float = STOP_TIMEOUT_S,
    marker: str | None = None,
) -> None:
    """`sig` (the server's clean shutdown) to the process, or its process group, a bounded wait,
    then SIGKILL, and wait until it is gone. With `marker`, only while it is that process (`alive`)."""
    if not alive(pid, marker):
        return
    assert pid
    send = os.killpg if group else os.kill
    try:
        send(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        reap(pid)
        time.sleep(0.2)
    if alive(pid):
        kill(pid, group)
    reap(pid)


def kill(pid: int | None, group: bool = False, marker: str | None = None) -> None:
    """SIGKILL, as a crash would, and wait until the process is gone (with `marker`: see `stop`)."""
    if not alive(pid, marker):
        return
    assert pid
    with contextlib.suppress(ProcessLookupError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    while alive(pid):
        reap(pid)
        time.sleep(0.05)
    reap(pid)


def tail(*logs: Path, n: int = 20) -> str:
    """The last `n` lines of the first of `logs` that has any, for an error message."""
    for log in logs:
        with contextlib.suppress(OSError):
            if log.stat().st_size:
                return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    return "(no output)"
