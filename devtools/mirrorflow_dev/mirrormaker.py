"""The real MirrorMaker 2 from Maven Central jars, in dedicated mode (`org.apache.kafka.connect.mirror.
MirrorMaker`) or as connectors on a Kafka Connect distributed worker (`ConnectDistributed`, as the DR
guide and Strimzi run it), for development and the tests that check what an MM2 user does first:
take a running MM2 deployment over (see ops.takeover). Development only; production MM2 runs where
it runs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from mirrorflow.process import die_with_parent
from mirrorflow_dev import kafka_dist
from mirrorflow_dev.broker_config import JVM_PERF, LOG4J
from mirrorflow_dev.errors import DevClusterError
from mirrorflow_dev.processes import free_port


def mm2_properties(clusters: dict[str, str], flows: dict[str, dict[str, str]], extra: dict[str, str]) -> str:
    """An mm2.properties for single-broker dev clusters: replication factors 1, internal REST on a
    free loopback port (exactly-once needs it), `extra` last (it wins)."""
    props: dict[str, str] = {"clusters": ", ".join(clusters)}
    for alias, bootstrap in clusters.items():
        props[f"{alias}.bootstrap.servers"] = bootstrap
    for name, conf in flows.items():
        props[f"{name}.enabled"] = "true"
        props.update({f"{name}.{k}": v for k, v in conf.items()})
    for rf in (
        "replication.factor",
        "checkpoints.topic.replication.factor",
        "heartbeats.topic.replication.factor",
        "offset-syncs.topic.replication.factor",
        "offset.storage.replication.factor",
        "status.storage.replication.factor",
        "config.storage.replication.factor",
    ):
        props[rf] = "1"
    props["dedicated.mode.enable.internal.rest"] = "true"
    props["listeners"] = f"http://127.0.0.1:{free_port()}"
    props.update(extra)
    return "".join(f"{k} = {v}\n" for k, v in props.items())


class _Jvm:
    """A Java main from the MM2 jars, logging into `folder`; `stop()` sends SIGTERM (the shutdown
    hooks of MirrorMaker and Connect stop their connectors cleanly, committing offsets)."""

    what = "java"
    heap = "512m"  # -Xmx; connect-mirror-maker.sh's own default is 2G (a benchmark gives MM2 that)

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "log4j2.properties").write_text(LOG4J)
        self.proc: subprocess.Popen | None = None

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    def _spawn(self, classpath: str, main: str, *args: str) -> None:
        cmd = [
            kafka_dist.java_binary(),
            "-Xms128m",
            f"-Xmx{self.heap}",
            *JVM_PERF,
            f"-Dkafka.logs.dir={self.folder}",
            f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
            "-cp",
            classpath,
            main,
            *args,
        ]
        with open(self.folder / "stdout.log", "wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
            )

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            tail = (self.folder / "stdout.log").read_text(errors="replace")[-2000:]
            raise DevClusterError(f"{self.what} exited with {self.proc.returncode}:\n{tail}")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait (SIGKILL after `timeout`); the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)


class MirrorMaker2(_Jvm):
    """One MM2 process in dedicated mode (`connect-mirror-maker.sh mm2.properties`)."""

    what = "MirrorMaker 2"

    def __init__(self, folder: Path, properties: str) -> None:
        super().__init__(folder)
        (folder / "mm2.properties").write_text(properties)

    def start(self) -> MirrorMaker2:
        self._spawn(
            f"{kafka_dist.mm2_libs_dir()}/*",
            "org.apache.kafka.connect.mirror.MirrorMaker",
            str(self.folder / "mm2.properties"),
        )
        return self


BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
PLUGIN_JAR = re.compile(r"connect-mirror(-client)?-\d")  # the MM2 connectors: a plugin, not the runtime


def connect_worker_properties(bootstrap: str, group: str, prefix: str, extra: dict[str, str]) -> str:
    """A Kafka Connect distributed worker's properties as the MM2 DR guide writes them (byte-array
    converters, storage topics `<prefix>-offsets|-configs|-status`), for a single-broker cluster
    (replication factors 1), REST on a free loopback port; `extra` last (it wins)."""
    props = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "plugin.discovery": "service_load",
        "key.converter": BYTES,
        "value.converter": BYTES,
        "offset.storage.topic": f"{prefix}-offsets",
        "config.storage.topic": f"{prefix}-configs",
        "status.storage.topic": f"{prefix}-status",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "listeners": f"http://127.0.0.1:{free_port()}",
        **extra,
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


class ConnectWorker(_Jvm):
    """One Kafka Connect distributed worker (`connect-distributed.sh`) with connect-mirror on its
    plugin.path (isolated, as an operator installs a plugin), configured through its REST API."""

    what = "Kafka Connect"

    def __init__(self, folder: Path, properties: str) -> None:
        super().__init__(folder)
        plugins = folder / "plugins" / "connect-mirror"
        plugins.mkdir(parents=True, exist_ok=True)
        libs = kafka_dist.mm2_libs_dir()
        self.classpath = []
        for jar in sorted(libs.glob("*.jar")):
            if PLUGIN_JAR.match(jar.name):
                link = plugins / jar.name
                if not link.exists():
                    link.symlink_to(jar)
            else:
                self.classpath.append(str(jar))
        m = re.search(r"^listeners=(\S+)$", properties, re.M)
        self.url = (m.group(1) if m else "http://127.0.0.1:8083").rstrip("/")
        (folder / "connect-distributed.properties").write_text(properties + f"plugin.path={folder / 'plugins'}\n")

    def start(self) -> ConnectWorker:
        self._spawn(
            os.pathsep.join(self.classpath),
            "org.apache.kafka.connect.cli.ConnectDistributed",
            str(self.folder / "connect-distributed.properties"),
        )
        return self

    def rest(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """One REST call; the decoded JSON answer (None when empty). DevClusterError on an HTTP error."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                text = resp.read()
        except urllib.error.HTTPError as exc:
            raise DevClusterError(f"Connect {method} {path}: HTTP {exc.code} {exc.read()[:500]!r}") from None
        return json.loads(text) if text else None

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until the REST API answers and the worker has joined its group (it lists connectors)."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            try:
                self.rest("GET", "/connectors", timeout=5)
                return
            except (OSError, DevClusterError):
                if time.monotonic() > deadline:
                    raise DevClusterError(f"Kafka Connect at {self.url} not ready after {timeout:g} s") from None
                time.sleep(0.5)

    @staticmethod
    def path(name: str, what: str = "") -> str:
        return f"/connectors/{urllib.parse.quote(name, safe='')}{what}"

    def put_connector(self, name: str, config: dict[str, str]) -> None:
        """Create or reconfigure connector `name` (PUT /connectors/{name}/config)."""
        self.rest("PUT", self.path(name, "/config"), {**config, "name": name})

    def state(self, name: str) -> str:
        """The connector's state (RUNNING, PAUSED, STOPPED, ...), with its tasks' when they differ."""
        st = self.rest("GET", self.path(name, "/status"))
        tasks = {t["state"] for t in st.get("tasks", [])}
        return (
            st["connector"]["state"] if tasks <= {st["connector"]["state"]} else f"{st['connector']['state']} {tasks}"
        )
