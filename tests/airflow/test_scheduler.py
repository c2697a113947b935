"""The generated DAGs under Airflow's real scheduler: `airflow standalone` (scheduler,
dag-processor, api-server, triggerer; LocalExecutor on PostgreSQL, as production Airflow runs,
from the `airflow_postgres` fixture) runs the sync, replicate and checkpoint DAGs of a flow,
unpaused, for several schedule intervals while records arrive, a new topic appears mid-way and the
heartbeat DAG's heartbeats (its @continuous windows, on the triggerer) create `heartbeats` on the
source: every run succeeds (a topic the target lacks waits for the sync DAG instead of failing a
run), and every record arrives exactly once.

In the same Airflow (starting one costs minutes), beside the running scheduler, a backfill created
through the REST API (POST /api/v2/backfills) on the replicate DAG of a second flow, started at
`latest`, over four past hourly intervals: three copy exactly the history whose timestamps fall in
them, the fourth (already copied: the flow is current) copies nothing; then a
second backfill reprocessing them (reprocess_behavior `completed`) runs all four again and copies
nothing. On SQLite both POSTs were refused ("database is locked") and Airflow's
clean-up of the refused request broke runs under the scheduler (see AirflowBackfill)."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from mirrorflow_dev.processes import free_port
from mirrorflow.replication.run.runner import run_once
from tests.airflow.standalone import (
    airflow,
    airflow_env,
    database,
    query,
    runs,
    scheduler_alive,
    standalone,
    unpause_when_ready,
    utc,
)
from tests.integration.replicate_helpers import assert_copied
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow
KINDS = ("sync", "replicate", "checkpoint")


HOUR = timedelta(hours=1)


def rest(port: int, method: str, path: str, body: dict | None = None) -> dict:
    """Airflow's REST API (every request is an admin's: simple_auth_manager_all_admins)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=180) as r:
            return json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{method} {path}: {exc.code} {exc.read()[:2000]!r}") from exc


@dataclass
class AirflowBackfill:
    """Backfills of one replicate DAG, created through the REST API beside the running scheduler,
    as a user of the UI's Backfill form does. On SQLite that write conflicted with the scheduler's
    ("database is locked", 503) nearly every time on a loaded machine, and Airflow 3.3's clean-up of
    the refused request deleted runs under the scheduler (StaleDataError, "Task Instance not found"
    in unrelated DAGs) and left a backfill that never completed (778aead, ba23656): this runs on
    PostgreSQL, and the first POST must succeed."""

    db: str
    port: int
    dag_id: str
    from_date: datetime
    to_date: datetime

    def runs(self) -> list[tuple]:
        """(run_id, run_type, state, logical_date) of the DAG's runs."""
        return query(self.db, "SELECT run_id, run_type, state, logical_date FROM dag_run WHERE dag_id = ?",
                     self.dag_id)

    def states(self) -> dict[datetime, tuple[str, str, int]]:
        """Per backfill run's logical date: (plan state, copy state, plan's try number)."""
        rows = query(
            self.db,
            "SELECT r.logical_date, t.task_id, t.state, t.try_number FROM task_instance t JOIN dag_run r"
            " ON r.dag_id = t.dag_id AND r.run_id = t.run_id WHERE r.dag_id = ? AND r.run_type = 'backfill'",
            self.dag_id,
        )
        by = {(utc(d), task): (state, tries) for d, task, state, tries in rows}
        return {d: (by[(d, "plan")][0], by.get((d, "copy"), (None,))[0], by[(d, "plan")][1])
                for d, task in by if task == "plan"}

    def create(self, reprocess: str = "none", max_active_runs: int = 1) -> int:
        """POST /api/v2/backfills; the backfill's id, once its four runs exist."""
        made = rest(self.port, "POST", "/api/v2/backfills", {
            "dag_id": self.dag_id, "from_date": self.from_date.isoformat(), "to_date": self.to_date.isoformat(),
            "max_active_runs": max_active_runs, "reprocess_behavior": reprocess})
        ids = query(self.db, "SELECT dag_run_id FROM backfill_dag_run WHERE backfill_id = ?", made["id"])
        assert len([i for (i,) in ids if i is not None]) == 4, (made, ids, self.runs())
        return made["id"]

    def complete(self, backfill_id: int) -> bool:
        return rest(self.port, "GET", f"/api/v2/backfills/{backfill_id}")["completed_at"] is not None


