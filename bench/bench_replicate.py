"""Benchmark: a replicate run (spark-submit, exactly-once on and off) against a raw pipe.

    .venv/bin/python bench/bench_replicate.py [--records 100000] [--size 1024] [--partitions 8]

Starts its own local clusters (A = source, B = exactly-once target, C = at-least-once target) in a
temporary home, produces N records of SIZE bytes over P partitions to A, then times:

* `eos`:  `mirrorflow` replicate A->B, exactly.once=true  (spark-submit, local[*])
* `alo`:  `mirrorflow` replicate A->C, exactly.once=false (spark-submit, local[*])
* `raw`:  one process, confluent-kafka consumer -> producer, no transactions, same client settings

and prints records/s and MB/s, for the whole run and for the copy phase (first unit start to last
unit end as the copier measures it, i.e. without Spark start-up), with the ratios to the raw pipe.
The brokers stop when the benchmark ends. It prints figures; it is not a test.
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

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow.dev.cluster import DevClusters  # noqa: E402


def create(cluster, name: str, partitions: int) -> None:
    a = AdminClient(cluster.client_config())
    a.create_topics([NewTopic(name, partitions, 1, config={"max.message.bytes": "10000000"})])[name].result(60)
    while True:
        md = a.list_topics(name, timeout=10).topics.get(name)
        if md and not md.error and len(md.partitions) == partitions:
            return
        time.sleep(0.2)


def seed(cluster, topic: str, n: int, size: int, partitions: int) -> None:
    p = Producer({**cluster.client_config(), "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 2_000_000,
                  "enable.idempotence": True})
    blob = os.urandom(size + 1024)
    now = int(time.time() * 1000)
    for i in range(n):
        while True:
            try:
                p.produce(topic, blob[i % 1024:i % 1024 + size], b"key-%d" % (i % 1000), i % partitions,
                          timestamp=now, headers=[("n", b"%d" % i)])
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def raw_pipe(src, dst, topic: str, target_topic: str, partitions: int, n: int) -> float:
    """One process: consumer -> producer, no transactions. Returns seconds."""
    from mirrorflow.replication.reader import CONSUMER_DEFAULTS
    from mirrorflow.replication.writer import PRODUCER_DEFAULTS

    # the copier's own tuning, without idempotence or transactions: the fastest honest pipe
    pconf = {k: v for k, v in PRODUCER_DEFAULTS.items() if k != "transaction.timeout.ms"}
    pconf["enable.idempotence"] = False
    t0 = time.time()
    c = Consumer({**src.client_config(), **CONSUMER_DEFAULTS, "group.id": "bench-raw", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    p = Producer({**dst.client_config(), **pconf})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    produce = p.produce
    done = 0
    eof: set[int] = set()
    while done < n and len(eof) < partitions:
        for m in c.consume(10_000, 0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            ts = m.timestamp()[1]
            while True:
                try:
                    produce(target_topic, m.value(), m.key(), m.partition(), timestamp=ts, headers=m.headers())
                    break
                except BufferError:
                    p.poll(0.01)
            done += 1
    assert p.flush(120) == 0
    c.close()
    assert done == n, (done, n)
    return time.time() - t0


def replicate(cfg_path: Path, flow_name: str):
    from mirrorflow import config as config_mod
    from mirrorflow.replication.runner import run_once

    cfg = config_mod.load(cfg_path)
    flow = cfg.flow(flow_name)
    t0 = time.time()
    rep = run_once(cfg, flow, mode="submit")
    whole = time.time() - t0
    assert rep.ok, rep.render()
    return rep, whole


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--txn-records", type=int, default=None, help="transaction.max.records (default: the config's)")
    args = ap.parse_args()
    n, size, parts = args.records, args.size, args.partitions

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-"))
    dev = DevClusters(home)
    try:
        clusters = dev.up(["A", "B", "C"], attached=True)
        a, b, c = clusters["A"], clusters["B"], clusters["C"]
        topic = "bench.records"
        create(a, topic, parts)
        create(b, f"A.{topic}", parts)
        create(c, f"A.{topic}", parts)
        create(b, "raw.records", parts)
        t0 = time.time()
        seed(a, topic, n, size, parts)
        print(f"seeded {n:,} records of {size} bytes over {parts} partitions in {time.time() - t0:.1f} s")

        import yaml
        extra = {"transaction.max.records": args.txn_records} if args.txn_records else {}
        raw_cfg = {"clusters": {x.alias: x.client_config() for x in (a, b, c)},
                   "defaults": {"topics": r"bench\..*", "tasks.max": parts, **extra},
                   "flows": {"A->B": {"exactly.once": True}, "A->C": {"exactly.once": False}},
                   "spark": {"master": args.master}}
        cfg_path = home / "bench.yaml"
        cfg_path.write_text(yaml.safe_dump(raw_cfg))
        os.environ["MIRRORFLOW_RUN_DIR"] = str(home / "runs")

        raw_s = raw_pipe(a, b, topic, "raw.records", parts, n)
        eos, eos_whole = replicate(cfg_path, "A->B")
        alo, alo_whole = replicate(cfg_path, "A->C")
        assert eos.records == n and alo.records == n, (eos.records, alo.records)

        mb = n * size / 1e6
        rows = [("raw pipe", raw_s, raw_s), ("exactly-once", eos_whole, eos.copy_phase_s),
                ("at-least-once", alo_whole, alo.copy_phase_s)]
        print(f"\n{n:,} records x {size} B = {mb:,.0f} MB over {parts} partitions, Spark master {args.master}, "
              f"{os.cpu_count()} cores")
        print(f"{'':14} {'whole s':>8} {'rec/s':>10} {'MB/s':>7} {'ratio':>6} | {'copy s':>7} {'rec/s':>10} "
              f"{'MB/s':>7} {'ratio':>6}")
        for name, whole, copy in rows:
            print(f"{name:14} {whole:8.2f} {n / whole:10,.0f} {mb / whole:7.1f} {raw_s / whole:6.2f} | "
                  f"{copy:7.2f} {n / copy:10,.0f} {mb / copy:7.1f} {raw_s / copy:6.2f}")
        print(f"\nexactly-once: {eos.units} units, {sum(p.transactions for p in eos.partitions)} transactions; "
              f"Spark job {eos.spark_s:.1f} s (start-up and scheduling = {eos.spark_s - eos.copy_phase_s:.1f} s)")
        print(f"at-least-once: Spark job {alo.spark_s:.1f} s (start-up = {alo.spark_s - alo.copy_phase_s:.1f} s)")
        return 0
    finally:
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
