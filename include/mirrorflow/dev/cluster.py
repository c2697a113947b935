"""Local single-node Apache Kafka clusters (KRaft) for development and tests.

Each alias gets its own broker+controller JVM on 127.0.0.1 with its own ports, data and log
folders under a home folder (default `.mirrorflow/dev` in the project). A cluster can enforce
SASL/PLAIN with the StandardAuthorizer: `admin` is the super user mirrorflow connects as,
`alice` and `bob` are ordinary users for tests. `state.json` in the home folder records what runs,
so `dev status` and `dev down` work from any later process.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mirrorflow.config import project_dir
from mirrorflow.dev import kafka_dist
from mirrorflow.errors import DevClusterError
from mirrorflow.kafka.connection import ClusterConnection

TEST_USERS = ("alice", "bob")
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0

LOG4J = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
"""

JVM_PERF = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
]


@dataclass
class DevCluster:
    alias: str
    port: int
    controller_port: int
    sasl: bool = False
    users: dict[str, str] = field(default_factory=dict, repr=False)  # passwords: never in reprs/test output
    pid: int | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client_config(self, user: str = "admin") -> dict[str, str]:
        """librdkafka settings to reach this cluster (as the super user by default)."""
        conf = {"bootstrap.servers": self.bootstrap_servers}
        if self.sasl:
            conf.update(
                {
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": user,
                    "sasl.password": self.users[user],
                }
            )
        return conf

    def status(self) -> dict:
        d = {
            "alias": self.alias,
            "bootstrap.servers": self.bootstrap_servers,
            "sasl": self.sasl,
            "pid": self.pid,
            "running": _alive(self.pid),
        }
        if self.sasl:
            d["users"] = dict(self.users)
            d["super.user"] = "admin"
        return d


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of this process counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kafka_uuid() -> str:
    """A Kafka cluster id: URL-safe Base64 of a random UUID, not starting with '-'."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not s.startswith("-"):
            return s


def _die_with_parent() -> None:
    """preexec_fn: the broker gets SIGTERM when the process that started it dies (tests)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()


