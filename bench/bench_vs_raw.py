"""Benchmark: `mirrorflow replicate --once` as a process (the default path: a running Spark Connect
server) against the fixed raw pipe and tuned MirrorMaker 2, alternated run by run, each contender
writing to a fresh target cluster of its own.

    .venv/bin/python bench/bench_vs_raw.py [--records 100000] [--size 1024] [--partitions 8]
        [--rounds 5] [--contenders mirrorflow,raw,mm2] [--busy 0] [--set PROP=VALUE ...]
        [--variant NAME:PROP=VALUE,... ...] [--profile]
    # the goal (1 GB: 1,000,000 x 1 KiB over 8 partitions, >= 5 rounds):
    .venv/bin/python bench/bench_vs_raw.py --records 1000000 --rounds 5

Starts in a temporary home a source cluster A (seeded once with RECORDS records of SIZE bytes over
PARTITIONS partitions) and a Spark Connect server (local[*], a free port; warmed up by round 0).
Then, per round, each contender in turn (A B C, then B C A, C A B ...: every contender goes first
as often as the others) copies the whole topic:

* `mirrorflow`: `mirrorflow replicate --flow A->T --once --json` as a new process (exactly-once,
  defaults, `spark.remote`: what a scheduled run or a user runs);
* `raw`: the raw pipe of bench_replicate.py (one process, confluent-kafka consumer -> producer, no
  transactions, fixed generous settings RAW_CONSUMER / RAW_PRODUCER that never follow the copier's),
  as a new process;
* `mm2`: the real MirrorMaker 2 with MM2_TUNED (bench_replicate.mm2_run: exactly-once source
  support, tasks.max = partitions, 2 GB heap).

Each run gets a NEW target cluster, started just before it and deleted just after: a contender
meets the same conditions (a broker that holds nothing else, no other target on the machine, its
transaction coordinator and offsets topic made by the same warm-up transaction beforehand, the
remote topic created), so no run pays for another's log, page cache or compaction, and the target
never holds state of an earlier round. Starting it is set-up, not in any figure.

Per run it prints the whole run (process start to exit; MM2: JVM start to every record committed)
and the copy phase (mirrorflow: the report's copy_phase_s, first unit start to last unit end;
raw: the pipe's own time; MM2: its first committed record to its last), the load average, and the
CPU seconds each part used in the run (the contender's process, the Spark JVM and its Python
workers, the source and the target broker): where the machine's two cores went. The summary gives
per contender medians and min-max, the ratio mirrorflow/raw of the copy phase per round (raw
time / mirrorflow time: 1.00 = as fast) with its median and min-max, and whole-run mirrorflow vs MM2.

`--busy N` runs N busy-loop processes (a core each) through the measured rounds: every contender
under the same artificial load. `--variant NAME:PROP=VALUE,...` adds a mirrorflow contender with
other flow properties (e.g. consumer prefetch), alternated with the others; `--profile` samples the
Connect server's Python workers with py-spy (`pip install py-spy`; not a dependency) in each
measured mirrorflow run and prints where their time went. It prints figures; it is not a test (it fails only when a copy
fails or copies a wrong count).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import psutil  # noqa: E402
import yaml  # noqa: E402
from bench_replicate import create, mm2_run, raw_pipe, seed  # noqa: E402 - its path set-up comes first
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402
from mirrorflow_dev.processes import free_port  # noqa: E402
from mirrorflow_dev.spark import DevSparkServer  # noqa: E402

TOPIC = "bench.records"
CONTENDERS = ("mirrorflow", "raw", "mm2")
BIN = Path(sys.executable).parent


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


@dataclass
class Run:
    contender: str
    round: int
    whole: float
    copy: float
    load_before: str
    load_after: str
    cpu: dict[str, float] = field(default_factory=dict)

    @property
    def cpu_s(self) -> float:
        """Every measured process's CPU seconds in the run."""
        return sum(self.cpu.values())


