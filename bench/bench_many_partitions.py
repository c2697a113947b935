"""Benchmark: `mirrorflow replicate --once` over many partitions with little traffic, as a user runs it:
a CLI process per run, timed from outside, against a baseline of the same runs.

    .venv/bin/python bench/bench_many_partitions.py [--topics 40] [--partitions 50] [--active 200]
        [--tasks 8] [--mode connect|direct|submit] [--reps 5] [--firsts 1] [--baseline-ref REF]
        [--spark-master local[*]]

Starts its own local clusters A (source) and B (target) and, in connect mode (the default path), a
local Spark Connect server on a free port, in a temporary home. Creates TOPICS x PARTITIONS
partitions on A and two flows over them, each with its own state and target topics on B:

* `baseline`: the code of BASELINE_REF (default: where this branch left main, `git merge-base HEAD
  main`), unpacked from git into the temporary home and run from there (`python -m mirrorflow.cli`
  with its `include/` first on PYTHONPATH; its own Spark Connect session, as its package differs);
* `current`: this checkout's code, the same way.

The CLI processes run with their bytecode written (PYTHONDONTWRITEBYTECODE dropped), as an installed
package has it. After the sync creates the remote topics on B it waits until B shows a topic created then (`settled`:
a broker applies topic creations in order, and 4,000 new partitions take it seconds; the first runs
measured that wait before). Each flow first gets a warm-up run of a flow of its code over a partition per
core (the Connect session and each of its Python workers started, as a deployment that already runs has them;
with one partition the second worker started in the first timed run, 1-1.5 s of it). Then, per flow, timed as
a process from outside, exactly-once:

* `first`:  the flow's first run, one record in each of ACTIVE partitions, none in the others
            (the goal: <= 3 s); with `--firsts N`, the first runs of N flows of each code over the
            same partitions (each with its own state and remote topics: N x PARTITIONS more on B),
            alternated; the first of them goes on to the steady and idle runs;
* `steady`: REPS runs, each after one new record in each ACTIVE partition (goal: <= 3 s);
* `idle`:   REPS runs with nothing new (goal: <= 1 s).

The two flows' runs alternate (baseline, current, then current, baseline, ...), each printed with
the load average before it; the summary gives per run kind the median and min-max of each flow,
and the ratio baseline / current of the medians. After every run with records it checks that the
records are on B exactly once (per flow). The brokers and the server stop at the end. It prints
figures; it is not a test.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT)]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402
from mirrorflow_dev.processes import free_port  # noqa: E402

FLOWS = {"baseline": ("O", "P"), "current": ("N", "Q")}  # source alias of the flow, of its warm-up flow


def first_aliases(kind: str, n: int) -> list[str]:
    """The source aliases of a code's flows timed in their first run (the first: its steady flow)."""
    src = FLOWS[kind][0]
    return [src] + [f"{src}{i}" for i in range(1, n)]


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


def settled(cluster, timeout: float = 300.0) -> float:
    """Seconds until the cluster shows a topic created now: a broker applies topic creations in order,
    so the sync's thousands of remote partitions are in place by then. Without this wait the first run
    measured the broker digesting them (its state topics appeared only after them: 6-7 s of its 11-14 s
    over 2,000 partitions), not mirrorflow."""
    a = AdminClient(cluster.client_config())
    probe = f"bench.settled.{int(time.time() * 1000)}"
    t0 = time.time()
    a.create_topics([NewTopic(probe, 1, 1)])[probe].result(timeout)
    while time.time() - t0 < timeout:
        md = a.list_topics(probe, timeout=10).topics.get(probe)
        if md is not None and md.error is None and md.partitions:
            took = time.time() - t0
            a.delete_topics([probe])[probe].result(60)
            return took
        time.sleep(0.1)
    raise SystemExit(f"the cluster did not show topic {probe} within {timeout:.0f} s")


def write_one(cluster, tps: list[tuple[str, int]], tag: str) -> None:
    p = Producer({**cluster.client_config(), "linger.ms": 20, "enable.idempotence": True})
    for t, part in tps:
        p.produce(t, f"{tag}-{t}-{part}".encode(), f"k-{part}".encode(), part)
    assert p.flush(120) == 0


def unpack(ref: str, dest: Path) -> Path:
    """The `include/` tree of git ref `ref`, unpacked under `dest` (its code, nothing installed)."""
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", ref], capture_output=True, text=True, check=True)
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev.stdout.strip(), "include"], capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "include"


def cli(include: Path, cfg_path: Path, flow: str, mode: str, env: dict[str, str]) -> float:
    """One `mirrorflow replicate --once` process of the code in `include`, timed from outside."""
    cmd = [sys.executable, "-m", "mirrorflow.cli", "--config", str(cfg_path), "replicate", "--flow", flow,
           "--once", "--mode", mode, "--json"]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**env, "PYTHONPATH": str(include)}, timeout=1800)
    took = time.time() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{flow} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}\n{proc.stdout[-2000:]}")
    return took


