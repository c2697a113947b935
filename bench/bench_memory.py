"""Benchmark: a copy's memory is bounded by its batch limits, not by the range it copies.

    .venv/bin/python bench/bench_memory.py [--gb 2] [--small-gb 0.5] [--partitions 1]
                                           [--mode direct|submit] [--old-defaults]

Starts its own local clusters A (source) and B (target) in a temporary home. For each size (SMALL_GB,
then GB; the issue asks for 10 GB, too much disk and time for a session on a 2-core machine: give
`--gb 10` where there is room) it writes that many bytes of 1 KiB records to a new topic of
PARTITIONS partitions on A and copies it with `mirrorflow replicate --once` (exactly-once,
`tasks.max: 1`: one copy task) as a separate process, then prints the copy's peak resident memory:

* `--mode direct` (the default): the units run in the CLI process, so its peak RSS (wait4's
  ru_maxrss) is the copy task's;
* `--mode submit`: spark-submit `local[*]`; the peak RSS of the Python worker that runs the task
  (sampled every 0.2 s) and of the Spark JVM.

The ratio GB / SMALL_GB of the peaks shows whether memory follows the range (4x the range at the same
memory: ~1). `--old-defaults` also runs the large size with the consumer settings before the memory budget
(`consumer.fetch.max.bytes` 100 MiB, `consumer.max.partition.fetch.bytes` 50 MiB,
`consumer.queued.max.messages.kbytes` 256 MiB as overrides), for comparison. The bound it prints
is the one docs/replicate.md explains ("Memory of a copy task"). The brokers stop when the
benchmark ends. It prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT)]

import psutil  # noqa: E402
import yaml  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402

RECORD = 1024
GOAL_MIB = 256
OLD_DEFAULTS = {
    "consumer.fetch.max.bytes": 104_857_600,
    "consumer.max.partition.fetch.bytes": 52_428_800,
    "consumer.queued.max.messages.kbytes": 262_144,
}


def fill(cluster: Any, topic: str, partitions: int, nbytes: int) -> int:
    """Create `topic` and write `nbytes` of RECORD-byte records, round robin over its partitions."""
    a = AdminClient(cluster.client_config())
    a.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    p = Producer({**cluster.client_config(), "linger.ms": 50, "batch.size": 1_000_000, "compression.type": "none"})
    body = os.urandom(RECORD - 16)  # incompressible, and the same object for every record
    n = nbytes // RECORD
    for i in range(n):
        while True:
            try:
                p.produce(topic, b"%015d|" % i + body, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        if not i % 10_000:
            p.poll(0)
    assert p.flush(600) == 0
    return n


class TreeRss:
    """Peak resident memory per process of a process tree, sampled every 0.2 s (MiB)."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                continue
            for pr in procs:
                try:
                    rss, name = pr.memory_info().rss / 2**20, pr.name()
                except psutil.Error:
                    continue
                if rss > self.peak.get(pr.pid, ("", 0.0))[1]:
                    self.peak[pr.pid] = (name, rss)

    def stop(self) -> dict[str, float]:
        """{"cli", "jvm", "worker"}: the largest peak of each kind of process."""
        self._stop.set()
        self._thread.join(5)
        out = {"cli": 0.0, "jvm": 0.0, "worker": 0.0}
        for pid, (name, rss) in self.peak.items():
            kind = "cli" if pid == self.root.pid else "jvm" if "java" in name else "worker" if "python" in name else ""
            if kind:
                out[kind] = max(out[kind], rss)
        return out