class CpuMeter:
    """CPU seconds (user + system) used by named process groups between start() and stop(): the
    brokers, the Spark JVM and its Python workers by psutil (they outlive a run), the contender's
    process by the kernel's account of this process's waited-for children (it exits in the run)."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups

    @staticmethod
    def _cpu(pid: int, tree: bool) -> dict[int, float]:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)] if tree else [root]
        except psutil.Error:
            return {}
        out = {}
        for p in procs:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except psutil.Error:
                continue
        return out

    def snapshot(self) -> dict[str, dict[int, float]]:
        snap = {
            name: {k: v for pid in pids for k, v in self._cpu(pid, name == "spark").items()}
            for name, pids in self.groups.items()
        }
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        snap["children"] = {0: children.ru_utime + children.ru_stime}
        return snap

    def start(self) -> None:
        self.before = self.snapshot()

    def stop(self, spark_pid: int | None) -> dict[str, float]:
        after = self.snapshot()
        out = {}
        for name, now in after.items():
            then = self.before.get(name, {})
            if name == "spark" and spark_pid is not None:  # the JVM apart from its Python workers
                out["spark jvm"] = now.get(spark_pid, 0.0) - then.get(spark_pid, 0.0)
                out["py workers"] = sum(v - then.get(pid, 0.0) for pid, v in now.items() if pid != spark_pid)
            else:
                out[name] = sum(v - then.get(pid, 0.0) for pid, v in now.items())
        out["contender"] = out.pop("children")
        return out


def fresh_target(dev: DevClusters, alias: str, parts: int):
    """A new single-broker target with the remote topics and a warmed-up transaction coordinator and
    offsets topic (what every contender's first transaction or commit would otherwise create)."""
    t = dev.up([alias], attached=True)[alias]
    for remote in (f"A.{TOPIC}", f"M.{TOPIC}", "raw.records"):
        create(t, remote, parts)
    create(t, "warm.txn", 1)
    p = Producer({**t.client_config(), "transactional.id": "bench-warm-up"})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce("warm.txn", b"warm")
    p.commit_transaction(60)
    c = Consumer({**t.client_config(), "group.id": "bench-warm-up", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("warm.txn", 0, 1)], asynchronous=False)
    c.close()
    return t


def mirrorflow_run(home: Path, a, t, remote: str, settings: dict, n: int) -> tuple[float, float]:
    """`mirrorflow replicate --once` as a new process; (whole s from outside, copy phase s)."""
    cfg = {
        "clusters": {"A": a.client_config(), "T": t.client_config()},
        "defaults": {
            "topics": r"bench\..*",
            "heartbeats.replication.enabled": False,
            "emit.heartbeats.enabled": False,
            "sync.topic.acls.enabled": False,
            **settings,
        },
        "flows": {"A->T": {}},
        "spark": {"master": "local[*]", "remote": remote},
    }
    path = home / f"{t.alias}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "MIRRORFLOW_RUN_DIR": str(home / "runs")}
    t0 = time.monotonic()
    out = subprocess.run(
        [str(BIN / "mirrorflow"), "--config", str(path), "replicate", "--flow", "A->T", "--once", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    whole = time.monotonic() - t0
    if out.returncode != 0:
        raise SystemExit(f"mirrorflow replicate failed ({t.alias}): {out.stderr[-3000:]}")
    rep = json.loads(out.stdout)
    if rep["records"] != n:
        raise SystemExit(f"mirrorflow copied {rep['records']} records, not {n}")
    return whole, float(rep["copy_phase_s"])


def raw_run(a, t, parts: int, n: int) -> tuple[float, float]:
    """The raw pipe in a new process (this file with --raw-pipe); (whole s, the pipe's own s)."""
    spec = json.dumps({"src": a.client_config(), "dst": t.client_config(), "parts": parts, "n": n})
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, __file__, "--raw-pipe", spec], capture_output=True, text=True)
    whole = time.monotonic() - t0
    if out.returncode != 0:
        raise SystemExit(f"the raw pipe failed: {out.stderr[-3000:]}")
    return whole, float(out.stdout.strip().splitlines()[-1])


def raw_pipe_main(spec: str) -> int:
    s = json.loads(spec)

    @dataclass
    class Cfg:  # what raw_pipe reads of a cluster
        conf: dict

        def client_config(self) -> dict:
            return self.conf

    print(raw_pipe(Cfg(s["src"]), Cfg(s["dst"]), TOPIC, "raw.records", s["parts"], s["n"]))
    return 0


def _cmdline(p: psutil.Process) -> str:
    """A process's command line ("" for one that ended or is a zombie: a finished worker of the last run)."""
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


class Profiler:
    """py-spy (sampling, 100 Hz) of the Connect server's Python workers (its pyspark.daemon and the
    workers it forks) for one run, in raw (collapsed stacks) form."""

    def __init__(self, out: Path, server_pid: int) -> None:
        self.out = out
        daemons = [p for p in psutil.Process(server_pid).children(recursive=True) if "pyspark.daemon" in _cmdline(p)]
        self.proc = None
        if daemons:
            cmd = [
                str(BIN / "py-spy"),
                "record",
                "--pid",
                str(daemons[0].pid),
                "--subprocesses",
                "--nonblocking",
                "--rate",
                "100",
                "--format",
                "raw",
                "--output",
                str(out),
            ]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)  # attached before the job starts

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(2)  # SIGINT: py-spy writes its output and exits
            self.proc.wait(60)


