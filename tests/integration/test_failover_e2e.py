"""End to end on real clusters: a group fails over from A to B and resumes at exactly the next record.

Data is copied by the data plane (`mirrorflow.replication.run.runner.run_once`, direct mode: the same unit copier
Spark runs, without Spark's start-up cost); topics are created by the control plane's sync.
"""
from __future__ import annotations

import io
import json
import time
from contextlib import redirect_stdout

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirrorflow import cli
from mirrorflow.mm2 import remote_cluster
from mirrorflow.groups.checkpoint import emit_checkpoints, translate_group
from mirrorflow.groups.offset_sync import sync_group_offsets
from mirrorflow.groups.heartbeat import emit_heartbeats, replication_latency
from mirrorflow.replication.run.runner import run_once
from mirrorflow.metadata.sync import sync_flow
from tests.integration.rcu_java import compile_probe, java_translate, run_probe
from tests.support import admin, consume_all, create_topic, end_transaction, produce, write_config

pytestmark = pytest.mark.integration


def replicate(cfg, name: str = "A->B") -> None:
    flow = cfg.flow(name)
    rep = sync_flow(cfg, flow, "topics")
    assert rep.ok, rep.render()
    out = run_once(cfg, flow, mode="direct")
    assert out.ok, out.render()


def cli_json(cfg, *args: str) -> dict:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = cli.main(["--config", str(cfg.path), *args, "--json"])
    assert rc == 0, buf.getvalue()
    return json.loads(buf.getvalue())


def consume_some(cluster, group: str, topics: list[str], counts: dict[tuple[str, int], int]) -> dict:
    """A group member reads `counts[(topic, partition)]` records per partition and commits after each one,
    as an application would (commit = offset of the last record read + 1). Returns the records read."""
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe(topics)
    read: dict[tuple[str, int], list[bytes]] = {k: [] for k in counts}
    deadline = time.monotonic() + 60
    while any(len(read[k]) < n for k, n in counts.items()) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        k = (m.topic(), m.partition())
        if len(read[k]) < counts[k]:
            read[k].append(m.value())
            c.commit(message=m, asynchronous=False)
        else:  # read too far: go back so the next poll is not a gap in what we committed
            c.seek(TopicPartition(m.topic(), m.partition(), m.offset()))
    c.close()
    assert all(len(read[k]) == n for k, n in counts.items()), {k: len(v) for k, v in read.items()}
    return read


def consume_rest(cluster, group: str, topics: list[str], expected: int, timeout: float = 60) -> dict:
    """The same group on another cluster reads until `expected` records arrived and a bit more."""
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe(topics)
    got: dict[tuple[str, int], list[bytes]] = {}
    n = 0
    deadline = time.monotonic() + timeout
    quiet_until = None
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.setdefault((m.topic(), m.partition()), []).append(m.value())
            n += 1
        if n >= expected and quiet_until is None:
            quiet_until = time.monotonic() + 3  # keep polling: a duplicate would show up now
        if quiet_until is not None and time.monotonic() > quiet_until:
            break
    c.close()
    return got


