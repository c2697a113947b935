"""Benchmark: the fixed cost of a scheduled run with little to copy, spark-submit vs a running Spark Connect server.

    .venv/bin/python bench/bench_fixed_cost.py [--partitions 4] [--runs 5] [--tasks 4]

Starts its own local clusters A (source) and B (target) and a local Spark Connect server
(`mirrorflow dev spark up`, local[*]) in a temporary home. A flow A->B replicates one topic of
PARTITIONS partitions, exactly-once. For each mode it does one warm-up run, then RUNS runs, each
after one new record in every partition:

* `submit`:  spark-submit per run (the default; the baseline);
* `connect`: the same plan on the running Connect server (`spark.remote`), run in this process;
* `connect-cli`: the same as a new `mirrorflow replicate --once` process (Python start and imports in).

It prints per mode the median of the whole run and of its phases -- plan (lease, state topics,
planning), job (Spark job: application start + copy) and report (source ends, report, lease
release) -- and the ratio submit/connect; the Connect server's one-time start-up is printed apart.
After every run it checks that the new records are on B exactly once. It prints figures; it is
not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT)]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402
from mirrorflow_dev.spark import DevSparkServer  # noqa: E402

TOPIC = "fixed.cost"


@dataclass
class Timing:
    total: float
    plan: float
    job: float
    report: float
    records: int
    on_server: float = 0.0  # connect: the part of `job` spent in the server's job (addArtifacts .. collect)
    startup: float = 0.0  # connect-cli: process start and imports before the run begins


def create_topic(cluster, partitions: int) -> None:
    a = AdminClient(cluster.client_config())
    a.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(60)
    while len(a.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions) != partitions:
        time.sleep(0.2)


def write_one_each(cluster, partitions: int, tag: str) -> None:
    p = Producer({**cluster.client_config(), "enable.idempotence": True})
    for part in range(partitions):
        p.produce(TOPIC, f"{tag}-{part}".encode(), f"k-{part}".encode(), part)
    assert p.flush(60) == 0


def cli_run(cfg_path: Path) -> Timing:
    """`mirrorflow replicate --once` as a user runs it: a new process (Python start and imports
    included); its report's duration splits the wall time into in-run and process start-up."""
    cmd = [str(Path(sys.executable).parent / "mirrorflow"), "--config", str(cfg_path), "replicate"]
    t0 = time.time()
    proc = subprocess.run([*cmd, "--flow", "A->B", "--once", "--json"], capture_output=True, text=True, timeout=600)
    total = time.time() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    return Timing(total, 0.0, 0.0, 0.0, out["records"], on_server=0.0, startup=total - out["duration_s"])


def timed_run(cfg_path: Path, mode: str) -> Timing:
    """One `replicate --once` run through the runner, with its phase boundaries from the run log."""
    from mirrorflow import config as config_mod
    from mirrorflow.replication.run.runner import run_once

    cfg = config_mod.load(cfg_path)
    marks: dict[str, float] = {}

    def log(line: str) -> None:
        if line.startswith("planned "):
            marks["planned"] = time.time()
        elif line.startswith("Spark Connect job:"):  # the job on the server, without the client's set-up
            marks["on_server"] = float(line.rsplit(" in ", 1)[1].split()[0])

    t0 = time.time()
    rep = run_once(cfg, cfg.flow("A->B"), mode=mode, log=log)
    total = time.time() - t0
    assert rep.ok, rep.render()
    plan = marks["planned"] - t0
    return Timing(total, plan, rep.spark_s, total - plan - rep.spark_s, rep.records, marks.get("on_server", 0.0))