def count_on_target(cluster, alias: str, topics: list[str], partitions: int, tag: str) -> int:
    from tests.support import consume_all

    return sum(1 for t in topics for r in consume_all(cluster, f"{alias}.{t}", list(range(partitions)))
               if r.value.startswith(tag.encode()))


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=40)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--active", type=int, default=200, help="partitions that get one new record per run")
    ap.add_argument("--tasks", type=int, default=8, help="tasks.max")
    ap.add_argument("--mode", choices=["connect", "direct", "submit"], default="connect")
    ap.add_argument("--reps", type=int, default=5, help="steady and idle runs per flow")
    ap.add_argument("--firsts", type=int, default=1, help="flows per code timed in their first run")
    ap.add_argument("--baseline-ref", default=None, help="git ref of the baseline (default: merge-base HEAD main)")
    ap.add_argument("--spark-master", default="local[*]")
    args = ap.parse_args()
    ref = args.baseline_ref or subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main"],
                                              capture_output=True, text=True, check=True).stdout.strip()
    topics = [f"many.t{i:03d}" for i in range(args.topics)]
    all_tps = [(t, p) for p in range(args.partitions) for t in topics]  # round robin over topics
    active = all_tps[: args.active]
    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-"))
    code = {"baseline": unpack(ref, home / "baseline"), "current": ROOT / "include"}
    dev = DevClusters(home)
    spark = None
    times: dict[tuple[str, str], list[float]] = {}
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        create_topics(a, topics, args.partitions)
        # the warm-up flow has a partition per server slot, so that every Python worker starts in it
        warm_parts = max(2, os.cpu_count() or 1)
        create_topics(a, ["warm.t"], warm_parts)
        import yaml

        firsts = {kind: first_aliases(kind, max(1, args.firsts)) for kind in FLOWS}
        aliases = {x for pair in FLOWS.values() for x in pair} | {x for xs in firsts.values() for x in xs}
        raw_cfg: dict = {
            "clusters": {"B": b.client_config(), **{x: a.client_config() for x in aliases}},
            "defaults": {"tasks.max": args.tasks, "sync.topic.acls.enabled": False},
            "flows": {**{f"{src}->B": {"topics": r"many\..*"} for xs in firsts.values() for src in xs},
                      **{f"{warm}->B": {"topics": r"warm\..*"} for _, warm in FLOWS.values()}},
            "spark": {"master": args.spark_master},
        }
        if args.mode == "connect":
            from mirrorflow_dev.spark import DevSparkServer

            spark = DevSparkServer(home)
            server = spark.up(port=free_port(), master=args.spark_master, attached=True)
            raw_cfg["spark"] = {"remote": server.remote}
        cfg_path = home / "bench.yaml"
        cfg_path.write_text(yaml.safe_dump(raw_cfg))
        # as an installed package runs: with its bytecode (a shell with PYTHONDONTWRITEBYTECODE, as this machine's,
        # made every process compile the package again, 0.12 s of each figure; both flows' code alike)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["MIRRORFLOW_RUN_DIR"] = str(home / "runs")
        from mirrorflow import config as config_mod
        from mirrorflow.metadata.sync import sync_flow

        cfg = config_mod.load(cfg_path)
        for name in cfg.flows:
            assert sync_flow(cfg, name).ok, name
        print(f"the target showed a new topic {settled(b):.1f} s after the sync created the remote topics")
        write_one(a, [("warm.t", p) for p in range(warm_parts)], "warm")
        for kind, (_, warm) in FLOWS.items():
            took = cli(code[kind], cfg_path, f"{warm}->B", args.mode, env)
            print(f"warm-up of {kind} ({warm}->B, {warm_parts} records): {took:.2f} s")
        print(f"{len(all_tps):,} partitions ({args.topics} topics x {args.partitions}), {len(active)} active, "
              f"tasks.max {args.tasks}, mode {args.mode}, {os.cpu_count()} cores, exactly-once; baseline = {ref[:12]}")

        def timed(kind: str, what: str, tag: str | None, src: str | None = None) -> None:
            src = src or FLOWS[kind][0]
            at = load()
            took = cli(code[kind], cfg_path, f"{src}->B", args.mode, env)
            times.setdefault((kind, what), []).append(took)
            check = ""
            if tag is not None:
                copied = count_on_target(b, src, sorted({t for t, _ in active}), args.partitions, tag)
                assert copied == len(active), (kind, what, copied, len(active))
                check = f", {copied} records on B exactly once"
            print(f"  {what:7} {kind:9} {took:7.2f} s (load average {at} before{check})")

        write_one(a, active, "first")
        order = ["baseline", "current"]
        for i in range(max(1, args.firsts)):
            for kind in order if i % 2 == 0 else order[::-1]:
                timed(kind, "first", "first", firsts[kind][i])
        for i in range(args.reps):
            tag = f"steady{i}"
            write_one(a, active, tag)
            for kind in order if i % 2 else order[::-1]:
                timed(kind, "steady", tag)
        for i in range(args.reps):
            for kind in order if i % 2 else order[::-1]:
                timed(kind, "idle", None)

        print(f"\nsummary: {len(all_tps):,} partitions, {len(active)} active, mode {args.mode}, a `mirrorflow "
              f"replicate --once` process timed from outside; load average now {load()}")
        goals = {"first": 3.0, "steady": 3.0, "idle": 1.0}
        for what, goal in goals.items():
            med = {k: statistics.median(times[(k, what)]) for k in order}
            span = {k: f"{min(times[(k, what)]):.2f}-{max(times[(k, what)]):.2f}" for k in order}
            met = "met" if med["current"] <= goal else "MISSED"
            print(f"  {what:7} baseline {med['baseline']:6.2f} s ({span['baseline']}), current {med['current']:6.2f} s "
                  f"({span['current']}): {med['baseline'] / med['current']:.1f}x faster; goal <= {goal:.0f} s {met}")
        return 0
    finally:
        if spark is not None:
            spark.down()
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
