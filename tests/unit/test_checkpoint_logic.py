"""Pure checkpoint logic: exact translation rows, renaming, MM2's monotonicity guard, group-sync decisions,
RemoteClusterUtils algorithms over topic names, table rendering and heartbeat planning."""
from __future__ import annotations


import pytest
from confluent_kafka import ConsumerGroupState

from mirrorflow import config as config_mod
from mirrorflow.groups.checkpoint_store import CheckpointStore, plan_checkpoints
from mirrorflow.groups.translation import TranslatedOffset, rename_topic, translate_committed
from mirrorflow.groups.group_offsets import CommittedOffset
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.groups.offset_sync import (ACTIVE, EMPTY, MISSING, UNKNOWN, TargetGroup, classify_state, plan_group_sync)
from mirrorflow.groups.heartbeat import heartbeats_planned, newest_heartbeat
from mirrorflow.kafka.log_reader import RawRecord
from mirrorflow.mm2.formats import Checkpoint, Heartbeat
from mirrorflow.state.offset_map import MapEntry, PartitionMap, Run
from mirrorflow.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from mirrorflow.mm2.remote_cluster import (OffsetAndMetadata, TopicPartitionKey, checkpoint_topics_of, count_hops,
                                       heartbeat_topics_of, offsets_from_checkpoints, replication_hops_of,
                                       upstream_clusters_of)
from mirrorflow.groups.translation import status_notes, translation_table


def cfg_of(flows: dict, defaults: dict | None = None) -> config_mod.Config:
    return config_mod.parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"},
                                          "C": {"bootstrap.servers": "c:1"}},
                             "defaults": defaults or {}, "flows": flows})


FLOW = cfg_of({"A->B": {"topics": "orders.*, heartbeats"}}).flow("A->B")
FILTERS = FlowFilters.for_flow(FLOW)


def pmap(topic: str = "orders", partition: int = 0) -> PartitionMap:
    """Source 0..9 copied to target 100..109, except: 4 is a compaction hole and 7 a transaction marker;
    source offsets 0..3 -> 100..103, 5..6 -> 104..105, 8..9 -> 106..107; tgt_end 108 (a commit marker
    would sit at 108 in a transactional target; tgt_end is the next offset after the last record)."""
    e1 = MapEntry(topic, partition, 0, 7, (Run(0, 100, 4), Run(5, 104, 2)), 106)
    e2 = MapEntry(topic, partition, 7, 10, (Run(8, 106, 2),), 108)
    return PartitionMap([e1, e2])


# -- translation rows -----------------------------------------------------------------------------
@pytest.mark.parametrize("g,target,status,missing", [
    (0, 100, "exact", 0),    # before anything was read: the first copied record
    (3, 103, "exact", 0),    # inside a run
    (4, 104, "exact", 0),    # at a compaction hole: the next copied record (source 5)
    (7, 106, "exact", 0),    # at a transaction marker: the next copied record (source 8)
    (10, 108, "end", 0),     # caught up: the end of the copied data
    (13, 108, "ahead", 3),   # beyond what was copied: 3 records not replicated yet
])
def test_translation_is_exact_across_gaps(g, target, status, missing):
    [row] = translate_committed(FILTERS, [CommittedOffset("g", "orders", 0, g)], {("orders", 0): pmap()})
    assert (row.target_topic, row.target_offset, row.status, row.missing) == ("A.orders", target, status, missing)
    cp = row.checkpoint()
    assert cp == Checkpoint("g", "A.orders", 0, g, target, "")


def test_translation_before_the_copied_range_counts_never_replicated_records():
    late = PartitionMap([MapEntry("orders", 0, 50, 60, (Run(50, 0, 10),), 10, lost=50)])
    [row] = translate_committed(FILTERS, [CommittedOffset("g", "orders", 0, 20, "meta")], {("orders", 0): late})
    assert (row.target_offset, row.status, row.missing) == (0, "before", 30)
    assert row.checkpoint() == Checkpoint("g", "A.orders", 0, 20, 0, "meta")


def test_no_checkpoint_without_copied_data_or_for_filtered_topics():
    rows = translate_committed(FILTERS, [CommittedOffset("g", "orders", 1, 5), CommittedOffset("g", "other", 0, 5),
                                       CommittedOffset("g", "orders", 0, -1001)], {})
    assert [(r.source_topic, r.partition, r.status, r.target_offset) for r in rows] == [
        ("orders", 1, "none", None), ("other", 0, "not-replicated", None)]
    assert all(r.checkpoint() is None for r in rows)


