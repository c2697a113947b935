"""The offset map stays bounded: folds into snapshots, truncation, pruning -- translation stays exact.

Real copies (`run_once`, direct mode) write the offset map; a checkpoint pass folds it
(state.compaction via groups.map_upkeep). Each flow gets a source alias of its own, so it has state
topics of its own on B and the truncation can be checked exactly.
"""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirrorflow.clients import FlowClients
from mirrorflow.errors import StateError
from mirrorflow.groups.checkpoint import emit_checkpoints, translate_group
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.compaction import fold_offset_map
from mirrorflow.state.names import offset_map_topic, snapshot_topic
from mirrorflow.state.state_topics import state_partition
from mirrorflow.state.store import StateStore
from tests.integration.replicate_helpers import delete_records
from tests.support import admin, consume_all, create_topic, end_transaction, load_offset_map, produce, write_config

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000) - 3_600_000  # recent: source retention must not delete them


def flow_for(tmp_path, source, target, topic: str, **props):
    alias = f"M{uuid.uuid4().hex[:6]}"
    flow_props = {"topics": topic, "state.topic.partitions": 2, "transaction.max.records": 7,
                  "producer.transaction.timeout.ms": 15000, **props}
    cfg = write_config(tmp_path / f"{alias}.yaml", {alias: source, "B": target}, {f"{alias}->B": flow_props})
    return cfg, cfg.flow(f"{alias}->B"), f"{alias}.{topic}"


def records(n: int, partitions: int, tag: str) -> list[dict]:
    return [{"partition": i % partitions, "key": f"k{i}".encode(), "value": f"{tag}-{i}".encode(),
             "timestamp": NOW + i} for i in range(n)]


def source_transactions(source, topic: str, tag: str) -> None:
    """A committed and an aborted transaction on partition 0: markers and aborted records are
    source offsets without a record to copy."""
    p = Producer({**source.client_config(), "transactional.id": f"src-{tag}"})
    p.init_transactions(30)
    for n, commit in enumerate((True, False, True)):
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, f"{tag}-txn-{n}-{i}".encode(), b"k", 0, timestamp=NOW)
        end_transaction(p, commit)


def replicate(cfg, flow) -> None:
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok, rep.render()


