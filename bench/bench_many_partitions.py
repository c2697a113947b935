"""Benchmark: a replicate run over many partitions with little traffic (the per-partition fixed cost).

    .venv/bin/python bench/bench_many_partitions.py [--topics 40] [--partitions 50] [--active 200]
                                                    [--tasks 8] [--mode submit|connect|direct]
                                                    [--seed active|all] [--no-warm-up]
                                                    [--spark-master local[*]]

Starts its own local clusters A (source) and B (target) in a temporary home (and, with `--mode
connect`, a local Spark Connect server), creates TOPICS x PARTITIONS partitions on A, syncs them to B
(`mirrorflow sync`), writes one record to each of ACTIVE partitions (`--seed all`: to every
partition) and times, exactly-once on:

* `first`:  the first run (no unit state yet: every partition's first unit, its transactional.id
            never used; the partitions without records get an empty unit that anchors their
            progress) -- goal <= 10 s;
* `idle`:   a run with nothing new (the per-run fixed cost only);
* `active`: a run after one new record in each of the same ACTIVE partitions (spread over all
            topics), once every partition has its progress: the baseline of `first`.

and prints them, the ratios first/active and active/idle and the cost per active partition, and
the first run's phases (creating the flow's state topics, which only a flow's very first run does,
plan and report, the copy job). After the first and the active run it checks that every record
written is on B exactly once. Before the first run a warm-up replicates one record of another topic
with another flow (`W->B`, W being A under another alias) in the same mode: what a deployment that
already runs has (the clusters' transaction and group coordinators loaded, the Spark Connect
server's Python workers started), not the flow's state (`--no-warm-up` skips it). The brokers stop
when the benchmark ends. It prints figures; it is not a test.
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
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT)]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402


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


STATE_TOPICS_S: list[float] = []  # how long each run's ensure_state_topics took


def time_state_topics() -> None:
    """Record how long the runner's ensure_state_topics takes (a flow's first run creates them)."""
    from mirrorflow.replication import runner

    inner = runner.ensure_state_topics

    def timed(*a, **k):
        t0 = time.time()
        try:
            return inner(*a, **k)
        finally:
            STATE_TOPICS_S.append(time.time() - t0)

    runner.ensure_state_topics = timed


def run(cfg_path: Path, mode: str, flow: str = "A->B"):
    from mirrorflow import config as config_mod
    from mirrorflow.replication.runner import run_once

    cfg = config_mod.load(cfg_path)
    STATE_TOPICS_S.clear()
    t0 = time.time()
    rep = run_once(cfg, cfg.flow(flow), mode=mode)
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
    ap.add_argument("--mode", choices=["submit", "connect", "direct"], default="submit")
    ap.add_argument("--spark-master", default="local[*]",
                    help="the Spark master of submit and connect (local[N]: N task slots; tasks.max needs as many "
                         "to run its tasks at once)")
    ap.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                    help="no warm-up run of another flow before the first run")
    ap.add_argument("--seed", choices=["active", "all"], default="active",
                    help="before the first run, one record in the ACTIVE partitions (default) or in every one")
    args = ap.parse_args()
    topics = [f"many.t{i:03d}" for i in range(args.topics)]
    all_tps = [(t, p) for p in range(args.partitions) for t in topics]  # round robin over topics
    active = all_tps[: args.active]

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-"))
    dev = DevClusters(home)
    spark = None
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        t0 = time.time()
        create_topics(a, topics, args.partitions)
        import yaml

        raw_cfg = {
            "clusters": {**{x.alias: x.client_config() for x in (a, b)}, "W": a.client_config()},
            "defaults": {"topics": r"many\..*", "tasks.max": args.tasks, "sync.topic.acls.enabled": False},
            "flows": {"A->B": {}, "W->B": {"topics": r"warm\..*"}},
            "spark": {"master": args.spark_master},
        }
        if args.mode == "connect":
            from mirrorflow_dev.spark import DevSparkServer

            spark = DevSparkServer(home)
            t1 = time.time()
            server = spark.up(master=args.spark_master, attached=True)
            raw_cfg["spark"] = {"remote": server.remote}
            print(f"Spark Connect server {server.remote} started in {time.time() - t1:.1f} s (once, not per run)")
        time_state_topics()
        cfg_path = home / "bench.yaml"
        cfg_path.write_text(yaml.safe_dump(raw_cfg))
        os.environ["MIRRORFLOW_RUN_DIR"] = str(home / "runs")
        from mirrorflow import config as config_mod
        from mirrorflow.metadata.sync import sync_flow

        cfg = config_mod.load(cfg_path)
        assert sync_flow(cfg, "A->B").ok
        if args.warm_up:
            create_topics(a, ["warm.t"], 1)
            assert sync_flow(cfg, "W->B").ok
            write_one(a, [("warm.t", 0)], "warm")
            warm, warm_s = run(cfg_path, args.mode, "W->B")
            print(f"warm-up: flow W->B, 1 partition, {warm.records} record, {args.mode}: {warm_s:.1f} s")
        seeded = all_tps if args.seed == "all" else active
        write_one(a, seeded, "first")
        print(f"set-up: {len(all_tps):,} partitions created, synced, {len(seeded):,} seeded "
              f"in {time.time() - t0:.1f} s")
        load = os.getloadavg()[0]
        first, first_s = run(cfg_path, args.mode)
        first_topics_s = sum(STATE_TOPICS_S)
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

        spark_at = "" if args.mode == "direct" else f" on {args.spark_master}"
        print(f"\n{len(all_tps):,} partitions ({args.topics} topics x {args.partitions}), tasks.max {args.tasks}, "
              f"mode {args.mode}{spark_at}, {os.cpu_count()} cores, exactly-once")
        print(f"{'run':8} {'seconds':>8} {'units':>6} {'records':>8}")
        print(f"{'first':8} {first_s:8.2f} {first.units:6d} {first.records:8d}   "
              f"ratio {first_s / act_s:.2f}x the active run (goal: <= 10 s); load average {load:.1f}")
        print(f"{'idle':8} {idle_s:8.2f} {idle.units:6d} {idle.records:8d}")
        print(f"{'active':8} {act_s:8.2f} {act.units:6d} {act.records:8d}   "
              f"ratio {act_s / idle_s:.2f}x the idle run; {(act_s - idle_s) / len(active) * 1000:.0f} ms per "
              f"active partition; load average {load_act:.1f}")
        print(f"first run: creating the flow's state topics {first_topics_s:.2f} s, plan + report "
              f"{first_s - first.spark_s - first_topics_s:.2f} s, copy job {first.spark_s:.2f} s (of which the units' "
              f"copy phase {first.copy_phase_s:.2f} s); without the state topics {first_s - first_topics_s:.2f} s")
        print(f"active run: plan + report {act_s - act.spark_s:.2f} s, copy job {act.spark_s:.2f} s (of which the "
              f"units' copy phase {act.copy_phase_s:.2f} s; the rest is starting Spark and its tasks)")
        print(f"every new record is on B exactly once ({copied} of {len(active)})")
        return 0
    finally:
        if spark is not None:
            spark.down()
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
