"""Benchmark: `mirrorflow replicate --continuous` beside a sustained load, with a target outage:
source-to-target latency, achieved rates, the copier's memory over time, and the catch-up rate.

    .venv/bin/python bench/bench_continuous_load.py [--rate 50000] [--size 100] [--seconds 60]
        [--outage 30] [--backlog 10] [--partitions 8] [--tasks 2] [--mode connect|submit|direct]
    # the goals (10 minutes of load, then a 5-minute target outage):
    .venv/bin/python bench/bench_continuous_load.py --rate 50000 --size 100 --seconds 600 --outage 300
    .venv/bin/python bench/bench_continuous_load.py --rate 20000 --size 1024 --seconds 600 --outage 300

Starts in a temporary home clusters A (source) and B (target), and for `--mode connect` (the
default path) a Spark Connect server (local[*], a free port). Timeline:

1. BACKLOG seconds' worth of records (RATE x BACKLOG) are written to A before the copier starts;
2. the load generator (a process of its own, paced every 5 ms, timestamp = produce time) writes
   RATE records/s of SIZE bytes from now until step 4 ends, and `mirrorflow replicate --continuous`
   starts (exactly-once, initial.position earliest): it first drains the backlog beside the load
   (its best copy rate shows there), then follows the load;
3. SECONDS after the backlog is through (the steady phase; the copier's start-up is not in it),
   target B is stopped for OUTAGE seconds and started again (same ports and data); the load goes
   on, so RATE x OUTAGE records wait on A;
4. catch-up: until the copier is current again (a second of arrivals all under 2 s of latency) and
   ten seconds more; then the load ends and the copier is stopped (SIGTERM) once every record
   arrived.

The measuring consumer must keep up with RATE itself (on a saturated machine it falls behind at
50,000 records/s, and its own lag then reads as latency and the copier never looks current): take
the goal figures on a quiet machine.

A read_committed consumer on B timestamps every arrival: latency = arrival - produce time (its
own fetch delay, a few ms, included). It prints p50/p99/max latency of the steady phase (after the
backlog, before the outage; goal p99 <= 1 s), the achieved produce and delivery rates, the copy
rate per 10 s window, the catch-up rate (records delivered from B's return to current, per second)
against the best 10 s copy rate outside the catch-up (goal >= 0.9x), and the RSS of the copier's
processes (the CLI, the Spark JVM, its Python workers; connect: the server's) sampled every 2 s,
with its growth over the steady phase (flat memory). It prints figures; it is not a test.
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
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import psutil  # noqa: E402
import yaml  # noqa: E402
from bench_latency import create  # noqa: E402 - its path set-up comes first
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402
from mirrorflow_dev.processes import free_port  # noqa: E402
from mirrorflow_dev.spark import DevSparkServer  # noqa: E402

TOPIC, REMOTE = "bench.load", "A.bench.load"
CURRENT_MS = 2000  # the copier is current again when a second's arrivals are all younger than this
HIST_MS = 60_000


def load_gen(spec: str) -> int:
    """The load generator's process: RATE records/s paced every 5 ms until the file `stop` exists;
    prints the records sent."""
    s = json.loads(spec)
    p = Producer(
        {
            **s["conf"],
            "linger.ms": 5,
            "enable.idempotence": True,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    blob, rate, parts = os.urandom(s["size"]), s["rate"], s["partitions"]
    sent, t0, stop = 0, time.monotonic(), Path(s["stop"])
    while not stop.exists():
        due = int((time.monotonic() - t0) * rate)
        now = int(time.time() * 1000)
        while sent < due:
            try:
                p.produce(s["topic"], blob, None, sent % parts, timestamp=now)
                sent += 1
            except BufferError:
                p.poll(0.01)
        p.poll(0)
        time.sleep(0.005)
    took = time.monotonic() - t0
    assert p.flush(120) == 0
    print(json.dumps({"sent": sent, "seconds": took}))
    return 0


class Arrivals:
    """A read_committed consumer on the target: arrivals and the highest latency per second, and a
    latency histogram (1 ms buckets up to 60 s) per phase, which the main thread names (raw latencies
    of 75 million records would not fit)."""

    def __init__(self, cluster, partitions: int) -> None:
        self.per_second: Counter[int] = Counter()
        self.max_ms: dict[int, int] = {}
        self.hist: dict[str, array] = {}
        self.phase = "backlog"
        self.count = 0
        self._stop = threading.Event()
        self._c = Consumer(
            {
                **cluster.client_config(),
                "group.id": "bench-arrivals",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 5,
                "fetch.min.bytes": 1,
                "log_level": 0,  # the outage's refused connections are expected: not a line per retry
            }
        )
        self._c.assign([TopicPartition(REMOTE, p, 0) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msgs = self._c.consume(10_000, 0.1)
            now = int(time.time() * 1000)
            sec, hist = now // 1000, self.hist.setdefault(self.phase, array("l", bytes(8 * (HIST_MS + 1))))
            n, top = 0, self.max_ms.get(sec, 0)
            for m in msgs:
                if m.error() is None:
                    ms = now - m.timestamp()[1]
                    hist[min(max(ms, 0), HIST_MS)] += 1
                    top = max(top, ms)
                    n += 1
            if n:
                self.per_second[sec] += n
                self.max_ms[sec] = top
                self.count += n
        self._c.close()

    def current_since(self, after: float) -> int | None:
        """The first complete second after `after` whose arrivals were all younger than CURRENT_MS."""
        last = int(time.time()) - 1
        for sec in range(int(after) + 1, last):
            if self.per_second.get(sec) and self.max_ms.get(sec, CURRENT_MS) < CURRENT_MS:
                return sec
        return None

    def percentiles(self, phase: str) -> tuple[int, int, int, int]:
        """(records, p50, p99, max) of a phase's latencies, in ms."""
        hist = self.hist.get(phase)
        if hist is None or not sum(hist):
            return 0, -1, -1, -1
        total, out, seen = sum(hist), [], 0
        targets = [0.5 * total, 0.99 * total]
        for ms, n in enumerate(hist):
            seen += n
            while targets and seen >= targets[0]:
                out.append(ms)
                targets.pop(0)
        top = max(ms for ms, n in enumerate(hist) if n)
        return total, out[0], out[1], top

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


