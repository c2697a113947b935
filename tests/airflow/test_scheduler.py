"""The generated DAGs under Airflow's real scheduler (issue 14.4): `airflow standalone` (scheduler,
dag-processor, api-server, triggerer; LocalExecutor on SQLite) runs the sync, replicate and
checkpoint DAGs of a flow, unpaused, for several schedule intervals while records arrive, a new
topic appears mid-way and the checkpoint DAG's heartbeats create `heartbeats` on the source: every
run succeeds (a topic the target lacks waits for the sync DAG instead of failing a run), and every
record arrives exactly once."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from mirrorflow.dev.cluster import free_port
from tests.integration.replicate_helpers import assert_copied
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KINDS = ("sync", "replicate", "checkpoint")


def runs(env: dict[str, str], dag_id: str) -> list[dict]:
    out = subprocess.run([str(BIN / "airflow"), "dags", "list-runs", dag_id, "-o", "json"],
                         capture_output=True, text=True, env=env, timeout=120)
    # Airflow logs a warning or two to stdout before the JSON
    rows = [line for line in out.stdout.splitlines() if line.startswith(("[{", "[]"))]
    return json.loads(rows[-1]) if out.returncode == 0 and rows else []


def kill_leftovers(airflow_home: str) -> None:
    """Task processes that left standalone's process group (the executor's supervisors) must not
    outlive the test: they would write heartbeats into the next tests' clusters."""
    import psutil

    for p in psutil.process_iter():
        try:
            if p.environ().get("AIRFLOW_HOME") == airflow_home:
                p.kill()
        except (psutil.Error, OSError):
            continue


def test_dags_under_the_real_scheduler(tmp_path, source, target, unique):
    tag = uuid.uuid4().hex[:6]
    src, tgt = f"SA{tag}", f"SB{tag}"
    pfx = unique("sched")
    first, later = f"{pfx}.orders", f"{pfx}.later"
    create_topic(source, first, partitions=2)
    produce(source, first, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(10)])
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target}, {f"{src}->{tgt}": {
        "topics": f"{pfx}\\..*", "schedule": "* * * * *", "refresh.topics.interval.seconds": 60,
        "emit.checkpoints.interval.seconds": 60, "sync.group.offsets.enabled": True,
        "heartbeats.replication.enabled": True, "tasks.max": 2}})
    flow_id = cfg.flow(f"{src}->{tgt}").id
    home = tmp_path / "airflow"
    home.mkdir()
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",  # as the demo leaves them: running
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[2]"}',
        "MIRRORFLOW_CONFIG": str(cfg.path),
        "MIRRORFLOW_RUN_DIR": str(tmp_path / "runs"),
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{BIN}:{os.environ['PATH']}",
    }
    stop = threading.Event()

    def keep_producing() -> None:  # new records all along, and a new topic after the first minute
        n = 10
        while not stop.wait(15):
            produce(source, first, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(n, n + 4)])
            n += 4
            if n == 22:
                create_topic(source, later, partitions=1)
            if n > 22:
                produce(source, later, [{"partition": 0, "value": f"l{n}".encode()}])

    log = open(tmp_path / "standalone.log", "w")  # noqa: SIM115 - the child writes it
    proc = subprocess.Popen([str(BIN / "airflow"), "standalone"], stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    ids = {k: f"mirrorflow_{k}__{flow_id}" for k in KINDS}
    try:
        deadline = time.monotonic() + 600
        while True:
            assert proc.poll() is None, (tmp_path / "standalone.log").read_text()[-3000:]
            done = {k: [r for r in runs(env, i) if r["state"] in ("success", "failed")] for k, i in ids.items()}
            failed = {k: [r["run_id"] for r in v if r["state"] == "failed"] for k, v in done.items()}
            assert not any(failed.values()), failed
            if len(done["replicate"]) >= 4 and done["sync"] and done["checkpoint"]:
                break
            assert time.monotonic() < deadline, {k: len(v) for k, v in done.items()}
            time.sleep(10)
        stop.set()
        producer.join(60)
        # one more scheduled replicate run after the last record: then everything is on the target
        have = len(done["replicate"])
        while len([r for r in runs(env, ids["replicate"]) if r["state"] in ("success", "failed")]) < have + 2:
            assert time.monotonic() < deadline + 240, "no further replicate run"
            time.sleep(10)
        final = {k: runs(env, i) for k, i in ids.items()}
        assert all(r["state"] in ("success", "running", "queued") for v in final.values() for r in v), final
        scheduled = [r for r in final["replicate"] if r["run_id"].startswith("scheduled__")]
        assert len(scheduled) >= 5, final["replicate"]
    finally:
        stop.set()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        log.close()
        kill_leftovers(str(home))
    assert_copied(source, target, first, remote=f"{src}.{first}")
    assert_copied(source, target, later, remote=f"{src}.{later}")
    # the checkpoint DAG's heartbeats made `heartbeats` on the source: synced and copied, never a failed run
    assert consume_all(target, f"{src}.heartbeats")
