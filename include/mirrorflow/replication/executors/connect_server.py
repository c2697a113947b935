"""The Spark Connect server the `connect` copy mode runs on: its settings and its command line.

`python -m mirrorflow.replication.executors.connect_server serve --master M --bind ADDR --port P --driver-host H`
runs it in the foreground (a container's main process: docker-compose's spark-connect service), from
the PySpark distribution of this Python (`spark-submit --class ...SparkConnectServer`, the
spark-connect jar PySpark ships), its executors on this Python (they import mirrorflow's
dependencies: confluent-kafka, pyarrow). The development harness's `mirrorflow dev spark up` starts
the same command on 127.0.0.1. Point a config at a server with `spark.remote: sc://HOST:PORT`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from mirrorflow.replication.executors.spark import VENV_BIN, local_slots, spark_env

CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark Connect's own default


def spark_bin(name: str) -> str:
    """A Spark script of this Python's PySpark (the venv's bin; pip's user bin, on PATH, in the image)."""
    local = VENV_BIN / name
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
    slots = local_slots(master)
    if slots and "spark.default.parallelism" not in conf:  # how the copy job packs its tasks (spark_tasks)
        conf["spark.default.parallelism"] = str(slots)
    cmd = [spark_bin("spark-submit"), "--master", master, "--class", CONNECT_CLASS]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    return [*cmd, "--name", "mirrorflow-connect", "spark-internal"]


def server_env() -> dict[str, str]:
    """The server's environment: this Python's bin first on PATH, executors on this Python."""
    env = spark_env()
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def serve_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mirrorflow.replication.executors.connect_server", description="run a Spark Connect server"
    )
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
    os.execvpe(cmd[0], cmd, server_env())


if __name__ == "__main__":
    main()