def test_dags_under_the_real_scheduler(standalone_turn, tmp_path, source, target, unique, airflow_postgres):
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
    env = airflow_env(home, port, cfg.path, tmp_path / "runs", database=airflow_postgres())
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

    db = database(env)
    airflow(env, "db", "migrate")
    # four hourly runs: [top-5h, top-4h) .. [top-2h, top-1h), the last one already copied
    backfill = AirflowBackfill(db, port, f"mirrorflow_replicate__{bflow.id}", top - 4 * HOUR, top - HOUR)
    producer = threading.Thread(target=keep_producing, daemon=True)
    ids = {k: f"mirrorflow_{k}__{flow_id}" for k in KINDS}
    # the heartbeat DAG of the first flow too (the second's has heartbeats off: no schedule)
    ours = [*ids.values(), *(f"mirrorflow_{k}__{bflow.id}" for k in KINDS), f"mirrorflow_heartbeat__{flow_id}"]
    with standalone(env, tmp_path / "standalone.log") as proc:
        producer.start()
        try:
            unpause_when_ready(proc, tmp_path / "standalone.log", db, port, ours)
            first_backfill = backfill.create()  # beside the scheduler, which is starting the flow's runs
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
            # then the backfill's end, and a second backfill reprocessing its (copied) intervals
            stopped = datetime.now(UTC)
            copied: dict = {}
            reprocess = None
            while not [r for r in runs(db, ids["replicate"])
                       if r["state"] in ("success", "failed") and r["start"] and r["start"] > stopped] \
                    or reprocess is None or not backfill.complete(reprocess):
                # the backfill's three spark-submits go one after another (minutes each on a loaded machine)
                assert time.monotonic() < deadline + 600, (
                    "no further replicate run, or a backfill did not end", backfill.runs())
                scheduler_alive(tmp_path / "standalone.log")
                if reprocess is None and backfill.complete(first_backfill):
                    copied = backfill.states()
                    reprocess_started = time.monotonic()
                    # side by side: runs that copy nothing only wait for each other's lease a moment
                    reprocess = backfill.create("completed", max_active_runs=4)
                time.sleep(10)
            # what the reprocess adds to the test (four runs that copy nothing; polled every 10 s)
            print(f"reprocess backfill: {time.monotonic() - reprocess_started:.0f} s")
            assert not [r for r in backfill.runs() if r[2] not in ("success", "running", "queued")], backfill.runs()
            reprocessed = backfill.states()
            final = {k: runs(db, i) for k, i in ids.items()}
            assert all(r["state"] in ("success", "running", "queued") for v in final.values() for r in v), final
            scheduled = [r for r in final["replicate"] if r["run_id"].startswith("scheduled__")]
            assert len(scheduled) >= 5, final["replicate"]
        finally:
            stop.set()
    assert_copied(source, target, first, remote=f"{src}.{first}")
    assert_copied(source, target, later, remote=f"{src}.{later}")
    # the heartbeat DAG's heartbeats made `heartbeats` on the source: synced and copied, never a failed run
    assert consume_all(target, f"{src}.heartbeats")

    # the backfill: every run planned (none skipped while the scheduled run held the lease: they wait
    # for it); the three history runs copied, the already-copied interval's run copied nothing
    dates = [top - 4 * HOUR + k * HOUR for k in range(4)]
    assert copied == {**{d: ("success", "success", 1) for d in dates[:3]}, dates[3]: ("success", "skipped", 1)}
    # reprocessed: each run planned again (its second try) and copied nothing: the flow has it all
    assert reprocessed == {d: ("success", "skipped", 2) for d in dates}
    lo, hi = ms(top - 5 * HOUR), ms(top - 2 * HOUR)
    expected = sorted(r.content() for r in consume_all(source, btopic)
                      if lo <= r.timestamp < hi or r.value.startswith(b"live"))
    assert len(expected) == 16  # 12 of the 16 old records (4 per interval), the 4 live ones
    # exactly those, each once (the reprocess copied none twice): keys, values, headers, timestamps
    assert sorted(r.content() for r in consume_all(target, bremote)) == expected
