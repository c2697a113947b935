"""The generated DAGs under Airflow's real scheduler (issue 14.4): `airflow standalone` (scheduler,
dag-processor, api-server, triggerer; LocalExecutor on SQLite) runs the sync, replicate and
checkpoint DAGs of a flow, unpaused, for several schedule intervals while records arrive, a new
topic appears mid-way and the checkpoint DAG's heartbeats create `heartbeats` on the source: every
run succeeds (a topic the target lacks waits for the sync DAG instead of failing a run), and every
record arrives exactly once.

In the same Airflow (starting one costs minutes), `airflow backfill create` on the replicate DAG of a
second flow, started at `latest`, over four past hourly intervals: three copy exactly the history
whose timestamps fall in them, the fourth (already copied: the flow is current) copies nothing
(issue 10.1/10.5; a reprocessing run copying nothing is in test_backfill_dag, see AirflowBackfill)."""
from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mirrorflow.dev.cluster import free_port
from mirrorflow.replication.runner import run_once
from tests.integration.replicate_helpers import assert_copied
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KINDS = ("sync", "replicate", "checkpoint")


def query(db: Path, sql: str, *args: object) -> list[tuple]:
    """Rows of Airflow's database (read directly: an `airflow` CLI call costs seconds of a loaded
    machine's CPU); none before standalone created its tables."""
    if not db.exists():
        return []
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    finally:
        con.close()


def runs(db: Path, dag_id: str) -> list[dict]:
    rows = query(db, "SELECT run_id, state, start_date FROM dag_run WHERE dag_id = ?", dag_id)
    return [{"run_id": r, "state": st, "start": utc(start)} for r, st, start in rows]


def kill_leftovers(airflow_home: str) -> None:
    """Task processes that left standalone's process group (the executor's supervisors) must not
    outlive the test: they would write heartbeats into the next tests' clusters."""
    import psutil

    for p in psutil.process_iter():
        try:
            # a task worker's title overwrites its environment: it still holds the home's database open
            if p.environ().get("AIRFLOW_HOME") == airflow_home or any(
                    f.path.startswith(airflow_home + os.sep) for f in p.open_files()):
                p.kill()
        except (psutil.Error, OSError):
            continue


HOUR = timedelta(hours=1)


def utc(value: str | None) -> datetime | None:
    """A datetime column of Airflow's SQLite database (naive UTC or with an offset)."""
    if value is None:
        return None
    d = datetime.fromisoformat(value)
    return d if d.tzinfo else d.replace(tzinfo=UTC)


