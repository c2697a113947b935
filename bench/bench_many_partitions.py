"""Benchmark: a replicate run over many partitions with little traffic (the per-partition fixed cost).

    .venv/bin/python bench/bench_many_partitions.py [--topics 40] [--partitions 50] [--active 200]
                                                    [--tasks 8] [--mode submit|direct] [--seed active|all]

Starts its own local clusters A (source) and B (target) in a temporary home, creates TOPICS x
PARTITIONS partitions on A, syncs them to B (`mirrorflow sync`), writes one record to each of
ACTIVE partitions (`--seed all`: to every partition) and times, exactly-once on:

* `first`:  the first run (no unit state yet: every partition's first unit, its transactional.id
            never used; the partitions without records get an empty unit that anchors their
            progress) -- issue 23 item 3, goal <= 10 s;
* `idle`:   a run with nothing new (the per-run fixed cost only);
* `active`: a run after one new record in each of the same ACTIVE partitions (spread over all
            topics), once every partition has its progress: the baseline of `first`.

and prints them, the ratios first/active and active/idle and the cost per active partition. After
the first and the active run it checks that every record written is on B exactly once. The brokers
stop when the benchmark ends. It prints figures; it is not a test.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT)]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow.dev.cluster import DevClusters  # noqa: E402


def create_topics(cluster, names: list[str], partitions: int) -> None:
    a = AdminClient(cluster.client_config())
    for fut in a.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        fut.result(120)
    deadline = time.time() + 120
    while time.time() < deadline:
        md = a.list_topics(timeout=30).topics
        if all(n in md and len(md[n].partitions) == partitions for n in names):
            return
        time.sleep(0.5)
    raise SystemExit("topics did not appear")


def write_one(cluster, tps: list[tuple[str, int]], tag: str) -> None:
    p = Producer({**cluster.client_config(), "linger.ms": 20, "enable.idempotence": True})
    for t, part in tps:
        p.produce(t, f"{tag}-{t}-{part}".encode(), f"k-{part}".encode(), part)
    assert p.flush(120) == 0


def run(cfg_path: Path, mode: str):
    from mirrorflow import config as config_mod
    from mirrorflow.replication.runner import run_once

    cfg = config_mod.load(cfg_path)
    t0 = time.time()
    rep = run_once(cfg, cfg.flow("A->B"), mode=mode)
    took = time.time() - t0
    assert rep.ok, rep.render()
    return rep, took


def count_on_target(cluster, topics: list[str], partitions: int, tag: str) -> int:
    """Records on B whose value starts with `tag` (read_committed, whole topics)."""
    from tests.support import consume_all

    n = 0
    for t in topics:
        for r in consume_all(cluster, f"A.{t}", list(range(partitions))):
            if r.value.startswith(tag.encode()):
                n += 1
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=40)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--active", type=int, default=200, help="partitions that get one new record")
    ap.add_argument("--tasks", type=int, default=8, help="tasks.max")
    ap.add_argument("--mode", choices=["submit", "direct"], default="submit")
    ap.add_argument("--seed", choices=["active", "all"], default="active",
                    help="before the first run, one record in the ACTIVE partitions (default) or in every one")
    args = ap.parse_args()
    topics = [f"many.t{i:03d}" for i in range(args.topics)]
    all_tps = [(t, p) for p in range(args.partitions) for t in topics]  # round robin over topics
    active = all_tps[: args.active]

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-"))
    dev = DevClusters(home)
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        t0 = time.time()
        create_topics(a, topics, args.partitions)
        import yaml

        raw_cfg = {
            "clusters": {x.alias: x.client_config() for x in (a, b)},
            "defaults": {"topics": r"many\..*", "tasks.max": args.tasks, "sync.topic.acls.enabled": False},
            "flows": {"A->B": {}},
        }
        cfg_path = home / "bench.yaml"
        cfg_path.write_text(yaml.safe_dump(raw_cfg))
        os.environ["MIRRORFLOW_RUN_DIR"] = str(home / "runs")
        from mirrorflow import config as config_mod
        from mirrorflow.metadata.sync import sync_flow

        cfg = config_mod.load(cfg_path)
        assert sync_flow(cfg, "A->B").ok
        seeded = all_tps if args.seed == "all" else active
        write_one(a, seeded, "first")
        print(f"set-up: {len(all_tps):,} partitions created, synced, {len(seeded):,} seeded in {time.time() - t0:.1f} s")
        load = os.getloadavg()[0]
        first, first_s = run(cfg_path, args.mode)
        copied = count_on_target(b, sorted({t for t, _ in seeded}), args.partitions, "first")
        assert first.records == len(seeded) and copied == len(seeded), (first.records, copied, len(seeded))
        print(f"first run ({first.units:,} units, {first.records:,} records): {first_s:.1f} s "
              f"(load average {load:.1f} before, {os.getloadavg()[0]:.1f} after)")

        idle, idle_s = run(cfg_path, args.mode)
        write_one(a, active, "new")
        load_act = os.getloadavg()[0]
        act, act_s = run(cfg_path, args.mode)
        copied = count_on_target(b, sorted({t for t, _ in active}), args.partitions, "new")
        assert act.records == len(active) and copied == len(active), (act.records, copied, len(active))

        print(f"\n{len(all_tps):,} partitions ({args.topics} topics x {args.partitions}), tasks.max {args.tasks}, "
              f"mode {args.mode}, {os.cpu_count()} cores, exactly-once")
        print(f"{'run':8} {'seconds':>8} {'units':>6} {'records':>8}")
        print(f"{'first':8} {first_s:8.2f} {first.units:6d} {first.records:8d}   "
              f"ratio {first_s / act_s:.2f}x the active run (goal: <= 10 s); load average {load:.1f}")
        print(f"{'idle':8} {idle_s:8.2f} {idle.units:6d} {idle.records:8d}")
        print(f"{'active':8} {act_s:8.2f} {act.units:6d} {act.records:8d}   "
              f"ratio {act_s / idle_s:.2f}x the idle run; {(act_s - idle_s) / len(active) * 1000:.0f} ms per "
              f"active partition; load average {load_act:.1f}")
        print(f"first run: plan + report {first_s - first.spark_s:.2f} s, copy job {first.spark_s:.2f} s (of which "
              f"the units' copy phase {first.copy_phase_s:.2f} s)")
        print(f"active run: plan + report {act_s - act.spark_s:.2f} s, copy job {act.spark_s:.2f} s (of which the "
              f"units' copy phase {act.copy_phase_s:.2f} s; the rest is starting Spark and its tasks)")
        print(f"every new record is on B exactly once ({copied} of {len(active)})")
        return 0
    finally:
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
