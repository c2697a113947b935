"""Benchmark: `mirrorflow verify` against reading both sides raw.

    .venv/bin/python bench/bench_verify.py [--records 200000] [--size 512] [--partitions 4]

Starts its own local clusters A (source) and B (target) in a temporary home, produces N records
of SIZE bytes over P partitions to A, copies them with one replicate run (direct mode, exactly-once,
so the target holds commit markers between transactions), then times (best of 3 each):

* `raw read`: every record of the source topic and of the remote topic read through the same
  LogReader verify uses (read_committed), touching key, value, headers and timestamp: the floor
  for any record-by-record comparison;
* `verify`: `verify_flow` over the whole flow (reads both sides, walks them through the offset
  map, compares every pair, checksums every range);

and prints records/s of each and the ratio verify / raw read. It prints figures; it is not a test.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT), str(ROOT / "bench")]

from bench_replicate import create, seed  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402


def raw_read(clients, topic: str, remote: str, partitions: int) -> tuple[float, int]:
    """Read both topics whole through LogReader; (seconds, records read)."""
    t0 = time.perf_counter()
    n = 0
    for side, name in (("source", topic), ("target", remote)):
        reader = clients.reader(side, group="bench-verify-raw")
        for p in range(partitions):
            for m in reader.read(name, {p: 0}, 600):
                m.key(), m.value(), m.headers(), m.timestamp()
                n += 1
    return time.perf_counter() - t0, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    n, size, parts = args.records, args.size, args.partitions

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-verify-"))
    dev = DevClusters(home)
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        topic, remote = "bench.records", "A.bench.records"
        create(a, topic, parts)
        create(b, remote, parts)
        seed(a, topic, n, size, parts)

        import yaml

        from mirrorflow import config as config_mod
        from mirrorflow.clients import FlowClients
        from mirrorflow.ops.verify.verify import verify_flow
        from mirrorflow.replication.run.runner import run_once

        raw_cfg = {"clusters": {x.alias: x.client_config() for x in (a, b)},
                   "defaults": {"topics": r"bench\..*", "tasks.max": parts}, "flows": {"A->B": {}}}
        cfg_path = home / "bench.yaml"
        cfg_path.write_text(yaml.safe_dump(raw_cfg))
        cfg = config_mod.load(cfg_path)
        flow = cfg.flow("A->B")
        t0 = time.perf_counter()
        rep = run_once(cfg, flow, mode="direct")
        assert rep.ok and rep.records == n, rep.render()
        print(f"seeded and copied {n:,} records of {size} B over {parts} partitions "
              f"(copy {time.perf_counter() - t0:.1f} s, {sum(p.transactions for p in rep.partitions)} transactions)")

        raw_times, verify_times = [], []
        for _ in range(3):
            with FlowClients(cfg, flow) as clients:
                s, read = raw_read(clients, topic, remote, parts)
                assert read == 2 * n, read
                raw_times.append(s)
            with FlowClients(cfg, flow) as clients:
                t0 = time.perf_counter()
                report = verify_flow(clients)
                verify_times.append(time.perf_counter() - t0)
                assert report.ok and sum(p.matched for p in report.partitions) == n, report.render()
        raw_s, ver_s = min(raw_times), min(verify_times)
        print(f"\n{'':10} {'s':>7} {'records/s':>11}   (records = source records; both sides are read)")
        print(f"{'raw read':10} {raw_s:7.2f} {n / raw_s:11,.0f}")
        print(f"{'verify':10} {ver_s:7.2f} {n / ver_s:11,.0f}")
        print(f"\nverify / raw read time: {ver_s / raw_s:.2f}x")
        return 0
    finally:
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