def commit(source, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    c.close()


def truth(source, target, topic: str, remote: str, partition: int) -> dict[int, int]:
    """Ground truth from the records themselves: source offset g -> target offset of the first
    copied record at or after g, for every g from the source's log start to its last record
    (records are matched by value; every value is unique)."""
    src = consume_all(source, topic, [partition])
    where = {r.value: r.offset for r in consume_all(target, remote, [partition])}
    out, j = {}, 0
    for g in range(src[0].offset, src[-1].offset + 1):
        while src[j].offset < g:
            j += 1
        out[g] = where[src[j].value]
    return out


def watermarks(cluster, topic: str, partitions: int) -> list[tuple[int, int]]:
    c = Consumer({**cluster.client_config(), "group.id": "mf-test-wm"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False) for p in range(partitions)]
    finally:
        c.close()


def test_folds_truncate_and_prune_while_translation_stays_exact(tmp_path, source, target, topic_name):
    t = topic_name
    cfg, flow, remote = flow_for(tmp_path, source, target, t)
    create_topic(source, t, 2)
    create_topic(target, remote, 2)
    # three runs of history: plain records, source transactions (markers, aborted records), a gap
    produce(source, t, records(40, 2, "a"))
    replicate(cfg, flow)
    source_transactions(source, t, f"{t}-1")
    produce(source, t, records(30, 2, "b"))
    replicate(cfg, flow)
    produce(source, t, records(40, 2, "c"))
    delete_records(source, t, 1, 45)  # partition 1's progress is 35: 35..44 are lost before copied
    replicate(cfg, flow)
    keys = [(t, 0), (t, 1)]
    before = load_offset_map(cfg, flow, keys)  # no snapshot yet: the whole topic, as before the fold existed
    assert before[(t, 1)].lost == 10
    for p in (0, 1):
        for g, tgt in truth(source, target, t, remote, p).items():
            assert before[(t, p)].translate(g).target_offset == tgt, (p, g)
    n_entries = sum(len(v) for v in StateStore_entries(cfg, flow, keys).values())
    assert n_entries >= 12  # transactions of at most 7 records

    # groups: the floor is min(log start, every group's committed offset) per partition
    group = f"g-{t}"
    commit(source, group, {(t, 0): 25, (t, 1): 50})
    commit(source, f"other-{t}", {(t, 0): 30})
    delete_records(source, t, 0, 20)
    rows_before = translate_group(cfg, flow, group)

    run = emit_checkpoints(cfg, flow)
    fold = run.offset_map
    assert fold.error is None and fold.skipped_reason is None, fold
    assert fold.partitions == 2 and fold.tail_entries == n_entries
    assert fold.pruned == {f"{t}-0": 20, f"{t}-1": 45}
    ends = watermarks(target, offset_map_topic(flow), 2)
    assert fold.truncated == {p: hi for p, (lo, hi) in enumerate(ends) if hi > 0}
    assert all(lo == hi for lo, hi in ends)  # every entry folded, the topic truncated
    assert sum(hi for _, hi in watermarks(target, snapshot_topic(flow), 2)) > 0

    after = load_offset_map(cfg, flow, keys)
    floors = {0: 20, 1: 45}
    for p in (0, 1):
        pm, old = after[(t, p)], before[(t, p)]
        assert pm.floor == floors[p] and pm.lost == old.lost and pm.tgt_end == old.tgt_end
        for g in range(floors[p], old.end + 5):
            assert pm.translate(g) == old.translate(g), (p, g)
        for g in range(floors[p]):
            tr = pm.translate(g)
            if old.start is not None and g >= old.start:
                # below every group and the log start: a landmark at or before it, never a later record
                assert tr.status == "pruned" and tr.target_offset <= old.translate(g).target_offset, (p, g, tr)
    assert translate_group(cfg, flow, group) == rows_before

    # nothing new: the next pass translates the same from the snapshots; its fold rewrites nothing
    again_run = emit_checkpoints(cfg, flow)
    assert [r for r, _ in again_run.rows if r.group == group] == rows_before
    again = again_run.offset_map
    assert again.error is None and again.tail_entries == 0 and again.snapshots_written == 0, again
    assert load_offset_map(cfg, flow, keys)[(t, 0)].translate(33) == before[(t, 0)].translate(33)

    # more runs after the fold: snapshot + tail, then folded again, exact against the records
    produce(source, t, records(30, 2, "d"))
    replicate(cfg, flow)
    source_transactions(source, t, f"{t}-2")
    replicate(cfg, flow)
    for step in ("tail", "folded"):
        maps = load_offset_map(cfg, flow, keys)
        for p in (0, 1):
            for g, tgt in truth(source, target, t, remote, p).items():
                if g >= floors[p]:
                    assert maps[(t, p)].translate(g).target_offset == tgt, (step, p, g)
        if step == "tail":
            assert emit_checkpoints(cfg, flow).offset_map.tail_entries > 0


def StateStore_entries(cfg, flow, keys):
    with FlowClients(cfg, flow) as clients:
        return StateStore(clients).entries(keys)


def test_a_fold_that_stops_before_truncating_and_stale_readers_change_nothing(tmp_path, source, target, topic_name):
    # folded entries left in the topic (a crash between the commit and the truncation) are skipped
    # by readers and by the next fold: a gap event is not counted twice
    t = topic_name
    cfg, flow, remote = flow_for(tmp_path, source, target, t)
    create_topic(source, t, 1)
    create_topic(target, remote, 1)
    produce(source, t, records(20, 1, "a"))
    replicate(cfg, flow)
    produce(source, t, records(20, 1, "b"))
    delete_records(source, t, 0, 30)
    replicate(cfg, flow)
    before = load_offset_map(cfg, flow, [(t, 0)])[(t, 0)]
    assert before.lost == 10
    with FlowClients(cfg, flow) as clients:
        first = fold_offset_map(clients, truncate=False)
    assert first.truncated == {} and first.snapshots_written == 1
    assert [lo for lo, _ in watermarks(target, offset_map_topic(flow), 2)] == [0, 0]  # nothing deleted
    mid = load_offset_map(cfg, flow, [(t, 0)])[(t, 0)]
    assert mid.lost == 10 and mid.entries == before.entries
    assert [mid.translate(g) for g in range(45)] == [before.translate(g) for g in range(45)]
    with FlowClients(cfg, flow) as clients:
        second = fold_offset_map(clients)
    assert second.tail_entries == 0 and second.snapshots_written == 0 and second.truncated
    final = load_offset_map(cfg, flow, [(t, 0)])[(t, 0)]
    assert final.lost == 10 and [final.translate(g) for g in range(45)] == [before.translate(g) for g in range(45)]

    # a reader whose snapshots went stale while it read the tail (a fold committed and truncated in
    # between) notices and reads again, instead of missing the truncated entries
    produce(source, t, records(10, 1, "c"))
    replicate(cfg, flow)
    with FlowClients(cfg, flow) as clients:
        store = StateStore(clients)
        stale = store.snapshots([(t, 0)])
        assert fold_offset_map(clients).tail_entries > 0
        assert store._read_tail(stale, [(t, 0)], 60) is None
        fresh = store.offset_map([(t, 0)])[(t, 0)]
    for g, tgt in truth(source, target, t, remote, 0).items():
        assert fresh.translate(g).target_offset == tgt, g

    # entries deleted by someone else before they were folded: an error, never a silent loss
    produce(source, t, records(10, 1, "d"))
    replicate(cfg, flow)
    part = state_partition(t, 0, 2)
    lo, hi = watermarks(target, offset_map_topic(flow), 2)[part]
    assert hi > lo
    delete_records(target, offset_map_topic(flow), part, hi)
    with pytest.raises(StateError, match="entries were lost"):
        load_offset_map(cfg, flow, [(t, 0)])


def test_max_runs_bounds_a_map_whose_floor_does_not_move(tmp_path, source, target, topic_name):
    # exactly-once: every transaction is a run of its own (its commit marker takes a target offset);
    # no group and no source retention: only offset.map.max.runs bounds the snapshot
    t = topic_name
    cfg, flow, remote = flow_for(tmp_path, source, target, t, **{"transaction.max.records": 5,
                                                                  "offset.map.max.runs": 8})
    create_topic(source, t, 1)
    create_topic(target, remote, 1)
    produce(source, t, records(100, 1, "a"))
    replicate(cfg, flow)
    before = load_offset_map(cfg, flow, [(t, 0)])[(t, 0)]
    assert len(before.runs) == 20
    fold = emit_checkpoints(cfg, flow).offset_map
    assert fold.error is None and fold.max_runs == 8 and fold.pruned == {f"{t}-0": 60}
    pm = load_offset_map(cfg, flow, [(t, 0)])[(t, 0)]
    assert len(pm.runs) == 8 and pm.floor == 60
    assert [pm.translate(g) for g in range(60, 105)] == [before.translate(g) for g in range(60, 105)]
    # below the raised floor: the landmarks, exact there, an earlier position between them, never later
    for g in range(60):
        tr = pm.translate(g)
        assert tr.target_offset <= before.translate(g).target_offset, (g, tr)
        assert tr.status in ("exact", "reread") and (tr.status == "exact") == (tr == before.translate(g)), (g, tr)
    assert admin(target).list_topics(snapshot_topic(flow)).topics[snapshot_topic(flow)].error is None