def test_rename_topic_like_mm2():
    p = DefaultReplicationPolicy()
    assert rename_topic(p, "A", "B", "orders") == "A.orders"
    assert rename_topic(p, "A", "B", "B.orders") == "orders"  # came from the target: back to its original name
    assert rename_topic(p, "A", "B", "C.orders") == "A.C.orders"
    assert rename_topic(DefaultReplicationPolicy("__"), "us", "eu", "t") == "us__t"
    assert rename_topic(IdentityReplicationPolicy(".", True, "A"), "A", "B", "orders") == "orders"


def test_cycles_are_not_checkpointed_in_active_active():
    ba = FlowFilters.for_flow(cfg_of({"A->B": {}, "B->A": {}}).flow("B->A"))
    # a group on B reading the replica A.orders: flow B->A must not checkpoint it back to A
    rows = translate_committed(ba, [CommittedOffset("g", "A.orders", 0, 5)], {("A.orders", 0): pmap("A.orders")})
    assert rows[0].status == "not-replicated" and rows[0].checkpoint() is None
    # and B's A.heartbeats is not replicated back to A as B.A.heartbeats, while B's own heartbeats is
    assert not ba.should_replicate_topic("A.heartbeats")
    assert ba.should_replicate_topic("heartbeats") and ba.remote_topic("heartbeats") == "B.heartbeats"


# -- monotonicity guard ---------------------------------------------------------------------------
def cp(up: int, down: int, topic: str = "A.orders", partition: int = 0, group: str = "g") -> Checkpoint:
    return Checkpoint(group, topic, partition, up, down)


@pytest.mark.parametrize("prev,new,action", [
    (None, cp(5, 105), "new"),
    (cp(5, 105), cp(7, 106), "advanced"),
    (cp(5, 105), cp(5, 105), "unchanged"),
    (cp(5, 105), cp(6, 105), "unchanged"),   # moved over a gap: same target position, nothing to write
    (cp(5, 105), cp(6, 104), "held"),        # would move the target back without a source rewind
    (cp(5, 105), cp(2, 102), "rewound"),     # the source group rewound: follow it
])
def test_checkpoint_monotonicity_guard(prev, new, action):
    store = CheckpointStore([prev] if prev else [])
    assert store.decide(new) == action


def test_plan_checkpoints_emits_only_moves_and_keeps_the_newest_per_partition():
    store = CheckpointStore([cp(1, 101), cp(9, 109), cp(3, 103, partition=1)])
    assert store.previous(cp(0, 0)) == cp(9, 109)  # the newest record wins, as in a compacted log
    rows = [TranslatedOffset("g", "orders", 0, 10, "A.orders", 110, "exact"),
            TranslatedOffset("g", "orders", 1, 3, "A.orders", 103, "exact"),
            TranslatedOffset("g", "orders", 2, 0, "A.orders", 200, "exact"),
            TranslatedOffset("g", "orders", 3, 0, "A.orders", None, "none")]
    decided, emit = plan_checkpoints(store, rows)
    assert [a for _, a in decided] == ["advanced", "unchanged", "new", "no-translation"]
    assert emit == [cp(10, 110), cp(0, 200, partition=2)]
    assert store.groups() == ["g"] and set(store.for_group("g")) == {("A.orders", 0), ("A.orders", 1)}


def test_store_by_group_and_the_run_log_keeps_a_bounded_summary():
    """for_group() reads an index kept by update() (not a scan of every group's checkpoints), and a
    pass's run-log record keeps at most RUN_LOG_CHECKPOINTS checkpoints (a record over the broker's
    message size would be refused)."""
    from mirrorflow.groups.checkpoint import RUN_LOG_CHECKPOINTS, CheckpointRun

    store = CheckpointStore([cp(1, 101, group="a"), cp(2, 102, group="b", partition=3), cp(3, 103, group="a")])
    store.update(cp(4, 104, group="c", topic="A.x"))
    assert store.groups() == ["a", "b", "c"]
    assert store.for_group("a") == {("A.orders", 0): cp(3, 103, group="a")}
    assert store.for_group("c") == {("A.x", 0): cp(4, 104, group="c", topic="A.x")}
    assert store.for_group("missing") == {}
    store.for_group("a").clear()  # a copy: the store is not changed through it
    assert store.for_group("a") == {("A.orders", 0): cp(3, 103, group="a")}
    run = CheckpointRun("A->B", "A.checkpoints.internal", latency_ms=12)
    run.emitted = [cp(i, i, group=f"g{i // 100}", partition=i % 100) for i in range(RUN_LOG_CHECKPOINTS + 250)]
    rec = run.run_record(1000)
    assert len(rec.checkpoints) == RUN_LOG_CHECKPOINTS
    assert (rec.checkpoints[0].group, rec.checkpoints[0].partition, rec.checkpoints[0].latency_ms) == ("g0", 0, 12)
    assert len(rec.to_json()) < 1_000_000


