"""A local Spark Connect server for development and tests (`mirrorflow dev spark up|down|status`).

Started from the PySpark distribution in the venv (`spark-submit --class ...SparkConnectServer`,
the spark-connect jar PySpark ships), bound to 127.0.0.1 only, with the venv's Python for its
executors (they import mirrorflow's dependencies: confluent-kafka, pyarrow). Its log and
`state.json` live under `<dev home>/spark`, so `status` and `down` work from any later process.
Point a config at it with `spark.remote: sc://127.0.0.1:PORT`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mirrorflow.config import project_dir
from mirrorflow.dev.cluster import _alive, _die_with_parent, _port_free, _reap, free_port
from mirrorflow.errors import DevClusterError

CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
DEFAULT_PORT = 15002  # Spark Connect's own default


@dataclass
class DevSpark:
    port: int
    master: str
    pid: int | None = None
    log: str = ""

    @property
    def remote(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def status(self) -> dict:
        return {**asdict(self), "remote": self.remote, "running": _alive(self.pid)}


def venv_env() -> dict[str, str]:
    """The server runs from this venv: its bin first on PATH, executors on its python."""
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def server_command(port: int, master: str, extra_conf: dict[str, str] | None = None) -> list[str]:
    """spark-submit of the Connect server: gRPC, driver and block manager on loopback, no UI."""
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.speculation": "false",
        "spark.python.worker.reuse": "true",
        # sessions of idle flows stay (their Python workers too) for a day, not an hour
        "spark.connect.session.manager.defaultSessionTimeout": "24h",
        **(extra_conf or {}),
    }
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", master, "--class", CONNECT_CLASS]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    return [*cmd, "--name", "mirrorflow-connect", "spark-internal"]


class DevSparkServer:
    """The one local Spark Connect server under a dev home folder."""

    def __init__(self, home: Path | str | None = None):
        base = Path(home or os.environ.get("MIRRORFLOW_DEV_HOME") or project_dir() / ".mirrorflow" / "dev")
        self.home = base / "spark"
        self.state_file = self.home / "state.json"

    def current(self) -> DevSpark | None:
        if not self.state_file.exists():
            return None
        return DevSpark(**json.loads(self.state_file.read_text()))

    def status(self) -> dict | None:
        s = self.current()
        return s.status() if s else None

    def up(
        self,
        port: int | None = None,
        master: str = "local[*]",
        conf: dict[str, str] | None = None,
        attached: bool = False,
    ) -> DevSpark:
        """Start the server (or return the running one). attached=True: it dies with this process."""
        cur = self.current()
        if cur and _alive(cur.pid):
            return cur
        port = port or (DEFAULT_PORT if _port_free(DEFAULT_PORT) else free_port())
        if not _port_free(port):
            raise DevClusterError(f"port {port} for the Spark Connect server is already in use on 127.0.0.1")
        self.home.mkdir(parents=True, exist_ok=True)
        log = self.home / "connect.log"
        s = DevSpark(port, master, log=str(log))
        with log.open("w") as out:
            proc = subprocess.Popen(
                server_command(port, master, conf),
                cwd=self.home,
                env=venv_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if attached else os.setsid,
                close_fds=True,
            )
        s.pid = proc.pid
        self.state_file.write_text(json.dumps(asdict(s)))
        try:
            self._wait_ready(s, proc, log)
        except BaseException:
            self._stop(s)
            raise
        return s

    def _wait_ready(self, s: DevSpark, proc: subprocess.Popen, log: Path) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DevClusterError(f"the Spark Connect server exited with {proc.returncode}:\n{_tail(log)}")
            if "Spark Connect server started" in log.read_text(errors="replace"):
                try:
                    with socket.create_connection(("127.0.0.1", s.port), timeout=1):
                        return
                except OSError:
                    pass
            time.sleep(0.3)
        raise DevClusterError(
            f"the Spark Connect server did not start on port {s.port} in {READY_TIMEOUT_S:.0f} s:\n{_tail(log)}"
        )

    def down(self) -> bool:
        """Stop the server; False when none was running."""
        s = self.current()
        if s is None:
            return False
        was = _alive(s.pid)
        self._stop(s)
        return was

    def _stop(self, s: DevSpark) -> None:
        if s.pid and _alive(s.pid):
            try:
                os.killpg(s.pid, signal.SIGTERM)  # the server, its Python daemon and workers
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while _alive(s.pid) and time.monotonic() < deadline:
                _reap(s.pid)
                time.sleep(0.2)
            if _alive(s.pid):
                try:
                    os.killpg(s.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _reap(s.pid)
        self.state_file.unlink(missing_ok=True)


def _tail(log: Path, n: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"
