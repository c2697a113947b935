"""Benchmark: the wall time of a flow's scheduled DAGs' runs with little to do, under Airflow's real
scheduler, against the same DAGs of a baseline revision (default: `main`) in the same run.

    .venv/bin/python bench/bench_dag_runs.py [--rounds 5] [--dags sync,replicate,checkpoint]
                                             [--baseline main] [--spark connect|submit]

Starts in a temporary home its own clusters A (source) and B (target), a PostgreSQL (the harness'
mirrorflow_dev.postgres, as production Airflow runs on it), a Spark Connect server (`--spark
connect`, the default path: the config's spark.remote) and two `airflow standalone`s
(tests/airflow/standalone.py: scheduler, dag-processor, api-server, triggerer, LocalExecutor; each
on a database of its own on that PostgreSQL, Airflow's defaults otherwise):

* `now`: this checkout's dags/, plugins/ and include/ as they are on disk (copied), flow A->B;
* `base`: the same files of the BASELINE revision (`git archive`, imported first through PYTHONPATH),
  flow M->B (M: another alias of cluster A, so the two flows keep separate state on B).

Both flows have the demo's settings (include/config/mirrorflow.yaml: every MM2 interval at its
default, group offset sync on, tasks.max 2, replicate every 5 minutes) over a topic of 4
partitions and a consumer group with committed offsets. Each round triggers (REST API, a manual run:
every job of the DAG is due) each DAG kind once per contender, alternating which goes first, and
waits for the run's end; before a replicate run one new record goes to each partition (little to
copy). A run is triggered once no other run of the DAG is queued, so it starts next (scheduled runs
go on meanwhile: both DAG sets are unpaused, as in the demo); its wall time starts when it starts.

Prints each run's wall time (the run's start to its end, from the REST API), per DAG kind and
contender the median and min-max, the ratio baseline/now, where the time goes (each task's
queued / start / end offset in the run, medians) and the scheduled runs that ran meanwhile, with the
load average per round. Round 0 is a warm-up (Connect session, first topic creations), not counted.
It prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT)]

import yaml  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402
from mirrorflow_dev.postgres import DevPostgresServer  # noqa: E402
from mirrorflow_dev.processes import free_port  # noqa: E402
from mirrorflow_dev.spark import DevSparkServer  # noqa: E402

TOPIC, GROUP, PARTITIONS = "dagbench.orders", "dagbench-app", 4
KINDS = ("sync", "replicate", "checkpoint")
DONE = ("success", "failed")


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def when(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


@dataclass
class Airflow:
    """One `airflow standalone` and the flow whose DAGs it runs."""

    name: str
    flow_id: str
    port: int
    env: dict[str, str]
    log: Path
    runs: dict[str, list[dict]] = field(default_factory=dict)  # kind -> measured runs

    def dag_id(self, kind: str) -> str:
        return f"mirrorflow_{kind}__{self.flow_id}"

    def rest(self, method: str, path: str, body: dict | None = None) -> dict:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/v2{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        for attempt in range(5):
            try:
                with urllib.request.urlopen(req, timeout=120) as r:
                    return json.loads(r.read() or b"{}")
            except urllib.error.HTTPError as exc:
                if exc.code < 500 or attempt == 4:
                    raise SystemExit(f"{self.name}: {method} {path}: {exc.code} {exc.read()[:2000]!r}") from None
            except OSError:
                if attempt == 4:
                    raise
            time.sleep(3)
        raise AssertionError("unreachable")

    def queued(self, kind: str) -> bool:
        runs = self.rest("GET", f"/dags/{self.dag_id(kind)}/dagRuns?state=queued&limit=10")
        return bool(runs["total_entries"])

    def trigger_and_wait(self, kind: str, timeout: float = 900) -> dict:
        """A manual run of `kind` once no other run waits for its turn (max_active_runs=1: it starts
        next, a scheduled run still running is waited for outside its wall time); its timings."""
        from tests.airflow.standalone import scheduler_alive

        deadline = time.monotonic() + timeout
        while self.queued(kind):
            scheduler_alive(self.log)
            assert time.monotonic() < deadline, f"{self.name}: a run of {kind} stayed queued"
            time.sleep(1)
        dag = self.dag_id(kind)
        run_id = self.rest("POST", f"/dags/{dag}/dagRuns", {"logical_date": None})["dag_run_id"]
        while True:
            run = self.rest("GET", f"/dags/{dag}/dagRuns/{run_id}")
            if run["state"] in DONE:
                break
            scheduler_alive(self.log)
            assert time.monotonic() < deadline, f"{self.name}: run {run_id} of {dag} did not end"
            time.sleep(0.5)
        return self.timings(run)

    def timings(self, run: dict) -> dict:
        """The run's wall time and each task's queued / start / end offset from the run's start."""
        dag, run_id = run["dag_id"], run["dag_run_id"]
        tis = self.rest("GET", f"/dags/{dag}/dagRuns/{run_id}/taskInstances")["task_instances"]
        start, end = when(run["start_date"]), when(run["end_date"])
        tasks = {}
        for ti in tis:
            q, s, e = (when(ti.get(k)) for k in ("queued_when", "start_date", "end_date"))
            tasks[ti["task_id"]] = {
                "state": ti["state"],
                "queued": None if q is None or start is None else q - start,
                "start": None if s is None or start is None else s - start,
                "end": None if e is None or start is None else e - start,
            }
        return {
            "run_id": run_id,
            "type": run["run_type"],
            "state": run["state"],
            "wall": (end - start) if start and end else float("nan"),
            "tasks": tasks,
        }

    def scheduled(self, kind: str, since: float) -> list[dict]:
        runs = self.rest("GET", f"/dags/{self.dag_id(kind)}/dagRuns?run_type=scheduled&limit=100")["dag_runs"]
        return [self.timings(r) for r in runs if r["state"] in DONE and (when(r["start_date"]) or 0) >= since]