def wait_compacted(cluster, topic: str, expect_missing: set[int], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        offsets = {r.offset for r in consume_all(cluster, topic)}
        if not (offsets & expect_missing):
            return
        time.sleep(1)
    raise AssertionError(f"{topic} was not compacted within {timeout}s")


def test_failover_resumes_at_exactly_the_next_record(tmp_path, source, target, unique, tmp_path_factory):
    prefix = unique("fo")
    compacted, txn, plain = f"{prefix}.compacted", f"{prefix}.txn", f"{prefix}.plain"
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": f"{prefix}\\..*", "sync.group.offsets.enabled": True,
                                 "state.topic.partitions": 2}})
    # 1. compaction holes: keys a,b,a,c,d,c,e,f,e,g -> offsets 0, 3 and 6 are compacted away
    create_topic(source, compacted, 1, {"cleanup.policy": "compact", "segment.ms": "100",
                                        "min.cleanable.dirty.ratio": "0.001", "min.compaction.lag.ms": "0",
                                        "delete.retention.ms": "100"})
    keys = ["a", "b", "a", "c", "d", "c", "e", "f", "e", "g"]
    produce(source, compacted, [{"partition": 0, "key": k.encode(), "value": f"c{i}".encode()} for i, k in enumerate(keys)])
    time.sleep(0.3)
    produce(source, compacted, [{"partition": 0, "key": b"roll", "value": b"c10"}])  # rolls the segment
    wait_compacted(source, compacted, {0, 3, 6})
    # 2. transactions: committed t0..t2 (marker 3), aborted 4,5 (marker 6), committed t3..t5 (marker 10)
    create_topic(source, txn, 1)
    p = Producer({**source.client_config(), "transactional.id": f"tx-{prefix}"})
    p.init_transactions(30)
    for values, commit in (([b"t0", b"t1", b"t2"], True), ([b"x0", b"x1"], False), ([b"t3", b"t4", b"t5"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(txn, v, partition=0)
        end_transaction(p, commit)
    # 3. a plain topic with 2 partitions
    create_topic(source, plain, 2)
    produce(source, plain, [{"partition": i % 2, "value": f"p{i}".encode()} for i in range(20)])

    # the application reads part of each partition on A and commits as it goes
    group = f"app-{prefix}"
    counts = {(compacted, 0): 3, (txn, 0): 3, (plain, 0): 4, (plain, 1): 7}
    read_on_a = consume_some(source, group, [compacted, txn, plain], counts)
    assert read_on_a[(compacted, 0)] == [b"c1", b"c2", b"c4"]   # next: offset 5 (c5); 3 is a hole
    assert read_on_a[(txn, 0)] == [b"t0", b"t1", b"t2"]         # committed 3 = the commit marker

    replicate(cfg)
    out = cli_json(cfg, "checkpoint", "--flow", "A->B")
    cps = {(o["source_topic"], o["partition"]): o for o in out["checkpoints"]["offsets"] if o["group"] == group}
    assert {k: (v["status"], v["action"]) for k, v in cps.items()} == {
        (compacted, 0): ("exact", "new"), (txn, 0): ("exact", "new"),
        (plain, 0): ("exact", "new"), (plain, 1): ("exact", "new")}
    # each checkpoint is the target offset of the next unread record (c5 after the hole, t3 after the
    # marker and the aborted records), wherever the copier's own transactions put it
    on_b = {(r.value): r.offset for t in (compacted, txn) for r in consume_all(target, f"A.{t}")}
    assert cps[(compacted, 0)]["target_offset"] == on_b[b"c5"]
    assert cps[(txn, 0)]["target_offset"] == on_b[b"t3"]
    assert out["group_sync"]["committed"] == {group: 4}

    # Java's RemoteClusterUtils sees exactly what we committed on B
    probe = compile_probe(tmp_path_factory.mktemp("rcu"))
    java = java_translate(probe, target.bootstrap_servers, "A", group)
    assert java == {(f"A.{t}", p): (v["target_offset"], "") for (t, p), v in cps.items()}
    assert {(tp.topic, tp.partition): om.offset for tp, om in
            remote_cluster.translate_offsets(cfg.cluster("B").client_config(), "A", group).items()} == {k: v[0] for k, v in java.items()}

    # failover: the same group on B reads exactly the records it had not read on A
    src_all = {k: [r.value for r in consume_all(source, t) if r.partition == k[1]] for k in counts for t in [k[0]]}
    expected = {(f"A.{t}", p): src_all[(t, p)][n:] for (t, p), n in counts.items()}
    got = consume_rest(target, group, [f"A.{compacted}", f"A.{txn}", f"A.{plain}"], sum(map(len, expected.values())))
    assert got == expected
    assert got[(f"A.{compacted}", 0)] == [b"c5", b"c7", b"c8", b"c9", b"c10"]
    assert got[(f"A.{txn}", 0)] == [b"t3", b"t4", b"t5"]


def test_translation_ahead_before_and_catch_up(tmp_path, source, target, unique):
    prefix = unique("ab")
    topic, early = f"{prefix}.t", f"{prefix}.early"
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": f"{prefix}\\..*", "sync.group.offsets.enabled": True,
                                 "state.topic.partitions": 2}})
    flow = cfg.flow("A->B")
    create_topic(source, topic)
    create_topic(source, early)
    produce(source, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(10)])
    produce(source, early, [{"partition": 0, "value": f"e{i}".encode()} for i in range(10)])
    group = f"g-{prefix}"
    consume_some(source, group, [early], {(early, 0): 2})
    # the source deletes offsets < 5 of `early` before they were ever copied
    a = admin(source)
    for f in a.delete_records([TopicPartition(early, 0, 5)]).values():
        f.result(30)
    replicate(cfg)
    # the group reads further on A than B has: 10 -> 15 of 16 records are not on B yet
    produce(source, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(10, 16)])
    consume_some(source, group, [topic], {(topic, 0): 15})

    rows = {r.source_topic: r for r in translate_group(cfg, flow, group)}
    # target offsets from the copies themselves (each copy unit's aborted transaction comes first)
    on_b = {r.value: r.offset for t in (topic, early) for r in consume_all(target, f"A.{t}")}
    assert (rows[topic].status, rows[topic].target_offset, rows[topic].missing) == ("ahead", on_b[b"v9"] + 1, 5)
    assert (rows[early].status, rows[early].target_offset, rows[early].missing) == ("before", on_b[b"e5"], 3)
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli.main(["--config", str(cfg.path), "translate", "--flow", "A->B", "--group", group]) == 0
    text = buf.getvalue()
    assert "ahead" in text and "before" in text and "never replicated" in text

    run = emit_checkpoints(cfg, flow, groups=[group])
    sync = sync_group_offsets(cfg, flow, store=run.store, groups=[group])
    assert sync.committed == {group: 2}
    # catch up: replicate the rest; the checkpoint advances to exactly the copy of source offset 15
    replicate(cfg)
    run = emit_checkpoints(cfg, flow, groups=[group])
    v15 = next(r.offset for r in consume_all(target, f"A.{topic}") if r.value == b"v15")
    assert [(c.topic, c.upstream_offset, c.downstream_offset) for c in run.emitted] == [(f"A.{topic}", 15, v15)]
    sync_group_offsets(cfg, flow, store=run.store, groups=[group])
    got = consume_rest(target, group, [f"A.{topic}", f"A.{early}"], 1 + 5)
    assert got == {(f"A.{topic}", 0): [b"v15"], (f"A.{early}", 0): [f"e{i}".encode() for i in range(5, 10)]}