class Memory:
    """RSS (MiB) of the copier's processes every 2 s: (t, cli, jvm, python workers)."""

    def __init__(self, roots: list[int]) -> None:
        self.roots, self.samples = roots, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def now(self) -> tuple[float, float, float]:
        cli = jvm = workers = 0.0
        for i, root in enumerate(self.roots):
            try:
                procs = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
            except psutil.Error:
                continue
            for p in procs:
                try:
                    rss, name = p.memory_info().rss / 2**20, p.name()
                except psutil.Error:
                    continue
                if "java" in name:
                    jvm += rss
                elif i == 0 and p.pid == root:
                    cli += rss
                else:
                    workers += rss
        return cli, jvm, workers

    def _run(self) -> None:
        while not self._stop.wait(2.0):
            self.samples.append((time.time(), *self.now()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def at(self, t: float) -> tuple[float, float, float]:
        near = min(self.samples, key=lambda s: abs(s[0] - t)) if self.samples else (0, 0.0, 0.0, 0.0)
        return near[1], near[2], near[3]


def seed(a, n: int, size: int, parts: int) -> None:
    p = Producer({**a.client_config(), "linger.ms": 20, "queue.buffering.max.messages": 2_000_000})
    blob, now = os.urandom(size), int(time.time() * 1000)
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, blob, None, i % parts, timestamp=now)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def window_rates(per_second: Counter[int], lo: int, hi: int, width: int = 10) -> list[tuple[int, float]]:
    return [(s, sum(per_second[x] for x in range(s, s + width)) / width) for s in range(lo, hi - width + 1, width)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rate", type=int, default=50_000, help="records/s of the load (goals: 50,000 x 100 B, 20,000 x 1 KiB)"
    )
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60, help="load before the outage (the goal: 600)")
    ap.add_argument("--outage", type=float, default=30, help="seconds target B is down (the goal: 300)")
    ap.add_argument("--backlog", type=float, default=10, help="seconds of load written before the copier starts")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=2, help="tasks.max (this machine has 2 cores)")
    ap.add_argument("--mode", default="connect", choices=["connect", "submit", "direct"])
    ap.add_argument("--load-gen", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load_gen:
        return load_gen(args.load_gen)

    # both clusters keep every record (the copier reads A's backlog after the outage): a full disk stops a
    # broker, which would look like an outage that never ends (a bench killed before its end leaves its
    # directory behind: a 20,000 x 1 KiB goal run's was 35 GB)
    need = 2 * 1.1 * (args.size + 70) * args.rate * (args.backlog + args.seconds + args.outage + 120)
    free = shutil.disk_usage(tempfile.gettempdir()).free
    if free < need:
        sys.exit(
            f"this run writes about {need / 2**30:.1f} GiB to {tempfile.gettempdir()} (both clusters keep every "
            f"record), which has {free / 2**30:.1f} GiB free: free some (an earlier bench killed before its "
            "end leaves its mirrorflow-bench-continuous-* directory) or shorten --seconds/--outage"
        )
    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-continuous-"))
    dev, spark = DevClusters(home), DevSparkServer(home)
    procs: list[subprocess.Popen] = []
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        create(a, TOPIC, args.partitions)
        create(b, REMOTE, args.partitions)
        server = spark.up(port=free_port(), master="local[*]", attached=True) if args.mode == "connect" else None
        cfg = {
            "clusters": {"A": a.client_config(), "B": b.client_config()},
            "flows": {
                "A->B": {
                    "topics": r"bench\..*",
                    "tasks.max": args.tasks,
                    "initial.position": "earliest",
                    "heartbeats.replication.enabled": False,
                    "emit.heartbeats.enabled": False,
                    "sync.topic.acls.enabled": False,
                    # a deployment that rides out OUTAGE-second outages says so: the default bound (300 s)
                    # is as long as the goal's outage, and a task that waits past it gives up
                    "broker.outage.max.seconds": max(300, int(args.outage) + 120),
                }
            },
            "spark": {"master": "local[*]", **({"remote": server.remote} if server else {})},
        }
        cfg_path = home / "bench.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg))
        backlog = int(args.rate * args.backlog)
        seed(a, backlog, args.size, args.partitions)
        recover = max(60.0, 2 * args.outage)  # how long a catch-up may take (+ 600 s) before the bench gives up
        print(
            f"load {args.rate:,} records/s of {args.size} B over {args.partitions} partitions: "
            f"{args.seconds:.0f} s steady, "
            f"then B down {args.outage:.0f} s, then the catch-up; backlog {backlog:,} records; "
            f"mode {args.mode}, tasks.max {args.tasks}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
        )
        arrivals = Arrivals(b, args.partitions)
        spec = json.dumps(
            {
                "conf": a.client_config(),
                "topic": TOPIC,
                "rate": args.rate,
                "size": args.size,
                "partitions": args.partitions,
                "stop": str(home / "stop-the-load"),
            }
        )
        gen = subprocess.Popen([sys.executable, __file__, "--load-gen", spec], stdout=subprocess.PIPE, text=True)
        procs.append(gen)
        t0 = time.time()
        with open(home / "cli.stderr", "w") as cli_err:  # the CLI keeps its own copy of the file
            cli = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "mirrorflow"),
                    "--config",
                    str(cfg_path),
                    "replicate",
                    "--flow",
                    "A->B",
                    "--continuous",
                    "--seconds",
                    str(int(args.seconds + args.outage + recover + 3600)),
                    "--mode",
                    args.mode,
                    "--json",
                ],
                env={**os.environ, "MIRRORFLOW_RUN_DIR": str(home / "runs")},
                stdout=subprocess.PIPE,
                # a file, not a pipe: nobody reads the pipe during the run, and once its 64 KiB were full
                # (the outage's log lines) the CLI blocked writing one and stopped copying
                stderr=cli_err,
                text=True,
            )
        procs.append(cli)
        memory = Memory([cli.pid, *([server.pid] if server else [])])
        loads = [f"start {os.getloadavg()[0]:.1f}"]
        drained = None  # the steady phase: SECONDS from the backlog's end (the copier's start-up is not in it)
        while drained is None or time.time() < drained + args.seconds:
            time.sleep(1)
            if drained is None and (drained := arrivals.current_since(t0)) is not None:
                arrivals.phase = "steady"  # the backlog is through: the copier follows the load
            if drained is None and (cli.poll() is not None or time.time() > t0 + 1800):
                raise SystemExit(
                    f"the copier never caught up with the backlog: {(home / 'cli.stderr').read_text()[-3000:]}"
                )
        loads.append(f"outage {os.getloadavg()[0]:.1f}")
        down_at = time.time()
        arrivals.phase = "outage"
        dev.restart("B", down_s=args.outage, attached=True)
        back_at = time.time()
        arrivals.phase = "catch-up"
        current_at = None
        while time.time() < back_at + recover + 600 and cli.poll() is None and current_at is None:
            time.sleep(1)
            current_at = arrivals.current_since(back_at)
        time.sleep(10)  # ten more seconds of load on the current copier
        arrivals.phase = "after"
        loads.append(f"current {os.getloadavg()[0]:.1f}")
        (home / "stop-the-load").touch()
        gen_out, _ = gen.communicate(timeout=300)
        produced = json.loads(gen_out)
        total = backlog + produced["sent"]
        deadline = time.time() + 600
        while arrivals.count < total and time.time() < deadline and cli.poll() is None:
            time.sleep(1)
        end = time.time()
        cli.send_signal(signal.SIGTERM)
        out, _ = cli.communicate(timeout=300)
        memory.stop()
        arrivals.stop()
        if cli.returncode != 0:
            print((home / "cli.stderr").read_text()[-3000:])
            return 1
        rep = json.loads(out)
        report(
            args,
            arrivals,
            memory,
            produced,
            backlog,
            total,
            (t0, drained, down_at, back_at, current_at, end),
            loads,
            rep,
        )
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        spark.down()
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


