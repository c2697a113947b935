"""A local PostgreSQL for Airflow's metadata database (`mirrorflow demo postgres up|down`, and the
scheduler tests through tests/postgres_support.py).

Production Airflow runs on PostgreSQL; SQLite, the demo's default, refuses a write beside a busy
scheduler ("database is locked"), which breaks backfills created while Airflow runs. This is
Debian's PostgreSQL (`scripts/bootstrap` installs it) with a data directory of its own, on
127.0.0.1 only, trusting local connections (a development database). PostgreSQL refuses to run as
root: as root, initdb and the server run as the `postgres` OS user, which owns the data directory.
`attached=True` ties the server to the starting thread (PR_SET_PDEATHSIG with SIGINT, PostgreSQL's
fast shutdown: it ends open sessions instead of waiting for them), so a killed pytest leaves none.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from mirrorflow.process import die_with_parent
from mirrorflow_dev import processes
from mirrorflow_dev.errors import DevClusterError
from mirrorflow_dev.home import dev_home
from mirrorflow_dev.processes import alive, port_free

READY_TIMEOUT_S = 120.0
DEFAULT_PORT = 55432  # not PostgreSQL's 5432: a developer's own server may hold that
SUPERUSER = "mirrorflow"
# a throw-away database: durability traded for speed; Airflow's processes hold many connections
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "32MB",
}


def bin_dir() -> Path | None:
    """The newest Debian PostgreSQL's programs (/usr/lib/postgresql/<major>/bin), None when not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


@dataclass
class DevPostgres:
    port: int
    data: str
    pid: int | None = None
    log: str = ""

    def url(self, database: str) -> str:
        """Airflow's sql_alchemy_conn for a database of this server."""
        return f"postgresql+psycopg2://{SUPERUSER}@127.0.0.1:{self.port}/{database}"


def _run_as() -> dict:
    """subprocess arguments that run a program as `postgres` when we are root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise DevClusterError(
            "running as root, PostgreSQL needs the OS user 'postgres' (Debian's package makes it)"
        ) from None
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def _reachable(home: Path, uid: int) -> None:
    """The `postgres` user must pass through every folder above its home (/root is 0700)."""
    for folder in home.resolve().parents:
        st = folder.stat()
        if not st.st_mode & stat.S_IXOTH and st.st_uid != uid:
            raise DevClusterError(
                f"PostgreSQL runs as the OS user 'postgres', which cannot reach {home}: {folder} is not "
                "searchable by others; set MIRRORFLOW_DEV_HOME to a folder it can reach (e.g. under /tmp)"
            )


class DevPostgresServer:
    """The one local PostgreSQL under a home folder (its data directory, log and state.json)."""

    def __init__(self, home: Path | str | None = None):
        self.home = dev_home(home) / "postgres"
        self.state_file = self.home / "state.json"

    def current(self) -> DevPostgres | None:
        if not self.state_file.exists():
            return None
        return DevPostgres(**json.loads(self.state_file.read_text()))

    def up(self, port: int | None = None, attached: bool = False) -> DevPostgres:
        """Start the server (or return the running one); initdb on the first start.
        `port=0`: any free port; None: DEFAULT_PORT, else any free port; either way another if it is taken before
        the server binds it (processes.on_a_free_port; the returned DevPostgres names the port). DEFAULT_PORT is
        in Linux's ephemeral range: an outgoing connection took it between the check and the bind in a full run."""
        cur = self.current()
        if cur and alive(cur.pid):
            return cur
        if port:
            return self._start(port, attached)
        # DEFAULT_PORT already taken: `_start` says "already in use" at once, and a drawn port is tried
        usual = DEFAULT_PORT if port is None else None
        return processes.on_a_free_port(lambda p: self._start(p, attached), "already in use", first=usual)

    def _start(self, port: int, attached: bool) -> DevPostgres:
        programs = bin_dir()
        if programs is None:
            raise DevClusterError("PostgreSQL is not installed (scripts/bootstrap installs Debian's 'postgresql')")
        if not port_free(port):
            raise DevClusterError(f"port {port} for PostgreSQL is already in use on 127.0.0.1")
        run_as = _run_as()
        self.home.mkdir(parents=True, exist_ok=True)
        if run_as:
            _reachable(self.home, run_as["user"])
            os.chown(self.home, run_as["user"], run_as["group"])
        data, log = self.home / "data", self.home / "postgres.log"
        if not (data / "PG_VERSION").exists():
            out = subprocess.run(
                [str(programs / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync"],
                capture_output=True,
                text=True,
                cwd=self.home,
                **run_as,
            )
            if out.returncode:
                raise DevClusterError(f"initdb {data} failed: {(out.stderr or out.stdout)[-2000:]}")
        cmd = [str(programs / "postgres"), "-D", str(data), "-p", str(port), "-k", str(self.home)]
        for k, v in SETTINGS.items():
            cmd += ["-c", f"{k}={v}"]
        # opened by us, written by the server (as root we may create it; postgres only writes the fd)
        with log.open("w") as out_f:
            proc = subprocess.Popen(
                cmd,
                cwd=self.home,
                stdout=out_f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=partial(die_with_parent, signal.SIGINT) if attached else os.setsid,
                close_fds=True,
                **run_as,
            )
        s = DevPostgres(port, str(data), proc.pid, str(log))
        self.state_file.write_text(json.dumps(asdict(s)))
        try:
            self._wait_ready(s, proc, programs)
        except BaseException:
            self._stop(s)
            raise
        return s

    def _wait_ready(self, s: DevPostgres, proc: subprocess.Popen, programs: Path) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DevClusterError(f"PostgreSQL exited with {proc.returncode}: {Path(s.log).read_text()[-2000:]}")
            ready = subprocess.run([str(programs / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(s.port)])
            if ready.returncode == 0:
                return
            time.sleep(0.5)
        raise DevClusterError(f"PostgreSQL did not start on port {s.port} in {READY_TIMEOUT_S:.0f} s")

    def create_database(self, name: str, fresh: bool = True) -> str:
        """A database of the running server (`fresh`: dropped first if it exists, else kept as it is);
        its Airflow sql_alchemy_conn."""
        s = self.current()
        programs = bin_dir()
        if s is None or not alive(s.pid) or programs is None:
            raise DevClusterError("PostgreSQL is not running (mirrorflow demo postgres up)")
        args = ["-h", "127.0.0.1", "-p", str(s.port), "-U", SUPERUSER]
        if fresh:
            out = subprocess.run([str(programs / "dropdb"), *args, "--if-exists", name], capture_output=True, text=True)
            if out.returncode:
                raise DevClusterError(f"dropdb {name} failed: {out.stderr[-2000:]}")
        out = subprocess.run([str(programs / "createdb"), *args, name], capture_output=True, text=True)
        if out.returncode and (fresh or "already exists" not in out.stderr):
            raise DevClusterError(f"createdb {name} failed: {out.stderr[-2000:]}")
        return s.url(name)

    def down(self, remove: bool = False) -> bool:
        """Stop the server (fast shutdown); `remove` deletes its data too. False when none was running."""
        s = self.current()
        was = bool(s and alive(s.pid))
        if s:
            self._stop(s)
        if remove:
            shutil.rmtree(self.home, ignore_errors=True)
        return was

    def _stop(self, s: DevPostgres) -> None:
        processes.stop(s.pid, signal.SIGINT)  # PostgreSQL's fast shutdown: open sessions end
        self.state_file.unlink(missing_ok=True)
