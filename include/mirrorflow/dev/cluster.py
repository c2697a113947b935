"""Local single-node Apache Kafka clusters (KRaft) for development and tests.

Each alias gets its own broker+controller JVM on 127.0.0.1 with its own ports, data and log
folders under a home folder (default `.mirrorflow/dev` in the project). A cluster listens with one
security kind (`SECURITY_KINDS`): plaintext, or SASL/PLAIN, TLS, mTLS, SASL_SSL SCRAM-SHA-512 or
SASL_SSL OAUTHBEARER (the broker's *unsecured* JWS validator: development only), each with the
StandardAuthorizer: `admin` is the super user mirrorflow connects as, `alice` and `bob` are
ordinary users for tests. Certificates come from a per-cluster CA (`dev.certs`); passwords sit in
0600 files of the cluster's folder and are never printed. `state.json` in the home folder records
what runs, so `dev status` and `dev down` work from any later process.
"""

from __future__ import annotations

import base64
import contextlib
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
from mirrorflow.dev.certs import DevCA
from mirrorflow.errors import DevClusterError
from mirrorflow.kafka.connection import ClusterConnection
from mirrorflow.process import die_with_parent

TEST_USERS = ("alice", "bob")
# security kind -> (listener protocol, what `dev up` prints); "plain" is the older `--sasl`
SECURITY_KINDS = {
    "plaintext": ("PLAINTEXT", ""),
    "plain": ("SASL_PLAINTEXT", "SASL/PLAIN, ACLs enforced"),
    "tls": ("SSL", "TLS (server certificate; clients are User:ANONYMOUS), ACLs enforced"),
    "mtls": ("SSL", "mTLS (principal = certificate CN), ACLs enforced"),
    "scram": ("SASL_SSL", "SASL_SSL SCRAM-SHA-512, ACLs enforced"),
    "oauth": ("SASL_SSL", "SASL_SSL OAUTHBEARER, UNSECURED JWS validator (development only!), ACLs enforced"),
}
BROKER_PRINCIPAL = "broker"  # CN of the broker's certificate: its principal on an mTLS listener
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
    sasl: bool = False  # SASL/PLAIN (kept for state files written before `security`)
    users: dict[str, str] = field(default_factory=dict, repr=False)  # passwords: never in reprs/test output
    pid: int | None = None
    security: str = "plaintext"  # a key of SECURITY_KINDS
    folder: str = ""  # the cluster's dev folder (certificates, password files)
    # a second listener (plaintext) on `proxied_port`, advertised at `proxy_port`: clients that bootstrap
    # through a TCP proxy on `proxy_port` (forwarding to `proxied_port`) keep going through it (tests)
    proxy_port: int | None = None
    proxied_port: int | None = None

    def __post_init__(self) -> None:
        if self.sasl and self.security == "plaintext":
            self.security = "plain"
        self.sasl = self.security == "plain"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def tls_dir(self) -> Path:
        return Path(self.folder) / "tls"

    @property
    def ca_location(self) -> str | None:
        """The CA file clients must trust (None: no TLS)."""
        return str(self.tls_dir / "ca.pem") if SECURITY_KINDS[self.security][0].endswith("SSL") else None

    def password_file(self, user: str) -> Path:
        return Path(self.folder) / "secrets" / f"{user}.password"

    def client_config(self, user: str = "admin") -> dict[str, str]:
        """librdkafka settings to reach this cluster (as the super user by default). Holds the
        password for SASL kinds: never log it."""
        protocol = SECURITY_KINDS[self.security][0]
        conf = {"bootstrap.servers": self.bootstrap_servers}
        if protocol == "PLAINTEXT":
            return conf
        conf["security.protocol"] = protocol
        if self.ca_location:
            conf["ssl.ca.location"] = self.ca_location
        if self.security == "mtls":
            conf["ssl.certificate.location"] = str(self.tls_dir / f"{user}.crt")
            conf["ssl.key.location"] = str(self.tls_dir / f"{user}.key")
            conf["ssl.key.password"] = self.users[user]
        elif self.security in ("plain", "scram"):
            conf["sasl.mechanism"] = "PLAIN" if self.security == "plain" else "SCRAM-SHA-512"
            conf["sasl.username"] = user
            conf["sasl.password"] = self.users[user]
        elif self.security == "oauth":
            conf["sasl.mechanism"] = "OAUTHBEARER"
            conf["enable.sasl.oauthbearer.unsecure.jwt"] = "true"  # development only
            conf["sasl.oauthbearer.config"] = f"principal={user}"
        return conf

    def status(self) -> dict:
        """What a client needs, secrets by reference only (password files, never passwords)."""
        d: dict = {
            "alias": self.alias,
            "bootstrap.servers": self.bootstrap_servers,
            "security": self.security,
            "sasl": self.sasl,
            "pid": self.pid,
            "running": _alive(self.pid),
        }
        if self.security == "plaintext":
            return d
        d["security.protocol"] = SECURITY_KINDS[self.security][0]
        d["super.user"] = "admin"
        if self.ca_location:
            d["ssl.ca.location"] = self.ca_location
        users: dict[str, dict[str, str]] = {}
        for user in ("admin", *TEST_USERS):
            if self.security in ("plain", "scram"):
                users[user] = {"sasl.username": user, "password.file": str(self.password_file(user))}
            elif self.security == "mtls":
                users[user] = {
                    "principal": f"User:{user}",
                    "ssl.certificate.location": str(self.tls_dir / f"{user}.crt"),
                    "ssl.key.location": str(self.tls_dir / f"{user}.key"),
                    "ssl.key.password.file": str(self.password_file(user)),
                }
            elif self.security == "oauth":
                users[user] = {"principal": f"User:{user}", "sasl.oauthbearer.config": f"principal={user}"}
        if users:
            d["users"] = users
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
        tls: list[str] | tuple[str, ...] = (),
        mtls: list[str] | tuple[str, ...] = (),
        scram: list[str] | tuple[str, ...] = (),
        oauth: list[str] | tuple[str, ...] = (),
        proxy_ports: dict[str, int] | None = None,
    ) -> dict[str, DevCluster]:
        """Start the named clusters (those already running are kept) and wait until they serve.

        `sasl` (SASL/PLAIN), `tls`, `mtls`, `scram` and `oauth` name the aliases that listen with
        that security kind (others: plaintext). `ports` fixes the broker port per alias (the
        controller takes the next one); other aliases get free ports. `attached=True` ties the
        brokers' lives to this process. `proxy_ports` (plaintext aliases only): the port of a TCP
        proxy in front of the alias, advertised by a second listener (DevCluster.proxy_port).
        """
        kinds = security_kinds(aliases, plain=sasl, tls=tls, mtls=mtls, scram=scram, oauth=oauth)
        java = kafka_dist.java_binary()
        libs = kafka_dist.libs_dir()
        existing = self.clusters()
        ports = ports or {}
        todo: dict[str, DevCluster] = {}
        for alias in aliases:
            cur = existing.get(alias)
            if cur and _alive(cur.pid):
                if cur.security != kinds[alias]:
                    raise DevClusterError(
                        f"cluster {alias} already runs with security {cur.security}, not {kinds[alias]}; "
                        "run `mirrorflow dev down` first"
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
            kind = kinds[alias]
            # SASL passwords, or (mTLS) the passwords of the users' encrypted private keys
            with_users = kind in ("plain", "scram", "mtls")
            users = {u: secrets.token_urlsafe(12) for u in ("admin", *TEST_USERS)} if with_users else {}
            folder = str(self._dirs(alias)[0])
            todo[alias] = DevCluster(alias, port, cport, users=users, security=kind, folder=folder)
            if alias in (proxy_ports or {}):
                if kind != "plaintext":
                    raise DevClusterError(f"cluster {alias}: a proxied listener needs a plaintext cluster, not {kind}")
                todo[alias].proxy_port, todo[alias].proxied_port = (proxy_ports or {})[alias], free_port()
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
            if not errors:
                for problem in pool.map(_create_users, [c for c, _ in started.values()]):
                    if problem:
                        errors.append(problem)
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
        _write_secrets(c, base)
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
        if c.security == "scram":  # KRaft: the broker's own login must exist before it starts
            fmt += ["--add-scram", f"SCRAM-SHA-512=[name=admin,password={c.users['admin']}]"]
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
                preexec_fn=die_with_parent if attached else os.setsid,
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
        for p in (c.port, c.controller_port, *([c.proxied_port] if c.proxied_port else [])):
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


def security_kinds(aliases: list[str], **by_kind: list[str] | tuple[str, ...]) -> dict[str, str]:
    """alias -> security kind, from the aliases each kind names; one kind per alias."""
    kinds = dict.fromkeys(aliases, "plaintext")
    flags = {"plain": "--sasl"}
    for kind, named in by_kind.items():
        flag = flags.get(kind, f"--{kind}")
        unknown = sorted(set(named) - set(aliases))
        if unknown:
            raise DevClusterError(f"{flag} names {', '.join(unknown)}, which is not in --clusters {','.join(aliases)}")
        for alias in named:
            if kinds[alias] != "plaintext":
                raise DevClusterError(f"cluster {alias} is named by two security kinds ({kinds[alias]} and {kind})")
            kinds[alias] = kind
    return kinds


def _write_secrets(c: DevCluster, base: Path) -> None:
    """Password files (0600) and, for TLS kinds, the cluster's CA, broker and user certificates."""
    if c.users:
        folder = base / "secrets"
        folder.mkdir(mode=0o700)
        for user, password in c.users.items():
            fd = os.open(folder / f"{user}.password", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(password)
    if c.ca_location:
        ca = DevCA(c.tls_dir, c.alias)
        ca.keystore(ca.issue(BROKER_PRINCIPAL, server=True))
        if c.security == "mtls":
            for user in ("admin", *TEST_USERS):
                ca.issue(user, password=c.users[user])


def _create_users(c: DevCluster) -> str | None:
    """SCRAM: the test users, through the Admin API as admin (the admin itself was bootstrapped)."""
    if c.security != "scram":
        return None
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    conn = ClusterConnection(c.alias, c.client_config())
    admin = conn.admin()
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upserts = [UserScramCredentialUpsertion(u, info, c.users[u].encode()) for u in TEST_USERS]
    try:
        for fut in admin.alter_user_scram_credentials(upserts).values():
            fut.result(timeout=30)
    except Exception as exc:  # noqa: BLE001 - reported as the cluster's start-up failure
        return f"creating the SCRAM users failed: {conn.describe_failure(exc)}"
    return None


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
    if c.security not in ("plaintext", "plain"):
        common.update(_secure_listener(c))
    elif c.sasl:
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
        # a proxied listener: what a client that came in on it is told to connect to is the proxy
        extra = ("", "", "")
        if c.proxied_port:
            listen, advertise = f"127.0.0.1:{c.proxied_port}", f"127.0.0.1:{c.proxy_port}"
            extra = (f",PROXIED://{listen}", f",PROXIED://{advertise}", ",PROXIED:PLAINTEXT")
        common.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}{extra[0]}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}"
                f"{extra[1]}",
                "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT{extra[2]}",
                "inter.broker.listener.name": "PLAINTEXT",
            }
        )
    # generated without comments: a '#' after a value would become part of it
    return "".join(f"{k}={v}\n" for k, v in common.items())