def report(args, arrivals, memory, produced, backlog, total, times, loads, rep) -> None:
    t0, drained, down_at, back_at, current_at, end = times
    per = arrivals.per_second
    drained = drained or int(down_at)
    print(f"\nload average: {', '.join(loads)}, end {os.getloadavg()[0]:.1f}")
    print(
        f"produced {produced['sent']:,} records in {produced['seconds']:.0f} s "
        f"({produced['sent'] / produced['seconds']:,.0f} records/s; goal rate {args.rate:,}); backlog {backlog:,}; "
        f"{arrivals.count:,} of {total:,} arrived on B ({'all' if arrivals.count >= total else 'NOT ALL'}); "
        f"the run reports {rep['records']:,} records, {rep.get('failed_units', 0)} failed units"
    )
    n, p50, p99, top = arrivals.percentiles("steady")
    if n:
        span = max(1.0, down_at - drained)
        print(
            f"steady phase ({span:.0f} s, the backlog drained at +{drained - t0:.0f} s): latency ms p50 {p50}, "
            f"p99 {p99}, max {top}; delivered {n / span:,.0f} records/s "
            f"(goal p99 <= 1000: {'met' if p99 <= 1000 else 'MISSED'})"
        )
    for phase in ("backlog", "catch-up", "after"):
        n, p50, p99, top = arrivals.percentiles(phase)
        if n:
            print(f"  {phase}: {n:,} records, latency ms p50 {p50}, p99 {p99}, max {top}")
    windows = window_rates(per, int(t0), int(end))
    print(
        "copy rate per 10 s window (records/s, from the load's start): "
        + " ".join(f"+{s - int(t0)}:{r:,.0f}" for s, r in windows)
    )
    if current_at is None:
        print(f"catch-up: NOT current again within {600 + 2 * args.outage:.0f} s of B's return")
    else:
        caught = sum(per[s] for s in range(int(back_at), current_at + 1))
        rate = caught / max(1, current_at + 1 - int(back_at))
        outside = [r for s, r in windows if not (down_at - 10 <= s <= current_at)]
        best = max(outside) if outside else 0.0
        ratio = rate / best if best else 0.0
        print(
            f"outage {back_at - down_at:.0f} s (B down and restarted); current again {current_at - back_at:.0f} s "
            f"after B's return: {caught:,} records at {rate:,.0f} records/s vs the best 10 s copy rate outside "
            f"the catch-up {best:,.0f} = {ratio:.2f}x (goal >= 0.9x: {'met' if ratio >= 0.9 else 'MISSED'})"
        )
    if memory.samples:
        col = {"connect": "python workers (the server's)", "submit": "python workers", "direct": "cli"}[args.mode]
        i = {"connect": 3, "submit": 3, "direct": 1}[args.mode]
        tenths = [memory.samples[min(len(memory.samples) - 1, k * len(memory.samples) // 10)] for k in range(10)]
        print(
            "RSS MiB (cli / jvm / python workers) at each tenth of the run: "
            + "  ".join(f"+{s[0] - t0:.0f}s {s[1]:.0f}/{s[2]:.0f}/{s[3]:.0f}" for s in [*tenths, memory.samples[-1]])
        )
        mid, before = memory.at(drained + (down_at - drained) / 2), memory.at(down_at)
        start = memory.at(drained)
        print(
            f"{col} RSS over the steady phase: {start[i - 1]:.0f} -> {mid[i - 1]:.0f} -> {before[i - 1]:.0f} MiB "
            f"(second half {before[i - 1] - mid[i - 1]:+.0f} MiB); peak "
            f"{max(s[i] for s in memory.samples):.0f} MiB; after the catch-up {memory.at(end)[i - 1]:.0f} MiB"
        )


if __name__ == "__main__":
    sys.exit(main())