def airflow(env: dict[str, str], *args: str) -> str:
    out = subprocess.run([str(BIN / "airflow"), *args], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, (args, out.stderr[-3000:])
    return out.stdout


@dataclass
class AirflowBackfill:
    """`airflow backfill create` on one replicate DAG, created before the scheduler starts. Why not
    beside the running scheduler, and why no second backfill with reprocess behaviour `completed`
    through the REST API: on SQLite that write conflicts with the scheduler's ("database is locked")
    nearly every time on a loaded machine, and Airflow 3.3's clean-up of the refused request then
    deletes runs, left a backfill that never completes, and failed unrelated DAGs' tasks ("Task
    Instance not found"; a fresh-clone run, 23 minutes). A reprocessing run copying nothing is
    test_backfill_dag's `backfill__0_again`."""

    env: dict[str, str]
    db: Path
    dag_id: str
    from_date: datetime
    to_date: datetime

    def runs(self) -> list[tuple]:
        """(run_id, run_type, state, logical_date) of the DAG's runs."""
        return query(self.db, "SELECT run_id, run_type, state, logical_date FROM dag_run WHERE dag_id = ?",
                     self.dag_id)

    def states(self) -> dict[datetime, tuple[str, str]]:
        """Per backfill run's logical date: (plan state, copy state)."""
        rows = query(
            self.db,
            "SELECT r.logical_date, t.task_id, t.state FROM task_instance t JOIN dag_run r"
            " ON r.dag_id = t.dag_id AND r.run_id = t.run_id WHERE r.dag_id = ? AND r.run_type = 'backfill'",
            self.dag_id,
        )
        by = {(utc(d), task): state for d, task, state in rows}
        return {d: (by.get((d, "plan")), by.get((d, "copy"))) for d, _ in by}

    def create(self) -> None:
        """`airflow backfill create` (the DAGs serialized, no scheduler yet)."""
        out = airflow(self.env, "backfill", "create", "--dag-id", self.dag_id, "--from-date",
                      self.from_date.isoformat(), "--to-date", self.to_date.isoformat(), "--max-active-runs", "1")
        assert len(self.runs()) == 4, out[-2000:]

    def complete(self) -> bool:
        return any(end is not None for (end,) in query(
            self.db, "SELECT completed_at FROM backfill WHERE dag_id = ?", self.dag_id))


def scheduler_alive(log: Path) -> None:
    """`airflow standalone` does not restart a scheduler that died: fail at once, with its error,
    instead of waiting out the test's deadline for runs that will never come."""
    text = log.read_text(errors="replace")
    if "Exited execute loop" in text:
        tail = text[text.index("Exited execute loop"):]
        error = next((line for line in tail.splitlines() if "Error: " in line), "")
        raise AssertionError(f"the Airflow scheduler died: {error.strip() or tail[:3000]}")


def unpause_when_ready(env: dict[str, str], proc: subprocess.Popen, log: Path, db: Path, port: int,
                       dag_ids: list[str]) -> None:
    """Unpause the flows' DAGs once they are parsed and the api-server (which also serves the tasks'
    execution API) answers: on a loaded machine it starts a minute after the scheduler, and tasks
    started before that fail on "connection refused" until their retries run out."""
    import urllib.request

    deadline = time.monotonic() + 600
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "Airflow did not come up: " + log.read_text()[-3000:]
        parsed = {r[0] for r in query(db, "SELECT dag_id FROM serialized_dag")}
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=10) as r:
                up = r.status == 200
        except OSError:
            up = False
        if up and parsed >= set(dag_ids):
            break
        time.sleep(5)
    pattern = "^(" + "|".join(dag_ids) + ")$"
    for _ in range(10):  # SQLite may refuse a write beside the scheduler's ("database is locked")
        out = subprocess.run([str(BIN / "airflow"), "dags", "unpause", "--treat-dag-id-as-regex", "-y", pattern],
                             capture_output=True, text=True, env=env, timeout=180)
        if out.returncode == 0:
            return
        assert "database is locked" in out.stderr + out.stdout, out.stderr[-3000:]
    raise AssertionError(f"could not unpause {dag_ids}: {out.stderr[-2000:]}")