def seed(a) -> None:
    """The flow's topic with 100 records and a consumer group that committed offsets on it."""
    admin = AdminClient(a.client_config())
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(60)
    while len(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions) != PARTITIONS:
        time.sleep(0.2)
    new_records(a, 100)
    c = Consumer({**a.client_config(), "group.id": GROUP, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(TOPIC, p, 20) for p in range(PARTITIONS)], asynchronous=False)
    c.close()


def new_records(a, n: int = PARTITIONS) -> None:
    p = Producer({**a.client_config(), "enable.idempotence": True})
    for i in range(n):
        p.produce(TOPIC, b"v%d" % i, b"k%d" % i, i % PARTITIONS)
    assert p.flush(60) == 0


def flow_config(clusters: dict[str, dict], source: str, remote: str | None) -> dict:
    """The demo's flow (include/config/mirrorflow.yaml) over the bench's topic and group."""
    cfg: dict = {
        "clusters": clusters,
        "defaults": {"replication.factor": -1, "tasks.max": 2},
        "flows": {
            f"{source}->B": {
                "enabled": True,
                "topics": r"dagbench\..*",
                "groups": "dagbench-.*",
                "sync.group.offsets.enabled": True,
                "schedule": "*/5 * * * *",
            }
        },
        "spark": {"master": "local[2]"},
    }
    if remote:
        cfg["spark"]["remote"] = remote
    return cfg


TREE = ("include", "devtools", "dags", "plugins")  # what an Airflow of the bench imports and reads


