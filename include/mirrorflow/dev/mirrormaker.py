"""The real MirrorMaker 2 (dedicated mode, `org.apache.kafka.connect.mirror.MirrorMaker`) from Maven
Central jars, for development and the tests that check what an MM2 user does first: take a running
MM2 deployment over (see ops.takeover). Development only; production MM2 runs where it runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from mirrorflow.dev import kafka_dist
from mirrorflow.dev.cluster import JVM_PERF, LOG4J, free_port
from mirrorflow.errors import DevClusterError
from mirrorflow.process import die_with_parent


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


class MirrorMaker2:
    """One MM2 process; `stop()` sends SIGTERM (MM2's shutdown hook stops its herders cleanly)."""

    def __init__(self, folder: Path, properties: str) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "mm2.properties").write_text(properties)
        (folder / "log4j2.properties").write_text(LOG4J)
        self.proc: subprocess.Popen | None = None

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    def start(self) -> MirrorMaker2:
        cmd = [
            kafka_dist.java_binary(),
            "-Xms128m",
            "-Xmx512m",
            *JVM_PERF,
            f"-Dkafka.logs.dir={self.folder}",
            f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
            "-cp",
            f"{kafka_dist.mm2_libs_dir()}/*",
            "org.apache.kafka.connect.mirror.MirrorMaker",
            str(self.folder / "mm2.properties"),
        ]
        with open(self.folder / "stdout.log", "wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
            )
        return self

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            tail = (self.folder / "stdout.log").read_text(errors="replace")[-2000:]
            raise DevClusterError(f"MirrorMaker 2 exited with {self.proc.returncode}:\n{tail}")

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