def copy(home: Path, clusters: dict[str, Any], topic: str, mode: str, extra: dict[str, Any]) -> dict[str, Any]:
    """Sync and copy `topic` once in a new process; its report and peak RSS."""
    cfg = home / f"{topic}.yaml"
    raw = {
        "clusters": {x.alias: x.client_config() for x in clusters.values()},
        "defaults": {
            "topics": topic.replace(".", r"\."),
            "tasks.max": 1,
            "sync.topic.acls.enabled": False,
            "emit.heartbeats.enabled": False,
            **extra,
        },
        "flows": {"A->B": {}},
    }
    cfg.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "MIRRORFLOW_RUN_DIR": str(home / "runs")}
    cli = [str(Path(sys.executable).parent / "mirrorflow"), "--config", str(cfg)]
    subprocess.run([*cli, "sync", "--flow", "A->B"], env=env, check=True, capture_output=True)
    out_path, err_path = home / f"{topic}.out", home / f"{topic}.err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [*cli, "replicate", "--flow", "A->B", "--once", "--mode", mode, "--json"], env=env, stdout=out, stderr=err
        )
        tree = TreeRss(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        took = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    peaks = tree.stop()
    if proc.returncode != 0:
        raise SystemExit(f"replicate failed ({proc.returncode}): {err_path.read_text()[-3000:]}")
    rep = json.loads(out_path.read_text())
    return {"report": rep, "took": took, "maxrss": usage.ru_maxrss / 1024, **peaks}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.0, help="the large range, GB (10 GB: --gb 10)")
    ap.add_argument("--small-gb", type=float, default=0.5, help="the baseline range, GB")
    ap.add_argument("--partitions", type=int, default=1, help="partitions of each topic (one task copies them)")
    ap.add_argument("--mode", choices=["direct", "submit"], default="direct")
    ap.add_argument(
        "--old-defaults", action="store_true", help="also copy the large size with the old consumer defaults"
    )
    args = ap.parse_args()
    from mirrorflow.replication.task.budget import CopyBudget

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-mem-"))
    dev = DevClusters(home)
    rows: list[tuple[str, float, dict[str, Any]]] = []
    try:
        clusters = dev.up(["A", "B"], attached=True)
        runs = [("small", args.small_gb, {}), ("large", args.gb, {})]
        if args.old_defaults:
            runs.append(("large, old consumer defaults", args.gb, OLD_DEFAULTS))
        for i, (label, gb, extra) in enumerate(runs):
            topic = f"mem.t{i}"
            t0 = time.time()
            n = fill(clusters["A"], topic, args.partitions, int(gb * 1e9))
            print(f"set-up {label}: {n:,} records ({gb:g} GB) written in {time.time() - t0:.0f} s", flush=True)
            res = copy(home, clusters, topic, args.mode, extra)
            assert res["report"]["records"] == n, (res["report"]["records"], n)
            rows.append((label, gb, res))
        who = "the CLI process (direct: it runs the task)" if args.mode == "direct" else "the Python worker"
        print(
            f"\n{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; mode {args.mode}, tasks.max 1, "
            f"{args.partitions} partition(s), exactly-once, 1 KiB records"
        )
        conf = CopyBudget(256 * 2**20, min(args.partitions, 16), 32 * 2**20).consumer()
        print(
            f"consumer (task.memory.bytes 256 MiB over {min(args.partitions, 16)} partition(s)): fetch.max.bytes "
            f"{conf['fetch.max.bytes'] >> 20} MiB, "
            f"max.partition.fetch.bytes {conf['max.partition.fetch.bytes'] >> 20} MiB, "
            f"queued.max.messages.kbytes {conf['queued.max.messages.kbytes'] >> 10} MiB; "
            "transaction.max.bytes 32 MiB, transaction.max.records 20,000"
        )
        print(f"peak RSS of {who}:")
        key = "maxrss" if args.mode == "direct" else "worker"
        base = rows[0][2][key]
        for label, gb, res in rows:
            mb_s = gb * 1e3 / max(res["took"], 1e-6)
            extra = f", Spark JVM {res['jvm']:.0f} MiB" if args.mode == "submit" else ""
            verdict = "under" if res[key] < GOAL_MIB else "OVER"
            print(
                f"  {label:30} {gb:5.2f} GB  {res[key]:6.0f} MiB ({verdict} the {GOAL_MIB} MiB goal){extra}; "
                f"ratio to the {rows[0][1]:g} GB run {res[key] / base:.2f}x; whole run {res['took']:.0f} s "
                f"({mb_s:.0f} MB/s)"
            )
        return 0
    finally:
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