def export(ref: str | None, dest: Path) -> None:
    """The files Airflow needs of revision `ref` (git archive: no worktree, nothing registered in the
    repository), or of this checkout as it is on disk (None; a copy, so edits during a run change nothing)."""
    if ref is None:
        for part in TREE:
            shutil.copytree(ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
        return
    dest.mkdir(parents=True)
    cmd = ["git", "-C", str(ROOT), "archive", ref, *TREE]
    archive = subprocess.run(cmd, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def fmt(xs: list[float]) -> str:
    if not xs:
        return "-"
    return f"{statistics.median(xs):6.1f} s ({min(xs):.1f}-{max(xs):.1f}, n={len(xs)})"


def breakdown(runs: list[dict]) -> str:
    """Per task: median queued / start / end offsets in the run (s); skipped tasks marked."""
    tasks = sorted(
        {t for r in runs for t in r["tasks"]},
        key=lambda t: statistics.median([r["tasks"][t]["start"] or 0 for r in runs if t in r["tasks"]]),
    )
    out = []
    for t in tasks:
        cells = {}
        for k in ("queued", "start", "end"):
            xs = [r["tasks"][t][k] for r in runs if t in r["tasks"] and r["tasks"][t][k] is not None]
            cells[k] = f"{statistics.median(xs):.1f}" if xs else "-"
        states = sorted({r["tasks"][t]["state"] for r in runs if t in r["tasks"]})
        out.append(f"{t} q{cells['queued']}/s{cells['start']}/e{cells['end']} [{','.join(states)}]")
    return "; ".join(out)


def main() -> int:
    from tests.airflow.standalone import airflow_env, standalone, unpause_when_ready, write

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="measured rounds after a warm-up round (default 5)")
    ap.add_argument("--dags", default=",".join(KINDS), help="DAG kinds, comma-separated (default all three)")
    ap.add_argument("--baseline", default="main", help="git revision of the baseline's DAGs ('' : none)")
    ap.add_argument("--spark", default="connect", choices=["connect", "submit"], help="the copy's Spark path")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.dags.split(",") if k.strip()]
    if set(kinds) - set(KINDS):
        ap.error(f"unknown DAG kind(s): {sorted(set(kinds) - set(KINDS))}")

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-dags-"))
    home.chmod(0o755)  # PostgreSQL (as `postgres` when we are root) must reach its data directory
    dev, spark, pg = DevClusters(home), DevSparkServer(home), DevPostgresServer(home)
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        pg.up(port=free_port(), attached=True)
        remote = None
        if args.spark == "connect":
            t0 = time.time()
            remote = spark.up(port=free_port(), master="local[2]", attached=True).remote  # 15002 is shared
            print(f"Spark Connect server {remote} up in {time.time() - t0:.0f} s")
        seed(a)
        conns = {"A": a.client_config(), "M": a.client_config(), "B": b.client_config()}
        export(None, home / "now")
        contenders = [("now", "A", home / "now")]
        if args.baseline:
            export(args.baseline, home / "base")
            contenders.append((f"base ({args.baseline})", "M", home / "base"))
        airflows: list[Airflow] = []
        for name, source, tree in contenders:
            ah = home / f"airflow-{source}"
            ah.mkdir()
            cfg_path = home / f"{source}.yaml"
            cfg_path.write_text(yaml.safe_dump(flow_config(conns, source, remote)))
            port = free_port()
            paths = [str(tree / "include"), str(tree / "devtools"), os.environ.get("PYTHONPATH", "")]
            env = airflow_env(
                ah,
                port,
                cfg_path,
                home / f"runs-{source}",
                database=pg.create_database(f"airflow_{source.lower()}"),
                AIRFLOW__CORE__DAGS_FOLDER=str(tree / "dags"),
                AIRFLOW__CORE__PLUGINS_FOLDER=str(tree / "plugins"),
                PYTHONPATH=os.pathsep.join(p for p in paths if p),
                # the scheduler's and triggerer's log servers: not Airflow's fixed 8793/8794 (shared machine)
                AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(free_port()),
                AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(free_port()),
            )
            airflows.append(Airflow(name, f"{source}-B", port, env, home / f"standalone-{source}.log"))
        t0 = time.time()
        migrations = [
            subprocess.Popen(
                [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
                env=af.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for af in airflows
        ]
        for m in migrations:
            assert m.wait(900) == 0, m.stderr.read()[-3000:] if m.stderr else ""
        print(f"Airflow databases migrated in {time.time() - t0:.0f} s")
        with contextlib.ExitStack() as stack:
            for af in airflows:
                proc = stack.enter_context(standalone(af.env, af.log))
                db = af.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
                unpause_when_ready(proc, af.log, db, af.port, [af.dag_id(k) for k in KINDS])
                # every other DAG of the flow too (a heartbeat DAG of its own, where there is one), as the demo does
                ours = f"mirrorflow\\_%\\_\\_{af.flow_id}"
                write(db, "UPDATE dag SET is_paused = ? WHERE dag_id LIKE ?", False, ours)
            started = time.time()
            print(f"{len(airflows)} Airflow standalone(s) up; load average {load()}")
            loads = []
            for rnd in range(args.rounds + 1):
                order = airflows if rnd % 2 == 0 else airflows[::-1]
                for kind in kinds:
                    for af in order:
                        if kind == "replicate":
                            new_records(a)
                        t = af.trigger_and_wait(kind)
                        label = "warm-up" if rnd == 0 else f"round {rnd}"
                        print(
                            f"  {label:8} {kind:10} {af.name:14} {t['state']:7} {t['wall']:6.1f} s  "
                            f"({breakdown([t])})  load {load()}",
                            flush=True,
                        )
                        if rnd:
                            af.runs.setdefault(kind, []).append(t)
                loads.append(load())
            print(
                f"\n{args.rounds} rounds after a warm-up; {os.cpu_count()} cores; load average per round: "
                + ", ".join(loads)
            )
            print("wall time of a manually triggered run (run start to end, REST API): median (min-max)")
            for kind in kinds:
                print(f"\n{kind}:")
                for af in airflows:
                    walls = [r["wall"] for r in af.runs[kind] if r["state"] == "success"]
                    failed = [r["run_id"] for r in af.runs[kind] if r["state"] != "success"]
                    print(f"  {af.name:18} {fmt(walls)}" + (f"  FAILED runs: {failed}" if failed else ""))
                    print(f"  {'':18} tasks (median s from the run's start): {breakdown(af.runs[kind])}")
                    sched = af.scheduled(kind, started)
                    if sched:
                        print(f"  {'':18} scheduled runs meanwhile: {fmt([r['wall'] for r in sched])}")
                if len(airflows) == 2:
                    now = statistics.median(r["wall"] for r in airflows[0].runs[kind])
                    base = statistics.median(r["wall"] for r in airflows[1].runs[kind])
                    goal = "met" if now <= 10 else "MISSED"
                    print(f"  baseline/now: {base / now:.1f}x; now's median {now:.1f} s (goal <= 10 s: {goal})")
        return 0
    finally:
        spark.down()
        pg.down()
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
