"""Local single-node Apache Kafka clusters (KRaft) for development and tests: `mirrorflow dev up`.

Each alias gets its own broker+controller JVM on 127.0.0.1 with its own ports, data and log folders
under a home folder (default `.mirrorflow/dev` in the project), running the Apache Kafka release
asked for (3.9.0 to 4.4.x, per alias; `kafka_release`). `state.json` in the home folder records
what runs, so `dev status` and `dev down` work from any later process.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from mirrorflow.kafka.connection import ClusterConnection
from mirrorflow.process import die_with_parent
from mirrorflow_dev import kafka_dist, processes
from mirrorflow_dev.broker_config import broker_command, format_command, write_files
from mirrorflow_dev.dev_cluster import TEST_USERS, DevCluster
from mirrorflow_dev.errors import DevClusterError
from mirrorflow_dev.home import dev_home
from mirrorflow_dev.kafka_release import DEFAULT_VERSION, KafkaRelease

READY_TIMEOUT_S = 120.0


class DevClusters:
    """The set of local clusters that live under one home folder."""

    def __init__(self, home: Path | str | None = None, classes: list[str] | None = None):
        """`classes`: the brokers' class-data-sharing options instead of the release's archive (class_archive)."""
        self.home = dev_home(home).absolute()  # a broker's command line names its files by it (DevCluster.marker)
        self.classes = classes
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
        kafka_versions: dict[str, str] | None = None,
        proxy_ports: dict[str, int] | None = None,
    ) -> dict[str, DevCluster]:
        """Start the named clusters (those already running are kept) and wait until they serve.

        `sasl` (SASL/PLAIN), `tls`, `mtls`, `scram` and `oauth` name the aliases that listen with
        that security kind (others: plaintext). `ports` fixes the broker port per alias (the
        controller takes the next one); other aliases get free ports. `kafka_versions` names the
        Apache Kafka release per alias (others: the default). `attached=True` ties the brokers'
        lives to this process. `proxy_ports` (plaintext aliases only): the port of a TCP proxy in front
        of the alias, advertised by a second listener (DevCluster.proxy_port).
        """
        kinds = security_kinds(aliases, plain=sasl, tls=tls, mtls=mtls, scram=scram, oauth=oauth)
        releases = _releases(aliases, kafka_versions or {})
        existing = self.clusters()
        ports = ports or {}
        taken = set(ports.values()) | {p + 1 for p in ports.values()}  # every port this start hands out, once
        todo: dict[str, DevCluster] = {}
        for alias in aliases:
            cur = existing.get(alias)
            if cur and processes.alive(cur.pid, cur.marker):
                _check_same(cur, kinds[alias], releases[alias])
                continue
            port = ports.get(alias) or processes.free_port(taken)
            cport = port + 1 if alias in ports else processes.free_port(taken)
            for p in (port, cport):
                if not processes.port_free(p):
                    raise DevClusterError(
                        f"port {p} for cluster {alias} is already in use on 127.0.0.1 "
                        f"(another Kafka or program holds it; stop it or pick other ports)"
                    )
            kind = kinds[alias]
            # SASL passwords, or (mTLS) the passwords of the users' encrypted private keys
            with_users = kind in ("plain", "scram", "mtls")
            users = {u: secrets.token_urlsafe(12) for u in ("admin", *TEST_USERS)} if with_users else {}
            folder = str(self._dirs(alias)[0])
            todo[alias] = DevCluster(
                alias, port, cport, users=users, security=kind, folder=folder, kafka_version=str(releases[alias])
            )
            if alias in (proxy_ports or {}):
                if kind != "plaintext":
                    raise DevClusterError(f"cluster {alias}: a proxied listener needs a plaintext cluster, not {kind}")
                todo[alias].proxy_port = (proxy_ports or {})[alias]
                todo[alias].proxied_port = processes.free_port(taken)
        # every release's jars and Java first: a missing one fails before any broker starts
        runtimes = {r: (kafka_dist.java_binary(r), kafka_dist.libs_dir(r)) for r in {c.release for c in todo.values()}}
        errors: list[str] = []
        started: dict[str, tuple[DevCluster, subprocess.Popen]] = {}
        with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
            prepared = {a: pool.submit(self._prepare, c, *runtimes[c.release]) for a, c in todo.items()}
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
                processes.stop(c.pid, marker=c.marker)
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
        write_files(c, base, data)
        proc = subprocess.run(format_command(c, java, libs, base, logs), capture_output=True, text=True)
        if proc.returncode != 0:
            out = (proc.stdout + proc.stderr).strip()
            # the cause's line first: the tail of a Java trace is its frames (a full run's message held no cause)
            cause = next((line for line in out.splitlines() if "Exception" in line or "Error" in line), "")
            raise DevClusterError(
                f"cluster {c.alias} (Kafka {c.kafka_version}): formatting the storage failed: {cause}\n...{out[-800:]}"
            )
        return broker_command(java, libs, base, logs, self.classes), logs

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
        output = (logs / "stdout.log", logs / "server.log")
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DevClusterError(
                    f"cluster {c.alias} (Kafka {c.kafka_version}): the broker exited with code {proc.returncode} "
                    f"during start-up:\n{processes.tail(*output)}"
                )
            try:  # the listener opens only once the broker serves (for a fixed port): cheap to probe first
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
        processes.stop(c.pid, marker=c.marker)
        raise DevClusterError(
            f"cluster {c.alias} (Kafka {c.kafka_version}): no answer to metadata requests on {c.bootstrap_servers} "
            f"within {READY_TIMEOUT_S:.0f}s:\n{processes.tail(*output)}"
        )

    # -- restart -----------------------------------------------------------------------------
    def restart(self, alias: str, hard: bool = False, down_s: float = 0.0, attached: bool = False) -> DevCluster:
        """Stop one cluster's broker and start it again on the same ports with the same data (what
        a broker upgrade or a crash does to clients; `up` always starts empty clusters).

        `hard=False` sends SIGTERM (Kafka's controlled shutdown), `hard=True` SIGKILL (a crash: the
        log is recovered at start-up). `down_s` keeps it down that long before the start.
        `attached=True` ties the new broker's life to the calling thread (tests).
        """
        c = self._cluster(alias)
        base, _, logs = self._dirs(alias)
        if not (base / "server.properties").exists():
            raise DevClusterError(f"cluster {alias}: {base} holds no broker files; run `dev down` and `dev up`")
        if hard:
            processes.kill(c.pid, marker=c.marker)
        else:
            processes.stop(c.pid, marker=c.marker)
        self._gone(alias)
        held = []  # its ports, held from the stop to the start (processes.hold)
        try:
            deadline = time.monotonic() + processes.STOP_TIMEOUT_S  # the killed JVM's sockets close a moment later
            for p in (c.port, c.controller_port, *([c.proxied_port] if c.proxied_port else [])):
                sock = processes.hold(p, max(0.0, deadline - time.monotonic()))
                if sock is None:
                    raise DevClusterError(f"cluster {alias}: port {p} is still in use after the stop; cannot restart")
                held.append(sock)
            if down_s > 0:
                time.sleep(down_s)
        finally:
            for sock in held:
                sock.close()
        cmd = broker_command(
            kafka_dist.java_binary(c.release), kafka_dist.libs_dir(c.release), base, logs, self.classes
        )
        proc = self._spawn(c, cmd, logs, attached)
        self._save({**self.clusters(), alias: c})
        self._wait_ready(c, proc, logs)
        return c

    def kill(self, alias: str) -> None:
        """SIGKILL one cluster's broker, as a crash of the whole cluster would (`restart` brings it back)."""
        c = self._cluster(alias)
        processes.kill(c.pid, marker=c.marker)
        self._gone(alias)

    def stop(self, alias: str) -> None:
        """Stop one cluster's broker cleanly (SIGTERM), keeping its files (`restart` brings it back)."""
        c = self._cluster(alias)
        processes.stop(c.pid, marker=c.marker)
        self._gone(alias)

    def _gone(self, alias: str) -> None:
        """Record that the broker's process is gone (no pid). Its pid is free for any new process now
        (pids wrap at 32768 on a busy machine): a later restart or `down` that signalled it SIGTERMed a
        sibling test worker's broker that had just been given that pid, in the middle of its start."""
        clusters = self.clusters()
        self._save({**clusters, alias: replace(clusters[alias], pid=None)})

    def _cluster(self, alias: str) -> DevCluster:
        clusters = self.clusters()
        if alias not in clusters:
            known = ", ".join(sorted(clusters)) or "none"
            raise DevClusterError(f"no local cluster {alias!r} under {self.home} (known: {known}); run `dev up` first")
        return clusters[alias]

    # -- down --------------------------------------------------------------------------------
    def down(self, aliases: list[str] | None = None) -> list[str]:
        clusters = self.clusters()
        chosen = [a for a in clusters if aliases is None or a in aliases]
        with ThreadPoolExecutor(max_workers=max(1, len(chosen))) as pool:
            list(pool.map(lambda a: processes.stop(clusters[a].pid, marker=clusters[a].marker), chosen))
        remaining = {a: c for a, c in clusters.items() if a not in chosen}
        if remaining:
            self._save(remaining)
        elif self.state_file.exists():
            self.state_file.unlink()
        return chosen


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