def _secure_listener(c: DevCluster) -> dict[str, str]:
    """The BROKER listener of a TLS kind (tls, mtls, scram, oauth) and the authorizer. The
    controller listener stays PLAINTEXT on loopback (its ANONYMOUS principal is a super user, so
    on a `tls` cluster, whose clients are anonymous too, every client is one: TLS alone gives
    no identity)."""
    protocol = SECURITY_KINDS[c.security][0]
    listeners = f"BROKER://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}"
    keystore = c.tls_dir / f"{BROKER_PRINCIPAL}.keystore.pem"
    props = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": f"BROKER:{protocol},CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "BROKER",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(c.tls_dir / "ca.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:admin;User:{BROKER_PRINCIPAL};User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
    }
    if c.security == "mtls":
        props["ssl.client.auth"] = "required"
        # the principal is the certificate's CN (User:admin), not its whole DN
        props["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+)$/$1/,DEFAULT"
    elif c.security == "scram":
        props["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
        props["sasl.mechanism.inter.broker.protocol"] = "SCRAM-SHA-512"
        props["listener.name.broker.scram-sha-512.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{c.users["admin"]}";'
        )
    elif c.security == "oauth":
        # no callback handlers configured: Kafka's UNSECURED login and JWS validator (tokens with
        # alg "none", anyone can mint one for any principal). Development only.
        props["sasl.enabled.mechanisms"] = "OAUTHBEARER"
        props["sasl.mechanism.inter.broker.protocol"] = "OAUTHBEARER"
        props["listener.name.broker.oauthbearer.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="admin";'
        )
    return props