class DevClusters:
    """The set of local clusters that live under one home folder."""

    def __init__(self, home: Path | str | None = None):
        self.home = Path(home or os.environ.get("MIRRORFLOW_DEV_HOME") or project_dir() / ".mirrorflow" / "dev")
        self.state_file = self.home / "state.json"

    # -- state -------------------------------------------------------------------------------
    def clusters(self) -> dict[str, DevCluster]:
        if not self.state_file.exists():
            return {}
        raw = json.loads(self.state_file.read_text())
        return {alias: DevCluster(**c) for alias, c in raw.get("clusters", {}).items()}

    def _save(self, clusters: dict[str, DevCluster]) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"clusters": {a: asdict(c) for a, c in clusters.items()}}, indent=2))
        os.chmod(tmp, 0o600)  # holds the test users' passwords
        tmp.replace(self.state_file)

    def status(self) -> dict[str, dict]:
        return {alias: c.status() for alias, c in self.clusters().items()}

    # -- up ----------------------------------------------------------------------------------
    def up(
        self,
        aliases: list[str],
        sasl: list[str] | tuple[str, ...] = (),
        ports: dict[str, int] | None = None,
        attached: bool = False,
    ) -> dict[str, DevCluster]:
        """Start the named clusters (those already running are kept) and wait until they serve.

        `ports` fixes the broker port per alias (the controller takes the next one); other
        aliases get free ports. `attached=True` ties the brokers' lives to this process.
        """
        unknown_sasl = sorted(set(sasl) - set(aliases))
        if unknown_sasl:
            raise DevClusterError(
                f"--sasl names {', '.join(unknown_sasl)}, which is not in --clusters {','.join(aliases)}"
            )
        java = kafka_dist.java_binary()
        libs = kafka_dist.libs_dir()
        existing = self.clusters()
        ports = ports or {}
        todo: dict[str, DevCluster] = {}
        for alias in aliases:
            cur = existing.get(alias)
            if cur and _alive(cur.pid):
                if cur.sasl != (alias in sasl):
                    raise DevClusterError(
                        f"cluster {alias} already runs with sasl={cur.sasl}; run `mirrorflow dev down` first"
                    )
                continue
            port = ports.get(alias) or free_port()
            cport = port + 1 if alias in ports else free_port()
            for p in (port, cport):
                if not _port_free(p):
                    raise DevClusterError(
                        f"port {p} for cluster {alias} is already in use on 127.0.0.1 "
                        f"(another Kafka or program holds it; stop it or pick other ports)"
                    )
            users = {u: secrets.token_urlsafe(12) for u in ("admin", *TEST_USERS)} if alias in sasl else {}
            todo[alias] = DevCluster(alias, port, cport, sasl=alias in sasl, users=users)
        errors: list[str] = []
        started: dict[str, tuple[DevCluster, subprocess.Popen]] = {}
        with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
            prepared = {a: pool.submit(self._prepare, c, java, libs) for a, c in todo.items()}
            for alias, fut in prepared.items():
                try:
                    cmd, logs = fut.result()
                except DevClusterError as exc:
                    errors.append(str(exc))
                    continue
                # spawned from this thread: with attached=True the broker dies with this thread
                started[alias] = (todo[alias], self._spawn(todo[alias], cmd, logs, attached))
            waits = [pool.submit(self._wait_ready, c, proc, self._dirs(a)[2]) for a, (c, proc) in started.items()]
            for wait in waits:
                try:
                    wait.result()
                except DevClusterError as exc:
                    errors.append(str(exc))
        merged = {**existing, **todo}
        self._save(merged)
        if errors:
            for c in todo.values():
                self._stop(c)
            self._save({a: c for a, c in merged.items() if a not in todo})
            raise DevClusterError("\n".join(errors))
        return {a: merged[a] for a in aliases}

    def _dirs(self, alias: str) -> tuple[Path, Path, Path]:
        base = self.home / alias
        return base, base / "data", base / "logs"

    def _prepare(self, c: DevCluster, java: str, libs: Path) -> tuple[list[str], Path]:
        """Write the broker's files and format its storage; returns the command that starts it."""
        base, data, logs = self._dirs(c.alias)
        if base.exists():
            shutil.rmtree(base)  # always a fresh, empty cluster: no cluster-id mismatch
        data.mkdir(parents=True)
        logs.mkdir(parents=True)
        props = base / "server.properties"
        props.write_text(_server_properties(c, data))
        os.chmod(props, 0o600)
        log4j = base / "log4j2.properties"
        log4j.write_text(LOG4J)
        fmt = [
            java,
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            f"-Dkafka.logs.dir={logs}",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{libs}/*",
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            kafka_uuid(),
            "--config",
            str(props),
            "--standalone",
        ]
        proc = subprocess.run(fmt, capture_output=True, text=True)
        if proc.returncode != 0:
            raise DevClusterError(
                f"cluster {c.alias}: formatting the storage failed: {(proc.stdout + proc.stderr).strip()[-800:]}"
            )
        return self._command(c, java, libs), logs

    def _command(self, c: DevCluster, java: str, libs: Path) -> list[str]:
        """The command that starts the broker of `c` on its prepared files (same ports, same data)."""
        base, _, logs = self._dirs(c.alias)
        return [
            java,
            "-Xms256m",
            "-Xmx768m",
            *JVM_PERF,
            f"-Dkafka.logs.dir={logs}",
            f"-Dlog4j2.configurationFile={base / 'log4j2.properties'}",
            "-cp",
            f"{libs}/*",
            "kafka.Kafka",
            str(base / "server.properties"),
        ]

    @staticmethod
    def _spawn(c: DevCluster, cmd: list[str], logs: Path, attached: bool) -> subprocess.Popen:
        with open(logs / "stdout.log", "wb") as out:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if attached else os.setsid,
                close_fds=True,
            )
        c.pid = proc.pid
        return proc

    def _wait_ready(self, c: DevCluster, proc: subprocess.Popen, logs: Path) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DevClusterError(
                    f"cluster {c.alias}: the broker exited with code {proc.returncode} during start-up:\n{_tail(logs)}"
                )
            try:
                with socket.create_connection(("127.0.0.1", c.port), timeout=1):
                    pass
            except OSError:
                time.sleep(0.3)
                continue
            try:
                conn = ClusterConnection(c.alias, {**c.client_config(), "socket.timeout.ms": 5000})
                md = conn.admin(check_timeout=None).list_topics(timeout=5)
                if md.brokers:
                    return
            except Exception:  # noqa: BLE001 - not ready yet; keep polling until the deadline
                pass
            time.sleep(0.3)
        self._stop(c)
        raise DevClusterError(
            f"cluster {c.alias}: no answer to metadata requests on {c.bootstrap_servers} "
            f"within {READY_TIMEOUT_S:.0f}s:\n{_tail(logs)}"
        )

    # -- restart -----------------------------------------------------------------------------
    def restart(self, alias: str, hard: bool = False, down_s: float = 0.0, attached: bool = False) -> DevCluster:
        """Stop one cluster's broker and start it again on the same ports with the same data (what
        a broker upgrade or a crash does to clients; `up` always starts empty clusters).

        `hard=False` sends SIGTERM (Kafka's controlled shutdown), `hard=True` SIGKILL (a crash: the
        log is recovered at start-up). `down_s` keeps it down that long before the start.
        `attached=True` ties the new broker's life to the calling thread (tests).
        """
        clusters = self.clusters()
        c = clusters.get(alias)
        if c is None:
            known = ", ".join(sorted(clusters)) or "none"
            raise DevClusterError(f"no local cluster {alias!r} under {self.home} (known: {known}); run `dev up` first")
        base, _, logs = self._dirs(alias)
        if not (base / "server.properties").exists():
            raise DevClusterError(f"cluster {alias}: {base} holds no broker files; run `dev down` and `dev up`")
        if hard:
            self._kill(c)
        else:
            self._stop(c)
        if down_s > 0:
            time.sleep(down_s)
        deadline = time.monotonic() + STOP_TIMEOUT_S  # the killed JVM's sockets close a moment later
        for p in (c.port, c.controller_port):
            while not _port_free(p):
                if time.monotonic() > deadline:
                    raise DevClusterError(f"cluster {alias}: port {p} is still in use after the stop; cannot restart")
                time.sleep(0.1)
        proc = self._spawn(c, self._command(c, kafka_dist.java_binary(), kafka_dist.libs_dir()), logs, attached)
        self._save({**clusters, alias: c})
        self._wait_ready(c, proc, logs)
        return c

    # -- down --------------------------------------------------------------------------------
    def down(self, aliases: list[str] | None = None) -> list[str]:
        clusters = self.clusters()
        chosen = [a for a in clusters if aliases is None or a in aliases]
        with ThreadPoolExecutor(max_workers=max(1, len(chosen))) as pool:
            list(pool.map(lambda a: self._stop(clusters[a]), chosen))
        remaining = {a: c for a, c in clusters.items() if a not in chosen}
        if remaining:
            self._save(remaining)
        elif self.state_file.exists():
            self.state_file.unlink()
        return chosen

    @staticmethod
    def _stop(c: DevCluster) -> None:
        """SIGTERM (Kafka's shutdown hook stops cleanly), a bounded wait, then SIGKILL."""
        if not _alive(c.pid):
            return
        assert c.pid
        try:
            os.kill(c.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline and _alive(c.pid):
            _reap(c.pid)
            time.sleep(0.2)
        if _alive(c.pid):
            try:
                os.kill(c.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            while _alive(c.pid):
                _reap(c.pid)
                time.sleep(0.1)
        _reap(c.pid)

    @staticmethod
    def _kill(c: DevCluster) -> None:
        """SIGKILL, as a crash would, and wait until the process is gone."""
        if not _alive(c.pid):
            return
        assert c.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(c.pid, signal.SIGKILL)
        while _alive(c.pid):
            _reap(c.pid)
            time.sleep(0.05)
        _reap(c.pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _tail(logs: Path, n: int = 20) -> str:
    for name in ("stdout.log", "server.log"):
        f = logs / name
        if f.exists() and f.stat().st_size:
            return "\n".join(f.read_text(errors="replace").splitlines()[-n:])
    return "(no broker output)"


def _server_properties(c: DevCluster, data: Path) -> str:
    common = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{c.controller_port}",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(data),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        "min.insync.replicas": "1",
        "default.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.segment.bytes": str(64 * 1024 * 1024),
        "log.cleaner.backoff.ms": "1000",
        "log.retention.check.interval.ms": "1000",
        "log.initial.task.delay.ms": "0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
        "auto.create.topics.enable": "false",
    }
    if c.sasl:
        users = " ".join(f'user_{u}="{p}"' for u, p in c.users.items())
        common.update(
            {
                "listeners": f"BROKER://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}",
                "advertised.listeners": f"BROKER://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}",
                # the controller listener stays PLAINTEXT on loopback; its ANONYMOUS principal is a super user
                "listener.security.protocol.map": "BROKER:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "BROKER",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.broker.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain."
                f'PlainLoginModule required username="admin" password="{c.users["admin"]}" {users};',
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin;User:ANONYMOUS",
                "allow.everyone.if.no.acl.found": "false",
            }
        )
    else:
        common.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
            }
        )
    # generated without comments: a '#' after a value would become part of it
    return "".join(f"{k}={v}\n" for k, v in common.items())