def test_translation_of_many_groups_at_the_same_offset_is_the_same():
    """Groups at the same (topic, partition, offset) share one translation (memoised per pass)."""
    offsets = [CommittedOffset(f"g{i}", "orders", 0, 3) for i in range(50)] + [CommittedOffset("h", "orders", 0, 7)]
    rows = translate_committed(FILTERS, offsets, {("orders", 0): pmap()})
    assert [(r.group, r.target_offset, r.status) for r in rows[:2]] == [("g0", 103, "exact"), ("g1", 103, "exact")]
    assert {r.target_offset for r in rows if r.group != "h"} == {103}
    assert [(r.target_offset, r.status) for r in rows if r.group == "h"] == [(106, "exact")]


# -- group sync decisions -------------------------------------------------------------------------
CPS = {("A.orders", 0): cp(10, 110), ("A.orders", 1): cp(5, 50), ("A.orders", 2): cp(7, 70),
       ("A.orders", 3): cp(1, 10)}


def test_group_sync_never_moves_a_target_offset_back():
    plan = plan_group_sync(TargetGroup("g", EMPTY, 0, {("A.orders", 0): 100, ("A.orders", 1): 50,
                                                        ("A.orders", 2): 99, ("A.orders", 3): -1}), CPS)
    assert [(p.partition, p.action) for p in plan.partitions] == [
        (0, "write"), (1, "skip-equal"), (2, "skip-ahead"), (3, "write")]  # -1: reset by a non-Java client
    assert plan.action == "sync" and [p.checkpoint_offset for p in plan.writes] == [110, 10]


def test_group_sync_writes_everything_for_a_missing_group_and_nothing_when_up_to_date():
    assert len(plan_group_sync(TargetGroup("g", MISSING), CPS).writes) == 4
    done = plan_group_sync(TargetGroup("g", EMPTY, 0, {k: c.downstream_offset for k, c in CPS.items()}), CPS)
    assert done.action == "up-to-date" and not done.writes


def test_group_sync_skips_partitions_missing_on_the_target():
    plan = plan_group_sync(TargetGroup("g", MISSING), CPS, {("A.orders", 0), ("A.orders", 1)})
    assert [(p.partition, p.action) for p in plan.partitions] == [
        (0, "write"), (1, "write"), (2, "skip-no-topic"), (3, "skip-no-topic")]


def test_upstream_of_inverts_the_rename():
    from mirrorflow.groups.translation import upstream_of
    p = DefaultReplicationPolicy()
    assert upstream_of(p, "A", "A.orders") == "orders" and upstream_of(p, "A", "A.C.orders") == "C.orders"
    assert upstream_of(p, "A", "orders") is None and upstream_of(p, "A", "B.orders") is None
    assert upstream_of(IdentityReplicationPolicy(".", True, "A"), "A", "orders") == "orders"


@pytest.mark.parametrize("state", [ACTIVE, UNKNOWN])
def test_group_sync_leaves_active_or_unknown_groups_alone(state):
    plan = plan_group_sync(TargetGroup("g", state, 2 if state == ACTIVE else 0), CPS)
    assert plan.action == "left-alone" and not plan.writes
    assert ("2 active member" in plan.reason) if state == ACTIVE else plan.reason


@pytest.mark.parametrize("state,members,expected", [
    (ConsumerGroupState.EMPTY, 0, EMPTY), (ConsumerGroupState.DEAD, 0, MISSING),
    (ConsumerGroupState.STABLE, 1, ACTIVE), (ConsumerGroupState.PREPARING_REBALANCING, 0, ACTIVE),
    (ConsumerGroupState.EMPTY, 1, ACTIVE), (ConsumerGroupState.UNKNOWN, 0, UNKNOWN)])
def test_classify_target_group_state(state, members, expected):
    assert classify_state(state, members) == expected


# -- RemoteClusterUtils over topic names ------------------------------------------------------------
TOPICS = ["heartbeats", "A.heartbeats", "B.A.heartbeats", "orders", "A.orders", "A.checkpoints.internal",
          "myheartbeats", "C.x"]


def test_heartbeat_and_checkpoint_topics():
    p = DefaultReplicationPolicy()
    assert heartbeat_topics_of(TOPICS, p) == {"heartbeats", "A.heartbeats", "B.A.heartbeats"}
    assert checkpoint_topics_of(TOPICS, p) == {"A.checkpoints.internal"}


def test_upstream_clusters_and_hops():
    p = DefaultReplicationPolicy()
    assert upstream_clusters_of(TOPICS, p) == {"A", "B"}
    assert upstream_clusters_of(["heartbeats"], p) == set()
    assert replication_hops_of(TOPICS, p, "A") == 1
    assert replication_hops_of(["B.A.heartbeats"], p, "A") == 2   # A->B->here
    assert replication_hops_of(TOPICS, p, "B") == 1
    assert replication_hops_of(TOPICS, p, "Z") == -1
    assert count_hops("A.B.A.heartbeats", "Z", p) == -1           # a repeated source stops the walk
    assert replication_hops_of(["us__heartbeats"], DefaultReplicationPolicy("__"), "us") == 1


