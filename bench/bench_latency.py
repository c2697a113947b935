"""Benchmark: source-to-target latency of continuous replication under a steady load, against a raw pipe.

    .venv/bin/python bench/bench_latency.py [--rate 2000] [--seconds 60] [--size 1024] [--partitions 8]
                                            [--mode submit|inprocess|direct] [--poll-ms 200] [--tasks 2]
    # the goal (10,000 records/s of 1 KiB for 10 minutes):
    .venv/bin/python bench/bench_latency.py --rate 10000 --seconds 600

Starts its own local clusters A (source) and B (target) in a temporary home. For each pipeline a
producer writes RATE records/s of SIZE bytes for SECONDS seconds to A (timestamp = produce time), and
a consumer on B measures, per record, the time from its produce timestamp to the moment it is
visible on B (read_committed; the consumer's own fetch delay, a few ms, is included):

* `raw`:        one thread, confluent-kafka consumer -> producer, no transactions (the baseline);
* `continuous`: `mirrorflow replicate --continuous` (exactly-once: one transaction per
                micro-batch with its offset-map entry and progress), started before the load and
                stopped with SIGTERM once every record arrived.

It prints p50/p90/p99/max, a histogram, the throughput, the ratio to the raw pipe, and the resident
memory of the run's processes (CLI driver, Spark JVM, Python copy workers) when the load starts and
when it ends, and their peak. The brokers stop when the benchmark ends. It prints figures; it is not
a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT)]

import psutil  # noqa: E402
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402

BUCKETS_MS = [25, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 10000]


def create(cluster, name: str, partitions: int) -> None:
    a = AdminClient(cluster.client_config())
    a.create_topics([NewTopic(name, partitions, 1)])[name].result(60)
    while True:
        md = a.list_topics(name, timeout=10).topics.get(name)
        if md and not md.error and len(md.partitions) == partitions:
            return
        time.sleep(0.2)


def load(cluster, topic: str, rate: int, seconds: float, size: int, partitions: int) -> tuple[int, float]:
    """Produce `rate` records/s for `seconds` (paced every 5 ms); the timestamp is the produce time.
    Returns (records, achieved seconds)."""
    p = Producer(
        {
            **cluster.client_config(),
            "linger.ms": 1,
            "enable.idempotence": True,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    blob = os.urandom(size)
    sent, t0 = 0, time.monotonic()
    total = int(rate * seconds)
    while sent < total:
        due = min(total, int((time.monotonic() - t0) * rate))
        now = int(time.time() * 1000)
        while sent < due:
            try:
                p.produce(topic, blob, b"k%d" % (sent % 1000), sent % partitions, timestamp=now)
                sent += 1
            except BufferError:
                p.poll(0.01)
        p.poll(0)
        time.sleep(0.005)
    took = time.monotonic() - t0
    assert p.flush(60) == 0
    return sent, took


@dataclass
class Measure:
    """A read_committed consumer on the target: the latency (ms) of every record it sees."""

    cluster: object
    topic: str
    partitions: int
    latencies: array = field(default_factory=lambda: array("l"))
    first_ms: int = 0
    last_ms: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        c = Consumer(
            {
                **self.cluster.client_config(),
                "group.id": "bench-latency",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "latest",
                "fetch.wait.max.ms": 5,
                "fetch.min.bytes": 1,
            }
        )
        ends = [c.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1] for p in range(self.partitions)]
        c.assign([TopicPartition(self.topic, p, ends[p]) for p in range(self.partitions)])
        self._consumer = c
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        add = self.latencies.append
        while not self._stop.is_set():
            msgs = self._consumer.consume(10_000, 0.1)
            now = int(time.time() * 1000)
            for m in msgs:
                if m.error() is None:
                    add(now - m.timestamp()[1])
            if msgs:
                self.first_ms = self.first_ms or now
                self.last_ms = now
        self._consumer.close()

    def wait_for(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.latencies) < n and time.monotonic() < deadline:
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def raw_pipe(src, dst, topic: str, target_topic: str, partitions: int, stop: threading.Event) -> None:
    """consume -> produce, no transactions: the copier's client settings (a followed partition's
    budget, replication.task.budget), read_committed."""
    from mirrorflow.replication.task.budget import CopyBudget
    from mirrorflow.replication.task.task_producer import PRODUCER_DEFAULTS

    budget = CopyBudget(256 * 2**20, 1, 32 * 2**20, follow=True)
    pconf = {**budget.producer(), **{k: v for k, v in PRODUCER_DEFAULTS.items() if k != "transaction.timeout.ms"}}
    c = Consumer(
        {
            **src.client_config(),
            **budget.consumer(),
            "group.id": "bench-raw",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "latest",
        }
    )
    ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    c.assign([TopicPartition(topic, p, ends[p]) for p in range(partitions)])
    p = Producer({**dst.client_config(), **pconf, "enable.idempotence": False})
    while not stop.is_set():
        for m in c.consume(10_000, 0.05):
            if m.error() is not None and m.error().code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(m.error().str())
            if m.error() is None:
                while True:
                    try:
                        p.produce(
                            target_topic,
                            m.value(),
                            m.key(),
                            m.partition(),
                            timestamp=m.timestamp()[1],
                            headers=m.headers(),
                        )
                        break
                    except BufferError:
                        p.poll(0.01)
        p.poll(0)
    p.flush(30)
    c.close()


class Rss:
    """Resident memory of a process tree, sampled every second: (cli, jvm, python workers) in MiB."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.samples: list[tuple[float, float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def now(self) -> tuple[float, float, float]:
        cli = jvm = workers = 0.0
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return 0.0, 0.0, 0.0
        for pr in procs:
            try:
                rss = pr.memory_info().rss / 2**20
                name = pr.name()
            except psutil.Error:
                continue
            if pr.pid == self.root.pid:
                cli += rss
            elif "java" in name:
                jvm += rss
            elif "python" in name:
                workers += rss
        return cli, jvm, workers

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.samples.append((time.monotonic(), *self.now()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def peak(self) -> tuple[float, float, float]:
        if not self.samples:
            return 0.0, 0.0, 0.0
        return tuple(max(s[i] for s in self.samples) for i in (1, 2, 3))  # type: ignore[return-value]


def pct(sorted_ms: list[int], q: float) -> int:
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))] if sorted_ms else -1


