"""A local Spark Connect server (`mirrorflow dev spark up|down|status`) and a Spark standalone cluster
for development and tests.

The Connect server is the product's own (`mirrorflow.replication.executors.connect_server`: the settings the
copies need), started on 127.0.0.1 only from the venv's PySpark; its log and `state.json` live under
`<dev home>/spark`, so `status` and `down` work from any later process. Point a config at it with
`spark.remote: sc://127.0.0.1:PORT`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mirrorflow.process import die_with_parent
from mirrorflow.replication.executors.connect_server import DEFAULT_PORT, server_command, server_env, spark_bin
from mirrorflow_dev import processes
from mirrorflow_dev.errors import DevClusterError
from mirrorflow_dev.home import dev_home
from mirrorflow_dev.processes import alive, free_port, port_free

READY_TIMEOUT_S = 300.0  # a loaded 2-core machine took over 120 s


@dataclass
class DevSpark:
    port: int
    master: str
    pid: int | None = None
    log: str = ""

    @property
    def remote(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def marker(self) -> str:
        """What the server's command line holds: its pid is signalled only while it does (processes.alive;
        a test that killed the server left its pid to be reused, and `down` then stopped that group)."""
        return f"spark.connect.grpc.binding.port={self.port}"

    def status(self) -> dict:
        return {**asdict(self), "remote": self.remote, "running": alive(self.pid, self.marker)}


class DevSparkServer:
    """The one local Spark Connect server under a dev home folder."""

    def __init__(self, home: Path | str | None = None):
        self.home = dev_home(home) / "spark"
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
        """Start the server (or return the running one). attached=True: it dies with this process.
        `port=0`: any free port, another if it is taken before the JVM binds it 10-20 s later
        (processes.on_a_free_port; the returned DevSpark names the port)."""
        cur = self.current()
        if cur and alive(cur.pid, cur.marker):
            return cur
        if port == 0:
            return processes.on_a_free_port(lambda p: self._start(p, master, conf, attached), "BindException")
        port = port or (DEFAULT_PORT if port_free(DEFAULT_PORT) else free_port())
        return self._start(port, master, conf, attached)

    def _start(self, port: int, master: str, conf: dict[str, str] | None, attached: bool) -> DevSpark:
        if not port_free(port):
            raise DevClusterError(f"port {port} for the Spark Connect server is already in use on 127.0.0.1")
        self.home.mkdir(parents=True, exist_ok=True)
        log = self.home / "connect.log"
        s = DevSpark(port, master, log=str(log))
        with log.open("w") as out:
            proc = subprocess.Popen(
                server_command(port, master, conf),
                cwd=self.home,
                env=server_env(),
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
                text = log.read_text(errors="replace")
                bind = next((line for line in text.splitlines() if "BindException" in line), "")
                raise DevClusterError(
                    f"the Spark Connect server exited with {proc.returncode}:\n{bind or processes.tail(log)}"
                )
            if "Spark Connect server started" in log.read_text(errors="replace"):
                try:
                    with socket.create_connection(("127.0.0.1", s.port), timeout=1):
                        return
                except OSError:
                    pass
            time.sleep(0.3)
        raise DevClusterError(
            f"the Spark Connect server did not start on port {s.port} in {READY_TIMEOUT_S:.0f} s:\n"
            + processes.tail(log)
        )

    def down(self) -> bool:
        """Stop the server; False when none was running."""
        s = self.current()
        if s is None:
            return False
        was = alive(s.pid, s.marker)
        self._stop(s)
        return was

    def _stop(self, s: DevSpark) -> None:
        processes.stop(s.pid, group=True, marker=s.marker)
        self.state_file.unlink(missing_ok=True)


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
        env = {**server_env(), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(self.home)}
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
                    raise DevClusterError(
                        f"the Spark workers did not register with {master}:\n{processes.tail(master_log)}"
                    )
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
                raise DevClusterError(f"the Spark master did not start:\n{processes.tail(log)}")
            time.sleep(0.3)

    @staticmethod
    def down(cluster: StandaloneCluster) -> None:
        """Stop the workers, then the master (SIGTERM to each process group, SIGKILL after a bound)."""
        for pid in reversed(cluster.pids):
            processes.stop(pid, group=True)