def kafka_versions(aliases: list[str], spec: str) -> dict[str, str]:
    """alias -> Kafka release from `--kafka-version`: `4.4.0` (every alias), `A=3.9.2,B=4.4.0` (per
    alias), or both (`4.4.0,A=3.9.2`: A runs 3.9.2, the others 4.4.0). Checked, with one error naming
    what is wrong."""
    default = DEFAULT_VERSION
    out: dict[str, str] = {}
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        alias, eq, version = item.rpartition("=")
        if not eq:
            default = str(KafkaRelease.parse(version))
            continue
        if alias not in aliases:
            raise DevClusterError(f"--kafka-version names {alias}, which is not in --clusters {','.join(aliases)}")
        out[alias] = str(KafkaRelease.parse(version))
    return {a: out.get(a, default) for a in aliases}


def _releases(aliases: list[str], versions: dict[str, str]) -> dict[str, KafkaRelease]:
    unknown = sorted(set(versions) - set(aliases))
    if unknown:
        raise DevClusterError(f"Kafka versions given for {', '.join(unknown)}, which is not among {', '.join(aliases)}")
    return {a: KafkaRelease.parse(versions.get(a, DEFAULT_VERSION)) for a in aliases}


def _check_same(cur: DevCluster, kind: str, release: KafkaRelease) -> None:
    """A running cluster is kept only when it is what was asked for."""
    differs = (
        f"security {cur.security}, not {kind}"
        if cur.security != kind
        else f"Kafka {cur.kafka_version}, not {release}"
        if cur.release != release
        else ""
    )
    if differs:
        raise DevClusterError(f"cluster {cur.alias} already runs with {differs}; run `mirrorflow dev down` first")


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