def summary(name: str, lat: array, sent: int, produce_s: float, first_ms: int, last_ms: int) -> dict:
    s = sorted(lat)
    window = max(1e-3, (last_ms - first_ms) / 1000)
    return {
        "name": name,
        "records": len(s),
        "sent": sent,
        "p50": pct(s, 0.5),
        "p90": pct(s, 0.9),
        "p99": pct(s, 0.99),
        "max": s[-1] if s else -1,
        "rate": len(s) / window,
        "produce_s": produce_s,
        "hist": [
            sum(1 for x in s if lo <= x < hi) for lo, hi in zip([0, *BUCKETS_MS], [*BUCKETS_MS, 10**12], strict=True)
        ],
    }


def print_summary(r: dict, base: dict | None) -> None:
    ratio = ""
    if base:
        ratio = f"  (x raw: p50 {r['p50'] / max(1, base['p50']):.1f}, p99 {r['p99'] / max(1, base['p99']):.1f})"
    print(
        f"\n{r['name']}: {r['records']:,} of {r['sent']:,} records seen on the target, "
        f"{r['rate']:,.0f} records/s delivered"
    )
    print(f"  latency ms: p50 {r['p50']}  p90 {r['p90']}  p99 {r['p99']}  max {r['max']}{ratio}")
    total = max(1, r["records"])
    for lo, hi, n in zip([0, *BUCKETS_MS], [*BUCKETS_MS, None], r["hist"], strict=True):
        label = f"{lo:>5}-{hi:<5}" if hi else f"{lo:>5}+     "
        print(f"  {label} ms {n:>9,} {100 * n / total:5.1f}% {'#' * int(50 * n / total)}")