def test_active_active_has_no_cycles(tmp_path, source, target, unique, tmp_path_factory):
    prefix = unique("aa")
    flows = {"A->B": {"topics": f"{prefix}\\..*", "state.topic.partitions": 1},
             "B->A": {"topics": f"{prefix}\\..*", "state.topic.partitions": 1}}
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target}, flows)
    topic = f"{prefix}.orders"
    create_topic(source, topic)
    produce(source, topic, [{"partition": 0, "value": f"o{i}".encode()} for i in range(5)])
    group = f"g-{prefix}"
    consume_some(source, group, [topic], {(topic, 0): 2})
    for name in ("A->B", "B->A"):
        emit_heartbeats(cfg, cfg.flow(name))
    for _ in range(2):  # twice: a cycle would show up in the second round
        replicate(cfg, "A->B")
        replicate(cfg, "B->A")
    a_topics = set(admin(source).list_topics(timeout=10).topics)
    b_topics = set(admin(target).list_topics(timeout=10).topics)
    assert {"heartbeats", "B.heartbeats"} <= a_topics and {"heartbeats", "A.heartbeats"} <= b_topics
    assert not {t for t in a_topics if t.startswith("B.A.") or t.startswith("A.")}
    assert not {t for t in b_topics if t.startswith("A.B.") or t.startswith("B.")}
    assert f"A.{topic}" in b_topics

    # the group on A is checkpointed A->B; a group on B reading the replica is not checkpointed back
    consume_some(target, group, [f"A.{topic}"], {(f"A.{topic}", 0): 1})
    ab = emit_checkpoints(cfg, cfg.flow("A->B"), groups=[group])
    ba = emit_checkpoints(cfg, cfg.flow("B->A"), groups=[group])
    o2 = next(r.offset for r in consume_all(target, f"A.{topic}") if r.value == b"o2")  # the copy of offset 2
    assert [(c.topic, c.downstream_offset) for c in ab.emitted] == [(f"A.{topic}", o2)]
    assert ba.emitted == [] and ba.groups == []  # its only offset is on A.<topic>: a cycle for B->A

    # latency and topology from the replicated heartbeats, the same as Java sees them
    lat = replication_latency(cfg, cfg.flow("A->B"))
    assert lat.topic == "A.heartbeats" and lat.latency_ms is not None and lat.emitter == ("B", "A")
    assert remote_cluster.upstream_clusters(cfg.cluster("B").client_config()) >= {"A"}
    assert "B" not in remote_cluster.upstream_clusters(cfg.cluster("B").client_config())
    probe = compile_probe(tmp_path_factory.mktemp("rcu"))
    java = run_probe(probe, target.bootstrap_servers, "topology", "A", "B")
    assert {r[1]: int(r[2]) for r in java if r[0] == "hops"} == {
        "A": remote_cluster.replication_hops(cfg.cluster("B").client_config(), "A"), "B": -1}
    assert {r[1] for r in java if r[0] == "upstream"} == remote_cluster.upstream_clusters(cfg.cluster("B").client_config())