def count_on_target(cluster, tag: str) -> int:
    from tests.support import consume_all

    return sum(1 for r in consume_all(cluster, f"A.{TOPIC}") if r.value.startswith(tag.encode()))


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def median(ts: list[Timing], attr: str) -> float:
    return statistics.median(getattr(t, attr) for t in ts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5, help="timed runs per mode (after one warm-up)")
    ap.add_argument("--tasks", type=int, default=4, help="tasks.max")
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-"))
    dev = DevClusters(home)
    spark = DevSparkServer(home)
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        t0 = time.time()
        server = spark.up(master="local[*]", attached=True)
        print(f"Spark Connect server {server.remote} started in {time.time() - t0:.1f} s (once, not per run)")
        create_topic(a, args.partitions)
        import yaml

        raw = {
            "clusters": {x.alias: x.client_config() for x in (a, b)},
            "defaults": {
                "topics": r"fixed\..*",
                "tasks.max": args.tasks,
                "sync.topic.acls.enabled": False,
                "heartbeats.replication.enabled": False,
            },
            "flows": {"A->B": {}},
            "spark": {"master": "local[*]"},
        }
        cfg_path = home / "bench.yaml"
        cfg_path.write_text(yaml.safe_dump(raw))
        os.environ["MIRRORFLOW_RUN_DIR"] = str(home / "runs")
        from mirrorflow import config as config_mod
        from mirrorflow.metadata.sync import sync_flow

        assert sync_flow(config_mod.load(cfg_path), "A->B").ok
        write_one_each(a, args.partitions, "seed")
        timed_run(cfg_path, "direct")  # every partition gets its progress: the runs below are steady state

        loads = [load()]
        results: dict[str, list[Timing]] = {}
        for mode in ("submit", "connect", "connect-cli"):
            if mode == "connect":
                raw["spark"]["remote"] = server.remote
                cfg_path.write_text(yaml.safe_dump(raw))
            runs: list[Timing] = []
            for i in range(args.runs + 1):
                tag = f"{mode}-{i}"
                write_one_each(a, args.partitions, tag)
                t = cli_run(cfg_path) if mode == "connect-cli" else timed_run(cfg_path, mode)
                copied = count_on_target(b, tag)
                assert t.records == args.partitions == copied, (mode, i, t.records, copied)
                if i:  # the first run is the warm-up
                    runs.append(t)
                print(
                    f"  {mode:11} run {i}{' (warm-up)' if not i else '':10} {t.total:6.2f} s  "
                    f"plan {t.plan:5.2f}  job {t.job:5.2f}  report {t.report:5.2f}"
                    + (f"  (of the job: {t.on_server:.2f} s on the server)" if t.on_server else "")
                    + (f"  (process start-up and imports {t.startup:.2f} s)" if t.startup else "")
                    + f"  load average {load()}"
                )
            results[mode] = runs
            loads.append(load())

        print(
            f"\n{args.partitions} partitions, 1 new record each per run, tasks.max {args.tasks}, exactly-once, "
            f"{os.cpu_count()} cores; medians of {args.runs} runs after a warm-up; load average (1/5/15 min) "
            + " -> ".join(loads)
        )
        print(f"{'mode':11} {'total':>7} {'plan':>6} {'job':>6} {'report':>7}")
        for mode, runs in results.items():
            print(
                f"{mode:11} {median(runs, 'total'):7.2f} {median(runs, 'plan'):6.2f} {median(runs, 'job'):6.2f} "
                f"{median(runs, 'report'):7.2f}" + ("   (baseline)" if mode == "submit" else "")
            )
        sub = median(results["submit"], "total")
        for mode in ("connect", "connect-cli"):
            con = median(results[mode], "total")
            print(
                f"ratio {mode}: {con / sub:.2f}x the time of a spark-submit run ({sub / con:.1f}x faster); "
                f"goal <= 3 s: {'met' if con <= 3.0 else 'missed'} ({con:.2f} s)"
            )
        print("(connect: the run in this process, imports warm; connect-cli: a new `mirrorflow replicate` process)")
        print(f"every run's {args.partitions} new records are on B exactly once")
        return 0
    finally:
        spark.down()
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