def test_offsets_from_checkpoints_keeps_the_last_per_partition_of_the_group():
    cps = [cp(1, 11), cp(2, 12), cp(3, 13, partition=1), cp(9, 99, group="other")]
    assert offsets_from_checkpoints(cps, "g") == {TopicPartitionKey("A.orders", 0): OffsetAndMetadata(12, ""),
                                                  TopicPartitionKey("A.orders", 1): OffsetAndMetadata(13, "")}


# -- rendering --------------------------------------------------------------------------------------
def test_translation_table_rendering():
    rows = translate_committed(FILTERS, [CommittedOffset("g", "orders", 0, 4), CommittedOffset("g", "orders", 1, 13)],
                             {("orders", 0): pmap(), ("orders", 1): pmap(partition=1)})
    text = translation_table(rows)
    assert text.splitlines() == [
        "source topic  partition  source offset  target topic  target offset  status  missing  reread",
        "------------  ---------  -------------  ------------  -------------  ------  -------  ------",
        "orders                0              4  A.orders                104  exact         0       0",
        "orders                1             13  A.orders                108  ahead         3       0",
    ]
    assert status_notes(rows) == ["ahead: not yet replicated: the target has not received the missing records yet"]
    # a map thinned below its floor: an earlier position, and how much is read again, in the table and notes
    thinned = PartitionMap([MapEntry("orders", 0, 10 * i, 10 * i + 10, (Run(10 * i, 11 * i, 10),), 11 * i + 10)
                            for i in range(50)]).pruned(0, 5)
    (row,) = translate_committed(FILTERS, [CommittedOffset("g", "orders", 0, 207)], {("orders", 0): thinned})
    assert row.status == "reread" and 0 < row.reread <= 7 + 10 and row.target_offset <= 227
    assert translation_table([row]).splitlines()[2].split()[-3:] == ["reread", "0", str(row.reread)]
    assert status_notes([row])[0].startswith("reread: the offset map no longer knows")
    # from the checkpoints alone (the source lost): what each resumes at, and what it re-reads there
    from mirrorflow.groups.render import CheckpointedOffsets

    cps = {TopicPartitionKey("A.orders", 0): OffsetAndMetadata(104, ""),
           TopicPartitionKey("A.orders", 1): OffsetAndMetadata(90, ""),
           TopicPartitionKey("A.orders", 2): OffsetAndMetadata(7, "")}
    shown = CheckpointedOffsets(cps, {("A.orders", 1): 12, ("A.orders", 2): None})
    assert [line.split() for line in shown.lines()[2:5]] == [["A.orders", "0", "104", "0"],
                                                             ["A.orders", "1", "90", "12"], ["A.orders", "2", "7", "?"]]
    assert shown.lines()[5].startswith("  reread: the offset map no longer knows")
    assert shown.lines()[6].startswith("  ?: ")
    assert [r["reread"] for r in shown.to_json()] == [0, 12, None]
    with_actions = translation_table(rows, ["new", "unchanged"]).splitlines()
    assert with_actions[0].endswith("checkpoint") and with_actions[3].endswith("unchanged")


# -- heartbeats --------------------------------------------------------------------------------------
def test_heartbeats_planned_like_mm2_herders():
    one_way = cfg_of({"A->B": {}})
    planned = heartbeats_planned(one_way, one_way.flow("A->B"), 1000)
    assert [(e.cluster, e.topic, e.source, e.target) for e in planned] == [
        ("B", "heartbeats", "A", "B"),   # herder A->B: into its target
        ("A", "heartbeats", "B", "A")]   # MM2's reverse herder B->A: into the source, so A.heartbeats has data
    both = cfg_of({"A->B": {}, "B->A": {}})
    assert [(e.cluster, e.source) for e in heartbeats_planned(both, both.flow("A->B"), 1)] == [("B", "A")]
    off = cfg_of({"A->B": {"emit.heartbeats.enabled": False}})
    assert heartbeats_planned(off, off.flow("A->B"), 1) == []


def test_newest_heartbeat_skips_garbage():
    recs = [RawRecord(0, i, hb.key(), hb.value(), 0) for i, hb in
            enumerate([Heartbeat("B", "A", 5), Heartbeat("B", "A", 9), Heartbeat("C", "A", 7)])]
    recs.append(RawRecord(0, 9, b"\x00", b"junk", 0))
    assert newest_heartbeat(recs) == Heartbeat("B", "A", 9)
    assert newest_heartbeat([]) is None