def print_profile(contender: str, files: list[Path], top: int = 25) -> None:
    """Own samples per function (the innermost frame of each stack) and the share of each
    mirrorflow function in the stacks it appears in, summed over the runs."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for f in files:
        if not f.exists():
            continue
        for line in f.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            frames = [x for x in stack.split(";") if not x.startswith("process ")]
            if not frames:
                continue
            total += n
            own[frames[-1]] = own.get(frames[-1], 0) + n
            for fr in set(frames):
                if "mirrorflow" in fr or "confluent_kafka" in fr:
                    inclusive[fr] = inclusive.get(fr, 0) + n
    if not total:
        print(f"\nprofile {contender}: no samples (py-spy not installed, or no Python worker found)")
        return
    print(f"\nprofile {contender}: {total:,} samples of the Python workers (100 Hz, idle included); own time:")
    for fr, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {100 * n / total:5.1f}%  {fr}")
    print("  inclusive (mirrorflow and confluent_kafka frames):")
    for fr, n in sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {100 * n / total:5.1f}%  {fr}")


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stats(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.2f} s ({min(xs):.2f}-{max(xs):.2f})" if xs else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5, help="measured rounds after a warm-up round (default 5)")
    ap.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated: mirrorflow, raw, mm2")
    ap.add_argument("--busy", type=int, default=0, help="busy-loop processes through the measured rounds")
    ap.add_argument("--set", action="append", default=[], metavar="PROP=VALUE", help="a flow property (tuning)")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:PROP=VALUE,...",
        help="another mirrorflow contender, `mirrorflow:NAME`, with these flow properties over --set's",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the Connect server's Python workers in each mirrorflow run; print where their time went",
    )
    ap.add_argument("--raw-pipe", help=argparse.SUPPRESS)  # the raw pipe's own process
    args = ap.parse_args()
    if args.raw_pipe:
        return raw_pipe_main(args.raw_pipe)
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    if set(contenders) - set(CONTENDERS):
        ap.error(f"unknown contender(s): {sorted(set(contenders) - set(CONTENDERS))}")
    n, parts = args.records, args.partitions
    settings = dict(kv.split("=", 1) for kv in args.set)
    variants = {"mirrorflow": settings}
    for v in args.variant:
        name, _, props = v.partition(":")
        variants[f"mirrorflow:{name}"] = {**settings, **dict(kv.split("=", 1) for kv in props.split(",") if kv)}
        contenders.append(f"mirrorflow:{name}")

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-vs-raw-"))
    dev, spark = DevClusters(home), DevSparkServer(home)
    busy: list[subprocess.Popen] = []
    try:
        a = dev.up(["A"], attached=True)["A"]
        create(a, TOPIC, parts)
        t0 = time.time()
        seed(a, TOPIC, n, args.size, parts)
        print(f"seeded {n:,} records of {args.size} B over {parts} partitions in {time.time() - t0:.0f} s")
        copiers = [c for c in contenders if c.startswith("mirrorflow")]
        server = spark.up(port=free_port(), master="local[*]", attached=True) if copiers else None
        meter = CpuMeter({"source broker": [a.pid], "target broker": [], "spark": [server.pid] if server else []})
        runs: list[Run] = []
        profiles: dict[str, list[Path]] = {}
        for rnd in range(args.rounds + 1):
            if rnd == 1 and args.busy:
                busy = busy_loops(args.busy)
                print(f"{args.busy} busy-loop process(es) running from here on")
            k = rnd % len(contenders)
            for c in contenders[k:] + contenders[:k]:
                alias = f"T{rnd}{contenders.index(c)}"
                t = fresh_target(dev, alias, parts)
                meter.groups["target broker"] = [t.pid]
                before = load()
                meter.start()
                spy = Profiler(home / f"{alias}.spy", server.pid) if c in variants and args.profile and rnd else None
                if c in variants:
                    whole, copy = mirrorflow_run(home, a, t, server.remote, variants[c], n)
                elif c == "raw":
                    whole, copy = raw_run(a, t, parts, n)
                else:
                    whole, copy = mm2_run(home / alias, a, t, TOPIC, parts, n)
                cpu = meter.stop(server.pid if server else None)  # before py-spy exits: its CPU is no contender's
                if spy:
                    spy.stop()
                    profiles.setdefault(c, []).append(spy.out)
                run = Run(c, rnd, whole, copy, before, load(), cpu)
                dev.down([alias])
                shutil.rmtree(home / alias, ignore_errors=True)
                print(
                    f"  {'warm-up' if rnd == 0 else f'round {rnd}':8} {c:10} whole {whole:7.2f} s  copy {copy:7.2f} s"
                    f"  load {run.load_before} -> {run.load_after}  CPU s: "
                    + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items() if v >= 0.05),
                    flush=True,
                )
                if rnd:
                    runs.append(run)
        for p in busy:
            p.kill()
        summary(runs, contenders, n, args.size, parts, args.busy)
        for c, files in profiles.items():
            print_profile(c, files)
        return 0
    finally:
        for p in busy:
            p.kill()
        spark.down()
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


def summary(runs: list[Run], contenders: list[str], n: int, size: int, parts: int, busy: int) -> None:
    mb = n * size / 1e6
    rounds = sorted({r.round for r in runs})
    print(
        f"\n{n:,} x {size} B = {mb:,.0f} MB over {parts} partitions, exactly-once where the contender has it; "
        f"{len(rounds)} rounds, each contender to a fresh target; {os.cpu_count()} cores"
        + (f"; {busy} busy-loop process(es)" if busy else "")
    )
    print(
        "load average per round (at each run's start): "
        + "; ".join(
            f"{rnd}: " + " ".join(r.load_before.split("/")[0] for r in runs if r.round == rnd) for rnd in rounds
        )
    )
    print(f"{'':11} {'whole run: median (min-max)':>30} {'copy phase: median (min-max)':>30} {'copy MB/s':>9}")
    by = {c: [r for r in runs if r.contender == c] for c in contenders}
    for c, rs in by.items():
        print(
            f"{c:11} {stats([r.whole for r in rs]):>30} {stats([r.copy for r in rs]):>30} "
            f"{mb / statistics.median(r.copy for r in rs):9.1f}"
        )
    cpu_names = sorted({k for r in runs for k in r.cpu})
    print(
        "CPU seconds in a run, median: "
        + "; ".join(
            f"{c}: " + ", ".join(f"{k} {statistics.median(r.cpu.get(k, 0.0) for r in rs):.1f}" for k in cpu_names)
            for c, rs in by.items()
        )
    )
    for v in [c for c in by if c.startswith("mirrorflow")]:
        if "raw" in by:
            xs = ratios(by["raw"], by[v], "copy")
            met = statistics.median(xs) >= 0.95 and min(xs) > 0.8
            print(
                f"copy phase {v} vs raw pipe (raw s / {v} s) per round: {spread(xs)}"
                + (f"; goal: median >= 0.95x, worst > 0.8x: {'met' if met else 'MISSED'}" if v == "mirrorflow" else "")
            )
    if "mirrorflow" in by and "mm2" in by:
        xs = ratios(by["mm2"], by["mirrorflow"], "whole")
        print(f"whole run mirrorflow vs MM2 tuned (MM2 s / mirrorflow s) per round: {spread(xs)}")
    for c in [c for c in by if c != "raw"]:
        if "raw" in by:  # issue 39: every process's CPU (brokers included) against the pipe's, per round
            xs = ratios(by[c], by["raw"], "cpu_s")
            met = "met" if statistics.median(xs) <= 1.15 else "MISSED"
            goal = f"; goal: median <= 1.15x: {met}" if c == "mirrorflow" else ""
            print(f"CPU {c} vs raw pipe ({c} CPU s / raw CPU s) per round: {spread(xs)}{goal}")


def ratios(base: list[Run], other: list[Run], attr: str) -> list[float]:
    """Per round: the base's time / the other's (1.00 = as fast; above: the other is faster)."""
    of = {r.round: getattr(r, attr) for r in other}
    return [getattr(r, attr) / of[r.round] for r in sorted(base, key=lambda r: r.round)]


def spread(xs: list[float]) -> str:
    return (
        ", ".join(f"{x:.2f}x" for x in xs)
        + f"; median {statistics.median(xs):.2f}x (min {min(xs):.2f}, max {max(xs):.2f})"
    )


if __name__ == "__main__":
    sys.exit(main())