def run_load(a, b, target_topic: str, args, during: Callable[[], None] | None = None) -> dict:
    m = Measure(b, target_topic, args.partitions)
    sent, took = load(a, "bench.latency", args.rate, args.seconds, args.size, args.partitions)
    if during:
        during()
    m.wait_for(sent, timeout=120)
    m.stop()
    return {"m": m, "sent": sent, "took": took}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=2000, help="records/s (default 2,000; the goal: 10,000)")
    ap.add_argument("--seconds", type=float, default=60, help="load duration (default 60; the goal: 600)")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=2, help="tasks.max (default 2: this machine has 2 cores)")
    ap.add_argument("--poll-ms", type=int, default=200, help="continuous.poll.ms")
    ap.add_argument("--state-check-s", type=int, default=5, help="continuous.state.check.seconds")
    ap.add_argument("--mode", default="submit", choices=["submit", "inprocess", "direct"])
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-latency-"))
    dev = DevClusters(home)
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        create(a, "bench.latency", args.partitions)
        create(b, "A.bench.latency", args.partitions)
        create(b, "raw.latency", args.partitions)
        print(
            f"load: {args.rate:,} records/s of {args.size} B for {args.seconds:.0f} s over {args.partitions} "
            f"partitions; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
        )

        # baseline: the raw pipe under the same load
        stop = threading.Event()
        pipe = threading.Thread(
            target=raw_pipe, args=(a, b, "bench.latency", "raw.latency", args.partitions, stop), daemon=True
        )
        pipe.start()
        time.sleep(3)  # assigned and fetching
        raw = run_load(a, b, "raw.latency", args)
        stop.set()
        pipe.join(30)
        base = summary(
            "raw pipe (no transactions)",
            raw["m"].latencies,
            raw["sent"],
            raw["took"],
            raw["m"].first_ms,
            raw["m"].last_ms,
        )

        # continuous replication: the CLI, started before the load, SIGTERM once everything arrived
        import yaml

        cfg_path = home / "bench.yaml"
        cfg_path.write_text(
            yaml.safe_dump(
                {
                    "clusters": {x.alias: x.client_config() for x in (a, b)},
                    "flows": {
                        "A->B": {
                            "topics": r"bench\..*",
                            "tasks.max": args.tasks,
                            "initial.position": "latest",
                            "continuous.poll.ms": args.poll_ms,
                            "continuous.state.check.seconds": args.state_check_s,
                            "heartbeats.replication.enabled": False,
                        }
                    },
                    "spark": {"master": args.master},
                }
            )
        )
        env = {**os.environ, "MIRRORFLOW_RUN_DIR": str(home / "runs")}
        cli = [
            str(Path(sys.executable).parent / "mirrorflow"),
            "--config",
            str(cfg_path),
            "replicate",
            "--flow",
            "A->B",
            "--continuous",
            "--seconds",
            str(int(args.seconds + 600)),
            "--mode",
            args.mode,
            "--master",
            args.master,
            "--json",
        ]
        t_start = time.monotonic()
        proc = subprocess.Popen(cli, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rss = Rss(proc.pid)
        # warm-up: wait until the run copies (Spark started, every partition followed)
        warm = Measure(b, "A.bench.latency", args.partitions)
        p = Producer(a.client_config())
        while not warm.latencies and proc.poll() is None:
            for i in range(args.partitions):
                p.produce("bench.latency", b"warm-up", partition=i, timestamp=int(time.time() * 1000))
            p.flush(10)
            warm.wait_for(1, 2.0)
        warm.stop()
        del p  # its connections end with it, not after the brokers stop
        if proc.poll() is not None:
            print(proc.stderr.read()[-3000:])
            return 1
        startup = time.monotonic() - t_start
        time.sleep(3)  # the warm-up records of every partition are through
        at_start = rss.now()
        load_t0 = time.monotonic()
        at_end: list[float] = []
        cont = run_load(a, b, "A.bench.latency", args, during=lambda: at_end.extend(rss.now()))
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
        rss.stop()
        if proc.returncode != 0:
            print(err[-3000:])
            return 1
        rep = json.loads(out)
        res = summary(
            f"continuous replication (exactly-once, --mode {args.mode}, continuous.poll.ms {args.poll_ms})",
            cont["m"].latencies,
            cont["sent"],
            cont["took"],
            cont["m"].first_ms,
            cont["m"].last_ms,
        )

        print_summary(base, None)
        print_summary(res, base)
        txns = sum(pp["transactions"] for pp in rep["partitions"])
        print(
            f"  run: {rep['records']:,} records in {txns:,} transactions, {rep['failed_units']} failed units, "
            f"lag at the end {rep['lag']}; start-up until copying {startup:.1f} s"
        )
        pk = rss.peak()
        print(
            "  RSS MiB (cli driver / Spark JVM / Python copy workers): "
            f"load start {at_start[0]:.0f} / {at_start[1]:.0f} / {at_start[2]:.0f}, "
            f"load end {at_end[0]:.0f} / {at_end[1]:.0f} / {at_end[2]:.0f}, "
            f"peak {pk[0]:.0f} / {pk[1]:.0f} / {pk[2]:.0f}"
        )
        during = [s for s in rss.samples if load_t0 <= s[0] <= load_t0 + cont["took"]]
        if during:  # does the copy workers' memory level off or keep growing?
            col, who = (3, "Python copy workers'") if args.mode != "direct" else (1, "the CLI's (direct: it copies)")
            tenths = [during[min(len(during) - 1, i * len(during) // 10)][col] for i in range(10)] + [during[-1][col]]
            print(f"  {who} RSS MiB at each tenth of the load: " + " ".join(f"{x:.0f}" for x in tenths))
            start, middle, end = during[0][col], during[len(during) // 2][col], during[-1][col]
            print(
                f"  {who} RSS MiB at the load's start / middle / end: {start:.0f} / {middle:.0f} / {end:.0f} "
                f"(second half: {end - middle:+.0f} MiB, {(end - middle) / max(start, 1) * 100:+.1f}% of the start)"
            )
        ok50, ok99 = res["p50"] <= 500, res["p99"] <= 2000
        print(
            f"  goal p50 <= 500 ms: {'met' if ok50 else 'missed'} ({res['p50']} ms); "
            f"p99 <= 2000 ms: {'met' if ok99 else 'missed'} ({res['p99']} ms) at {args.rate:,} records/s"
        )
        return 0
    finally:
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