def test_dags_under_the_real_scheduler(tmp_path, source, target, unique):
    tag = uuid.uuid4().hex[:6]
    src, tgt = f"SA{tag}", f"SB{tag}"
    pfx = unique("sched")
    first, later = f"{pfx}.orders", f"{pfx}.later"
    create_topic(source, first, partitions=2)
    produce(source, first, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(10)])
    flows = {f"{src}->{tgt}": {
        "topics": f"{pfx}\\..*", "schedule": "* * * * *", "refresh.topics.interval.seconds": 60,
        "emit.checkpoints.interval.seconds": 60, "sync.group.offsets.enabled": True,
        "heartbeats.replication.enabled": True, "tasks.max": 2}}
    # the backfill flow: its own source alias, started at `latest` after 16 records of the last 6 hours
    bsrc = f"SC{tag}"
    btopic = f"{pfx}b.events"  # not matched by the first flow's topics
    bremote = f"{bsrc}.{btopic}"
    now = datetime.now(UTC)
    top = now.replace(minute=0, second=0, microsecond=0)

    def ms(d: datetime) -> int:
        return int(d.timestamp() * 1000)

    def rec(i: int, ts: datetime, kind: str) -> dict:
        return {"partition": i % 2, "key": f"k{i % 5}".encode(), "value": f"{kind}{i}".encode(),
                "headers": [("n", str(i).encode()), ("kind", kind.encode())], "timestamp": ms(ts)}

    create_topic(source, btopic, partitions=2)
    create_topic(target, bremote, partitions=2)
    produce(source, btopic, [rec(i, top - 6 * HOUR + i * timedelta(minutes=15), "old") for i in range(16)])
    flows[f"{bsrc}->{tgt}"] = {
        "topics": f"{pfx}b\\..*", "schedule": "0 * * * *", "initial.position": "latest", "tasks.max": 2,
        "heartbeats.replication.enabled": False, "emit.heartbeats.enabled": False,
        "emit.checkpoints.enabled": False, "refresh.topics.interval.seconds": 3600,
        "refresh.groups.interval.seconds": 3600,
        # a copy task's spark-submit may start minutes after its plan took the lease on a loaded machine
        "lease.timeout.seconds": 900}
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target, bsrc: source}, flows)
    flow_id, bflow = cfg.flow(f"{src}->{tgt}").id, cfg.flow(f"{bsrc}->{tgt}")
    assert run_once(cfg, bflow, mode="direct").records == 0  # the flow starts at the end
    # records of [top-2h, top-1h) copied by a regular run: the flow is current for that interval
    produce(source, btopic, [rec(i, top - 2 * HOUR + i * timedelta(minutes=10), "live") for i in range(4)])
    assert run_once(cfg, bflow, mode="direct").records == 4
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
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # unpaused once the api-server answers
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        # a loaded machine's api-server answers a task's start in more than the default 5 s
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",  # no login for the health check
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

    db = home / "airflow.db"
    # four hourly runs: [top-5h, top-4h) .. [top-2h, top-1h), the last one already copied. The DAGs are
    # put in the database and the backfill created before the scheduler starts (see AirflowBackfill)
    airflow(env, "db", "migrate")
    airflow(env, "dags", "reserialize")
    backfill = AirflowBackfill(env, db, f"mirrorflow_replicate__{bflow.id}", top - 4 * HOUR, top - HOUR)
    backfill.create()
    log = open(tmp_path / "standalone.log", "w")  # noqa: SIM115 - the child writes it
    proc = subprocess.Popen([str(BIN / "airflow"), "standalone"], stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    ids = {k: f"mirrorflow_{k}__{flow_id}" for k in KINDS}
    ours = [*ids.values(), *(f"mirrorflow_{k}__{bflow.id}" for k in KINDS)]
    try:
        unpause_when_ready(env, proc, tmp_path / "standalone.log", db, port, ours)
        deadline = time.monotonic() + 900  # was 600 before the backfill's spark-submits shared the machine
        while True:
            assert proc.poll() is None, (tmp_path / "standalone.log").read_text()[-3000:]
            scheduler_alive(tmp_path / "standalone.log")
            done = {k: [r for r in runs(db, i) if r["state"] in ("success", "failed")] for k, i in ids.items()}
            failed = {k: [r["run_id"] for r in v if r["state"] == "failed"] for k, v in done.items()}
            assert not any(failed.values()), failed
            if len(done["replicate"]) >= 4 and done["sync"] and done["checkpoint"]:
                break
            assert time.monotonic() < deadline, {k: len(v) for k, v in done.items()}
            time.sleep(10)
        stop.set()
        producer.join(60)
        # one more scheduled replicate run, started after the last record: then everything is on the target
        stopped = datetime.now(UTC)
        while not [r for r in runs(db, ids["replicate"])
                   if r["state"] in ("success", "failed") and r["start"] and r["start"] > stopped] \
                or not backfill.complete():
            # the backfill's three spark-submits go one after another (minutes each on a loaded machine)
            assert time.monotonic() < deadline + 600, (
                "no further replicate run, or the backfill did not end", backfill.runs())
            scheduler_alive(tmp_path / "standalone.log")
            time.sleep(10)
        assert not [r for r in backfill.runs() if r[2] not in ("success", "running", "queued")], backfill.runs()
        copied = backfill.states()
        final = {k: runs(db, i) for k, i in ids.items()}
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
        # children still in its group once standalone exited (the api-server outlived a SIGTERM once;
        # its title replaces its environment, so kill_leftovers cannot tell it is ours)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        kill_leftovers(str(home))
    assert_copied(source, target, first, remote=f"{src}.{first}")
    assert_copied(source, target, later, remote=f"{src}.{later}")
    # the checkpoint DAG's heartbeats made `heartbeats` on the source: synced and copied, never a failed run
    assert consume_all(target, f"{src}.heartbeats")

    # `airflow backfill create`: every run planned (none skipped while the scheduled run held the lease:
    # they wait for it); the three history runs copied, the already-copied interval's run copied nothing
    dates = [top - 4 * HOUR + k * HOUR for k in range(4)]
    assert copied == {**{d: ("success", "success") for d in dates[:3]}, dates[3]: ("success", "skipped")}
    lo, hi = ms(top - 5 * HOUR), ms(top - 2 * HOUR)
    expected = sorted(r.content() for r in consume_all(source, btopic)
                      if lo <= r.timestamp < hi or r.value.startswith(b"live"))
    assert len(expected) == 16  # 12 of the 16 old records (4 per interval), the 4 live ones
    # exactly those, each once: keys, values, headers, timestamps
    assert sorted(r.content() for r in consume_all(target, bremote)) == expected
