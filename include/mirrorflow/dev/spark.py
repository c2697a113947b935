"""A local Spark Connect server for development and tests (`mirrorflow dev spark up|down|status`).

Started from the PySpark distribution in the venv (`spark-submit --class ...SparkConnectServer`,
the spark-connect jar PySpark ships), bound to 127.0.0.1 only, with the venv's Python for its
executors (they import mirrorflow's dependencies: confluent-kafka, pyarrow). Its log and
`state.json` live under `<dev home>/spark`, so `status` and `down` work from any later process.
Point a config at it with `spark.remote: sc://127.0.0.1:PORT`.

`python -m mirrorflow.dev.spark serve --master M --bind ADDR --port P --driver-host H` runs the same
server in the foreground (docker-compose's spark-connect service), with the same settings.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mirrorflow.config import project_dir
from mirrorflow.dev.cluster import _alive, _port_free, _reap, free_port
from mirrorflow.errors import DevClusterError
from mirrorflow.process import die_with_parent

CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
READY_TIMEOUT_S = 300.0  # a loaded 2-core machine took over 120 s
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


def spark_bin(name: str) -> str:
    """A Spark script of this Python's PySpark (the venv's bin; pip's user bin, on PATH, in the image)."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else shutil.which(name) or str(local)


def server_command(
    port: int,
    master: str,
    extra_conf: dict[str, str] | None = None,
    bind: str = "127.0.0.1",
    driver_host: str = "127.0.0.1",
) -> list[str]:
    """spark-submit of the Connect server: gRPC, driver and block manager on `bind` (loopback unless
    told: a server is reachable from where it is bound), no UI."""
    conf = {
        "spark.connect.grpc.binding.address": bind,
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": driver_host,
        "spark.driver.bindAddress": bind,
        "spark.ui.enabled": "false",
        "spark.speculation": "false",
        "spark.python.worker.reuse": "true",
        # sessions of idle flows stay (their Python workers too) for a day, not an hour
        "spark.connect.session.manager.defaultSessionTimeout": "24h",
        **(extra_conf or {}),
    }
    cmd = [spark_bin("spark-submit"), "--master", master, "--class", CONNECT_CLASS]
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
                preexec_fn=die_with_parent if attached else os.setsid,
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
        stop_group(s.pid)
        self.state_file.unlink(missing_ok=True)


def stop_group(pid: int | None) -> None:
    """SIGTERM a server's process group (the JVM, its Python daemon and workers); SIGKILL after a bound."""
    if not pid or not _alive(pid):
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _alive(pid) and time.monotonic() < deadline:
        _reap(pid)
        time.sleep(0.2)
    if _alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap(pid)


def _tail(log: Path, n: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass
class StandaloneCluster:
    """A Spark standalone master and its workers on loopback (pids, for stopping them)."""

    port: int
    pids: list[int]
    home: str

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.port}"


class DevStandalone:
    """A real Spark standalone cluster (a master and N workers) from the venv's PySpark classes, on
    127.0.0.1: what a copy job meets beyond one machine (executors in other JVMs, the package as
    --py-files), for tests. Each process is in its own group and dies with this process when attached."""

    def __init__(self, home: Path | str):
        self.home = Path(home) / "standalone"

    def up(self, workers: int = 2, cores: int = 1, memory: str = "1g", attached: bool = True) -> StandaloneCluster:
        self.home.mkdir(parents=True, exist_ok=True)
        spark_class = spark_bin("spark-class")
        env = {**venv_env(), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(self.home)}
        port = free_port()
        master = f"spark://127.0.0.1:{port}"
        cmds = {
            "master": [
                spark_class,
                MASTER_CLASS,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ]
        }
        for i in range(workers):
            work = self.home / f"worker-{i}"
            work.mkdir(exist_ok=True)
            cmds[f"worker-{i}"] = [
                spark_class,
                WORKER_CLASS,
                master,
                "--host",
                "127.0.0.1",
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--work-dir",
                str(work),
                "--webui-port",
                str(free_port()),
            ]
        cluster = StandaloneCluster(port, [], str(self.home))
        try:
            for name, cmd in cmds.items():
                log = self.home / f"{name}.log"
                with log.open("w") as out:
                    proc = subprocess.Popen(
                        cmd,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        cwd=self.home,
                        close_fds=True,
                        preexec_fn=die_with_parent if attached else os.setsid,
                    )
                cluster.pids.append(proc.pid)
                if name == "master":
                    self._wait_for(log, f"Starting Spark master at {master}", proc)
            master_log = self.home / "master.log"
            deadline = time.monotonic() + READY_TIMEOUT_S
            while master_log.read_text(errors="replace").count("Registering worker") < workers:
                if time.monotonic() > deadline:
                    raise DevClusterError(f"the Spark workers did not register with {master}:\n{_tail(master_log)}")
                time.sleep(0.3)
        except BaseException:
            self.down(cluster)
            raise
        return cluster

    @staticmethod
    def _wait_for(log: Path, line: str, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while line not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise DevClusterError(f"the Spark master did not start:\n{_tail(log)}")
            time.sleep(0.3)

    @staticmethod
    def down(cluster: StandaloneCluster) -> None:
        """Stop the workers, then the master (SIGTERM to each process group, SIGKILL after a bound)."""
        for pid in reversed(cluster.pids):
            stop_group(pid)


def serve_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m mirrorflow.dev.spark", description="run a Spark Connect server")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sv = sub.add_parser("serve", help="in the foreground (a container's main process)")
    sv.add_argument("--master", default="local[*]")
    sv.add_argument("--port", type=int, default=DEFAULT_PORT)
    sv.add_argument("--bind", default="127.0.0.1", help="the address gRPC and the driver listen on")
    sv.add_argument("--driver-host", default="127.0.0.1", help="the name executors reach the driver by")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    a = serve_args(argv)
    cmd = server_command(a.port, a.master, bind=a.bind, driver_host=a.driver_host)
    os.execvpe(cmd[0], cmd, venv_env())


if __name__ == "__main__":
    main()
