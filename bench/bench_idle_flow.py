"""Benchmark: what a flow at rest costs Airflow, in worker-slot-seconds per hour.

    .venv/bin/python bench/bench_idle_flow.py [--tick 20] [--runs 3] [--flows 100]

Starts its own clusters A and B and an Airflow on SQLite in a temporary home, and a flow A->B with
nothing to replicate: its checkpoint DAG ticks every TICK seconds (emit.checkpoints and
sync.group.offsets intervals) and emits MM2 heartbeats every second (emit.heartbeats.interval.seconds
1, MM2's default). It runs the checkpoint DAG RUNS times with dag.test() (which runs the heartbeat
trigger in line, as the triggerer would) and adds up, per tick, the time each task held a worker
slot: `checkpoint` and `sync_group_offsets` (their task instance's duration) and `heartbeat`
(the `worker_s` it reports: its time before deferring plus its time after resuming; the wait in
between runs on the triggerer).

Baseline, measured in the same run: the heartbeat task as it was, a task that emitted the tick's
heartbeats itself and held its slot for the whole tick (mirrorflow.groups.heartbeat.emit_heartbeats_for
for TICK seconds, timed). Prints worker-slot-seconds per idle flow per hour for both, the ratio, and
what FLOWS idle flows need: average busy worker slots, and triggers on the triggerer (one per flow
while its tick's heartbeats are due; Airflow's default [triggerer] capacity is 1000). It prints
figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOME = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-idle-"))
os.environ.update(
    {
        "AIRFLOW_HOME": str(HOME / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME}/airflow.db",
    }
)
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT)]

import yaml  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tick", type=int, default=20, help="the checkpoint DAG's tick, seconds (default 20)")
    ap.add_argument("--runs", type=int, default=3, help="checkpoint DAG runs measured (after one warm-up)")
    ap.add_argument("--flows", type=int, default=100, help="idle flows to plan for")
    args = ap.parse_args()
    dev = DevClusters(HOME / "kafka")
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        raw = {
            "clusters": {x.alias: x.client_config() for x in (a, b)},
            "flows": {
                "A->B": {
                    "topics": r"idle\..*",
                    "emit.checkpoints.interval.seconds": args.tick,
                    "sync.group.offsets.enabled": True,
                    "sync.group.offsets.interval.seconds": args.tick,
                    "emit.heartbeats.interval.seconds": 1,
                    "sync.topic.acls.enabled": False,
                }
            },
        }
        cfg_path = HOME / "idle.yaml"
        cfg_path.write_text(yaml.safe_dump(raw))
        os.environ["MIRRORFLOW_CONFIG"] = str(cfg_path)

        from airflow.dag_processing.dagbag import DagBag
        from airflow.models.xcom import XComModel
        from airflow.utils import db
        from airflow.utils.session import create_session

        from mirrorflow import config as config_mod
        from mirrorflow.groups.heartbeat import emit_heartbeats_for

        db.resetdb(skip_init=False)
        cfg = config_mod.load(cfg_path)
        flow = cfg.flow("A->B")
        t0 = time.monotonic()
        emit_heartbeats_for(cfg, flow, args.tick)
        baseline_hb = time.monotonic() - t0
        print(f"baseline: the old heartbeat task held a worker slot {baseline_hb:.1f} s of a {args.tick} s tick")

        dag = DagBag(dag_folder=str(ROOT / "dags" / "mirrorflow_checkpoint.py")).get_dag("mirrorflow_checkpoint__A-B")
        per_tick: list[dict[str, float]] = []
        for i in range(args.runs + 1):
            started = time.monotonic()
            run = dag.test()
            wall = time.monotonic() - started
            tis = {ti.task_id: ti for ti in run.get_task_instances()}
            assert run.state == "success", {k: ti.state for k, ti in tis.items()}
            with create_session() as session:
                query = XComModel.get_many(
                    run_id=run.run_id, key="return_value", dag_ids=dag.dag_id, task_ids="heartbeat"
                )
                worker_hb = float(XComModel.deserialize_value(session.scalars(query).first())["worker_s"])
            slots = {
                "checkpoint": float(tis["checkpoint"].duration or 0),
                "sync_group_offsets": float(tis["sync_group_offsets"].duration or 0),
                "heartbeat": worker_hb,
            }
            print(
                f"  run {i}{' (warm-up)' if not i else ''}: {wall:5.1f} s wall; worker slot: "
                + ", ".join(f"{k} {v:.2f} s" for k, v in slots.items())
            )
            if i:
                per_tick.append(slots)
        ticks_per_hour = 3600 / args.tick
        others = statistics.median(t["checkpoint"] + t["sync_group_offsets"] for t in per_tick)
        hb_now = statistics.median(t["heartbeat"] for t in per_tick)
        now_h, before_h = (others + hb_now) * ticks_per_hour, (others + baseline_hb) * ticks_per_hour
        print(f"worker-slot-seconds per idle flow per hour (tick {args.tick} s, median of {args.runs} runs):")
        print(
            f"  now:      {now_h:8.0f}  (heartbeat {hb_now * ticks_per_hour:.0f}, checkpoint + group sync "
            f"{others * ticks_per_hour:.0f})"
        )
        print(f"  baseline: {before_h:8.0f}  (heartbeat {baseline_hb * ticks_per_hour:.0f}: the whole tick)")
        print(f"  ratio baseline/now: {before_h / now_h:.1f}x")
        print(
            f"{args.flows} idle flows: {args.flows * now_h / 3600:.1f} worker slots busy on average "
            f"(baseline {args.flows * before_h / 3600:.1f}); {args.flows} triggers on the triggerer "
            "(default capacity 1000)"
        )
    finally:
        dev.down()
        shutil.rmtree(HOME, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
