"""Benchmark: copy throughput on a Spark standalone cluster with 1 and with 2 workers (scaling out).

    .venv/bin/python bench/bench_scaling.py [--records 400000] [--size 1024] [--partitions 8]
        [--tasks 8] [--layouts 1x1,2x1] [--runs 1]

Starts its own local clusters A (source) and B (target) in a temporary home and seeds N records of
SIZE bytes over P partitions on A. Then, for each layout WxC (W workers of C cores, 1 GB each), it
starts a real Spark standalone cluster on 127.0.0.1 (`mirrorflow_dev.spark.DevStandalone`: PySpark's
own Master and Worker classes, as `tests/integration/test_replicate_standalone.py` does), copies the
whole topic with `replicate --once` through spark-submit to that master (exactly-once, tasks.max
TASKS: one Spark task per planned task, W x C of them at a time) into a flow of its own (source
aliases L1, L2, ... name the same cluster A, so each layout has its own state and target topic),
and stops the cluster. A layout may be named more than once (`1x1,2x1,1x1,2x1`: interleaved, so a
load swing on the shared machine hits both); each layout's figure is the median of its copies, and
`--runs R` repeats each copy R times on the same cluster (a new flow each time). Before the first
layout a warm-up copy (one record per partition, another flow, no Spark) makes the target's
transaction coordinator (`__transaction_state`) and the brokers' first transactional producers set-up,
not part of the first layout's figure.

It prints per layout the whole run, the copy phase (first unit start to last unit end: without
Spark's start-up), MB/s, MB/s per concurrent task slot, and each layout's copy-phase speed-up over
the first layout (the figure: 2 workers against 1), with the load average. Every layout
runs on the same machine as the brokers: on 2 cores a second worker adds slots, not CPU, so the
ratio says what this machine allows; docs/scaling.md turns the figures into a sizing model. It
prints figures; it is not a test (it fails only when a copy fails or copies the wrong count).
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
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT)]

from bench.bench_replicate import create, load, seed  # noqa: E402
from mirrorflow_dev.cluster import DevClusters  # noqa: E402
from mirrorflow_dev.spark import DevStandalone  # noqa: E402

TOPIC = "scale.records"


def parse_layouts(text: str) -> list[tuple[int, int]]:
    out = []
    for item in text.split(","):
        w, _, c = item.strip().partition("x")
        out.append((int(w), int(c or 1)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=8, help="tasks.max (Spark tasks of the copy job)")
    ap.add_argument("--layouts", default="1x1,2x1", help="WORKERSxCORES, comma-separated (the first is the baseline)")
    ap.add_argument("--runs", type=int, default=1, help="copies per layout (the median is kept)")
    ap.add_argument("--worker-memory", default="1g")
    args = ap.parse_args()
    n, size, parts = args.records, args.size, args.partitions
    layouts = parse_layouts(args.layouts)

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-"))
    dev = DevClusters(home)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["MIRRORFLOW_RUN_DIR"] = str(home / "runs")
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        create(a, TOPIC, parts)
        t0 = time.time()
        seed(a, TOPIC, n, size, parts)
        print(f"seeded {n:,} records of {size} bytes over {parts} partitions in {time.time() - t0:.1f} s")

        import yaml

        from mirrorflow import config as config_mod
        from mirrorflow.replication.run.runner import run_once

        flows = [f"L{i + 1}" for i in range(len(layouts) * args.runs)]
        for alias in flows:
            create(b, f"{alias}.{TOPIC}", parts)
        raw = {
            "clusters": {**{x: a.client_config() for x in [*flows, "W"]}, "B": b.client_config()},
            "defaults": {
                "topics": r"scale\..*",
                "tasks.max": args.tasks,
                "heartbeats.replication.enabled": False,
                "emit.heartbeats.enabled": False,
                "sync.topic.acls.enabled": False,
            },
            "flows": {**{f"{x}->B": {} for x in flows}, "W->B": {"topics": r"warm\..*"}},
        }
        cfg_path = home / "bench.yaml"
        cfg_path.write_text(yaml.safe_dump(raw))
        cfg = config_mod.load(cfg_path)

        create(a, "warm.up", parts)
        create(b, "W.warm.up", parts)
        seed(a, "warm.up", parts, 16, parts)
        t0 = time.time()
        warm = run_once(cfg, cfg.flow("W->B"), mode="direct")
        assert warm.ok and warm.records == parts, warm.render()
        print(f"warm-up copy (direct, {parts} records): {time.time() - t0:.1f} s, set-up, not a figure")

        mb = n * size / 1e6
        measured: dict[str, list[tuple[float, float, str]]] = {}  # layout -> [(whole, copy, loads)]
        next_flow = iter(flows)
        for workers, cores in layouts:
            standalone = DevStandalone(home / f"spark-{workers}x{cores}")
            t0 = time.time()
            cluster = standalone.up(workers=workers, cores=cores, memory=args.worker_memory)
            print(
                f"standalone cluster {cluster.master}: {workers} worker(s) x {cores} core(s), "
                f"up in {time.time() - t0:.1f} s"
            )
            try:
                for _ in range(args.runs):
                    alias = next(next_flow)
                    t0 = time.time()
                    rep = run_once(cfg, cfg.flow(f"{alias}->B"), mode="submit", master=cluster.master)
                    whole = time.time() - t0
                    assert rep.ok and rep.records == n, (alias, rep.records, n, rep.render())
                    measured.setdefault(f"{workers}x{cores}", []).append((whole, rep.copy_phase_s, load()))
                    print(
                        f"  {workers}x{cores}: whole {whole:.2f} s, copy phase {rep.copy_phase_s:.2f} s "
                        f"({mb / rep.copy_phase_s:.1f} MB/s; {rep.units} units; load average {load()})"
                    )
            finally:
                standalone.down(cluster)

        print(
            f"\n{n:,} records x {size} B = {mb:,.0f} MB over {parts} partitions, exactly-once, tasks.max {args.tasks}, "
            f"spark-submit to a standalone master on this machine ({os.cpu_count()} cores; brokers on it too)"
        )
        print(
            f"{'workers x cores':16} {'slots':>5} {'whole s':>8} {'copy s':>7} {'MB/s':>7} {'MB/s/slot':>9} "
            f"{'speed-up':>8}  load average (1/5/15 min) after each copy; medians of the layout's copies"
        )
        results = []
        for name, runs in measured.items():
            w, _, c = name.partition("x")
            loads_txt = ", ".join(x[2] for x in runs)
            median_whole = statistics.median(x[0] for x in runs)
            median_copy = statistics.median(x[1] for x in runs)
            results.append((name, int(w) * int(c), median_whole, median_copy, loads_txt))
        base_copy = results[0][3]
        for name, slots, whole, copy, loads_txt in results:
            print(
                f"{name:16} {slots:5d} {whole:8.2f} {copy:7.2f} {mb / copy:7.1f} {mb / copy / slots:9.1f} "
                f"{base_copy / copy:7.2f}x  {loads_txt}"
            )
        if len(results) > 1:
            name, _, _, copy, _ = results[1]
            print(
                f"ratio {name} / {results[0][0]} (copy phase speed): {base_copy / copy:.2f}x "
                f"(ideal {results[1][1] / results[0][1]:.0f}x)"
            )
        return 0
    finally:
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
