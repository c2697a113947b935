"""Benchmark: `translate` and a checkpoint run after 10 and after 10,000 runs of history.

    .venv/bin/python bench/bench_offset_map.py [--runs 10000] [--early 10] [--partitions 1]
                                               [--fold-every 50] [--unfolded]

Starts its own local clusters A (source) and B (target) in a temporary home. The history is
written DIRECTLY, not by 10,000 real copy runs (which would take hours): per run and source
partition, one target transaction with exactly what a copy transaction writes to the state topics
(`state.state_writer.StateWriter`: an offset-map entry of 10 source offsets, with the commit marker's
target offset after it, and the new progress). The source partitions hold the records those runs
"copied", so the group offsets and log starts the floors come from are real. As in production, a
consumer group advances behind the copy (it commits 200 offsets behind), source retention
deletes old records (log start 5,000 offsets behind), and every `--fold-every` runs a checkpoint
pass folds the offset map (its checkpoint interval; `emit.checkpoints.interval.seconds` 60 with
a copy every ~1 s is 60).

It times, after `--early` runs and again after `--runs` runs (median of 9 / 7 repetitions, each
with new clients, as the CLI and a DAG task have):

* `translate`: `translate_group` of the group (what `mirrorflow translate` does);
* `checkpoint`: one `emit_checkpoints` pass (translation, MM2 checkpoints, and its fold);

and prints both, their ratio late/early, and the state left on B (offsets still in the
offset-map topic, runs in the snapshots). `--unfolded` never folds (the behaviour before snapshots: every read goes
through the whole offset-map topic) for comparison; its checkpoint pass is then timed without
its fold. It prints figures; it is not a test.
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

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402

TOPIC = "bench.orders"
PER_RUN = 10  # source offsets per run and partition
GROUP_LAG = 200  # the group commits this far behind the copy
RETAINED = 5000  # source retention keeps this many offsets behind the copy


class History:
    """Writes runs of history: source records up front, state transactions on B per run."""

    def __init__(self, cfg, flow, source, partitions: int) -> None:
        from mirrorflow.clients import FlowClients
        from mirrorflow.state.names import offset_map_topic, progress_topic
        from mirrorflow.state.records import Progress
        from mirrorflow.state.state_topics import ensure_state_topics
        from mirrorflow.state.state_writer import StateWriter

        self.cfg, self.flow, self.source, self.partitions = cfg, flow, source, partitions
        self.clients = FlowClients(cfg, flow)
        counts = ensure_state_topics(self.clients)
        self.writer = StateWriter(flow, counts[progress_topic(flow)], counts[offset_map_topic(flow)])
        self.producer = self.clients.producer(
            "target", {"linger.ms": 0}, {"transactional.id": f"bench-history-{flow.id}", "enable.idempotence": True}
        )
        self.producer.init_transactions(60)
        self.progress = {p: Progress.empty(TOPIC, p) for p in range(partitions)}
        self.runs = 0
        self.unpruned: list[str] = []  # folds that could not prune (why)
        self.group = Consumer({**source.client_config(), "group.id": "bench-app", "enable.auto.commit": False})
        self.admin = AdminClient(source.client_config())

    def write(self, runs: int) -> None:
        from mirrorflow.state.offset_map import MapEntry, Run

        for _ in range(runs):
            self.producer.begin_transaction()
            for p, prog in self.progress.items():
                a = self.runs * PER_RUN
                tgt = self.runs * (PER_RUN + 1)  # one commit marker per earlier transaction
                entry = MapEntry(TOPIC, p, a, a + PER_RUN, (Run(a, tgt, PER_RUN),), tgt + PER_RUN)
                new = prog.advanced(a, a + PER_RUN, tgt + PER_RUN, PER_RUN, int(time.time() * 1000))
                self.writer.write(self.producer, new, entry)
                self.progress[p] = new
            self.producer.commit_transaction(60)
            self.runs += 1

    def advance_source(self) -> None:
        """The application's group and source retention follow the copy."""
        done = self.runs * PER_RUN
        at = max(done - GROUP_LAG, done // 2)
        self.group.commit(offsets=[TopicPartition(TOPIC, p, at) for p in range(self.partitions)], asynchronous=False)
        if done > RETAINED:
            tps = [TopicPartition(TOPIC, p, done - RETAINED) for p in range(self.partitions)]
            for fut in self.admin.delete_records(tps).values():
                fut.result(60)

    def fold(self):
        from mirrorflow.groups.map_upkeep import fold_after_checkpoint

        report = fold_after_checkpoint(self.clients)
        assert report.error is None, report
        if report.skipped_reason:  # the source could not tell the floors this time: no pruning
            self.unpruned.append(report.skipped_reason)
        return report

    def state_left(self) -> tuple[int, int, int]:
        """(offsets still in the offset-map topic, runs in the snapshots, runs and spans they keep below
        their floors: where groups sit, landmarks)."""
        from mirrorflow.state.names import offset_map_topic
        from mirrorflow.state.store import StateStore

        topic = offset_map_topic(self.flow)
        store = StateStore(self.clients)
        n = self.clients.partitions("target", topic)
        left = sum(hi - lo for lo, hi in (store.reader.watermarks(topic, p) for p in range(n)))
        snaps = store.snapshots().snapshots.values()
        runs = sum(len(s.folded.runs) for s in snaps)
        below = sum(len(getattr(s.folded, "marks", ())) + len(getattr(s.folded, "spans", ())) for s in snaps)
        return left, runs, below

    def close(self) -> None:
        self.group.close()
        self.clients.close()


def produce_source(cluster, partitions: int, runs: int) -> None:
    a = AdminClient(cluster.client_config())
    a.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(60)
    time.sleep(1)
    p = Producer({**cluster.client_config(), "linger.ms": 50, "batch.size": 1_000_000, "enable.idempotence": True})
    for i in range(runs * PER_RUN):
        for part in range(partitions):
            p.produce(TOPIC, b"x" * 20, None, part)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(300) == 0


def timed(fn, repeat: int) -> float:
    took = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        took.append(time.perf_counter() - t0)
    return statistics.median(took)


def measure(cfg, flow, unfolded: bool) -> tuple[float, float, int]:
    from mirrorflow.groups.checkpoint import emit_checkpoints, translate_group

    rows = translate_group(cfg, flow, "bench-app")
    assert rows and all(r.status == "exact" for r in rows), rows
    t = timed(lambda: translate_group(cfg, flow, "bench-app"), 9)
    if unfolded:  # the checkpoint pass without its fold: what it cost before snapshots
        from mirrorflow.groups import map_upkeep

        keep = map_upkeep.fold_after_checkpoint
        map_upkeep.fold_after_checkpoint = lambda clients, known=None: None  # type: ignore[assignment]
        try:
            c = timed(lambda: emit_checkpoints(cfg, flow), 7)
        finally:
            map_upkeep.fold_after_checkpoint = keep
    else:
        c = timed(lambda: emit_checkpoints(cfg, flow), 7)
    return t, c, len(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--early", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--fold-every", type=int, default=50)
    ap.add_argument("--unfolded", action="store_true", help="never fold (the behaviour before snapshots)")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-"))
    dev = DevClusters(home)
    try:
        clusters = dev.up(["A", "B"], attached=True)
        a, b = clusters["A"], clusters["B"]
        import yaml

        raw_cfg = {
            "clusters": {x.alias: x.client_config() for x in (a, b)},
            "defaults": {"topics": r"bench\..*", "groups": "bench-.*", "sync.topic.acls.enabled": False},
            "flows": {"A->B": {}},
        }
        cfg_path = home / "bench.yaml"
        cfg_path.write_text(yaml.safe_dump(raw_cfg))
        os.environ["MIRRORFLOW_RUN_DIR"] = str(home / "runs")
        from mirrorflow import config as config_mod

        cfg = config_mod.load(cfg_path)
        flow = cfg.flow("A->B")
        t0 = time.time()
        produce_source(a, args.partitions, args.runs)
        print(f"source: {args.runs * PER_RUN * args.partitions:,} records in {time.time() - t0:.1f} s")
        hist = History(cfg, flow, a, args.partitions)
        figures = {}
        t0 = time.time()
        for stop in (args.early, args.runs):
            while hist.runs < stop:
                step = min(stop - hist.runs, args.fold_every - hist.runs % args.fold_every)
                hist.write(step)
                hist.advance_source()
                if not args.unfolded and hist.runs % args.fold_every == 0:
                    hist.fold()
            print(f"history: {hist.runs:,} runs written in {time.time() - t0:.1f} s")
            figures[stop] = measure(cfg, flow, args.unfolded)
            left, runs, below = hist.state_left()
            print(f"after {stop:,} runs: {left:,} offsets left in the offset-map topic (entries and their commit "
                  f"markers), {runs:,} runs in the snapshots, {below:,} runs and spans kept below their floors")
        hist.close()
        if hist.unpruned:
            print(f"{len(hist.unpruned)} fold(s) could not prune (floors unknown), e.g.: {hist.unpruned[0]}")
        (te, ce, n), (tl, cl, _) = figures[args.early], figures[args.runs]
        mode = "never folded (before snapshots)" if args.unfolded else f"folded every {args.fold_every} runs"
        print(f"\none flow, {args.partitions} source partition(s), {n} translated, {mode}, {os.cpu_count()} cores")
        print(f"{'':12} {'after ' + format(args.early, ','):>14} {'after ' + format(args.runs, ','):>14} {'ratio':>7}")
        print(f"{'translate':12} {te * 1000:11.1f} ms {tl * 1000:11.1f} ms {tl / te:6.2f}x")
        print(f"{'checkpoint':12} {ce * 1000:11.1f} ms {cl * 1000:11.1f} ms {cl / ce:6.2f}x")
        return 0
    finally:
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
