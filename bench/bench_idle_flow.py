"""Benchmark: what a flow at rest costs Airflow, in worker-slot-seconds per hour.

    .venv/bin/python bench/bench_idle_flow.py [--tick 20] [--runs 3] [--flows 100]

Starts its own clusters A and B and an Airflow on SQLite in a temporary home, and a flow A->B with
nothing to replicate: its checkpoint DAG ticks every TICK seconds (emit.checkpoints and
sync.group.offsets intervals), its heartbeat DAG emits MM2 heartbeats every second
(emit.heartbeats.interval.seconds 1, MM2's default) in windows of a minute. It runs each DAG RUNS
times with dag.test() (which runs the heartbeat trigger in line, as the triggerer would) and adds
up the time each task held a worker slot: `checkpoint` and `sync_group_offsets` per tick (their
task instance's duration) and `heartbeat` per window (the `worker_s` it reports: its time before
deferring plus its time after resuming; the wait in between runs on the triggerer).

Baseline, measured in the same run: a heartbeat task that emitted the window's heartbeats itself
and held its slot for the whole window (mirrorflow.groups.heartbeat.emit_heartbeats_for, timed).
Prints worker-slot-seconds per idle flow per hour for both, the ratio, and what FLOWS idle flows
need: average busy worker slots, and triggers on the triggerer (one per flow, always: its heartbeat
window; Airflow's default [triggerer] capacity is 1000). It prints figures; it is not a test.
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
    ap.add_argument("--runs", type=int, default=3, help="runs of each DAG measured (after one warm-up)")
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
        from mirrorflow_airflow.dag_builders.heartbeat import heartbeat_window

        db.resetdb(skip_init=False)
        cfg = config_mod.load(cfg_path)
        flow = cfg.flow("A->B")
        window = heartbeat_window(flow)
        t0 = time.monotonic()
        emit_heartbeats_for(cfg, flow, window)
        baseline_hb = time.monotonic() - t0
        print(
            f"baseline: a heartbeat task emitting itself held a worker slot {baseline_hb:.1f} s of a {window} s window"
        )

        def dag(kind: str):
            path = str(ROOT / "dags" / f"mirrorflow_{kind}.py")
            return DagBag(dag_folder=path).get_dag(f"mirrorflow_{kind}__A-B")

        checkpoints, heartbeats = dag("checkpoint"), dag("heartbeat")
        per_run: list[dict[str, float]] = []
        for i in range(args.runs + 1):
            started = time.monotonic()
            run = checkpoints.test()
            wall_cp = time.monotonic() - started
            tis = {ti.task_id: ti for ti in run.get_task_instances()}
            assert run.state == "success", {k: ti.state for k, ti in tis.items()}
            started = time.monotonic()
            beat = heartbeats.test()
            wall_hb = time.monotonic() - started
            assert beat.state == "success", beat.state
            with create_session() as session:
                query = XComModel.get_many(
                    run_id=beat.run_id, key="return_value", dag_ids=heartbeats.dag_id, task_ids="heartbeat"
                )
                worker_hb = float(XComModel.deserialize_value(session.scalars(query).first())["worker_s"])
            slots = {
                "checkpoint": float(tis["checkpoint"].duration or 0),
                "sync_group_offsets": float(tis["sync_group_offsets"].duration or 0),
                "heartbeat": worker_hb,
            }
            print(
                f"  run {i}{' (warm-up)' if not i else ''}: checkpoint DAG {wall_cp:5.1f} s wall, heartbeat DAG "
                f"{wall_hb:5.1f} s wall; worker slot: " + ", ".join(f"{k} {v:.2f} s" for k, v in slots.items())
            )
            if i:
                per_run.append(slots)
        ticks, windows = 3600 / args.tick, 3600 / window
        others = statistics.median(t["checkpoint"] + t["sync_group_offsets"] for t in per_run)
        hb_now = statistics.median(t["heartbeat"] for t in per_run)
        now_h, before_h = others * ticks + hb_now * windows, others * ticks + baseline_hb * windows
        print(
            f"worker-slot-seconds per idle flow per hour (checkpoint tick {args.tick} s, heartbeat window {window} s, "
            f"median of {args.runs} runs):"
        )
        print(
            f"  now:      {now_h:8.0f}  (heartbeat {hb_now * windows:.0f}, "
            f"checkpoint + group sync {others * ticks:.0f})"
        )
        print(f"  baseline: {before_h:8.0f}  (heartbeat {baseline_hb * windows:.0f}: the whole window)")
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
