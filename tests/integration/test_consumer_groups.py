"""Checkpoints, group offset sync, heartbeats and RemoteClusterUtils on real clusters.

These tests feed the checkpoint pass hand-made offset maps (`maps=`), so they check everything
after translation -- the MM2 wire format on a real topic, the monotonicity guard across runs, the
group-sync safety rules, Java's RemoteClusterUtils reading our records -- independently of the copy
path. tests/integration/test_failover_e2e.py does the same through real replication.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.mm2 import remote_cluster
from mirrorflow.groups.checkpoint import CheckpointStore, emit_checkpoints
from mirrorflow.errors import ClusterError, MirrorflowError
from mirrorflow.groups.offset_sync import sync_group_offsets
from mirrorflow.groups.heartbeat import emit_heartbeats, replication_latency
from mirrorflow.clients import FlowClients, cluster_connection
from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.mm2.formats import Heartbeat
from mirrorflow.state.offset_map import MapEntry, PartitionMap, Run
from tests.integration.rcu_java import compile_probe, java_translate, run_probe
from tests.support import admin, create_topic, write_config

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def java_probe(tmp_path_factory):
    return compile_probe(tmp_path_factory.mktemp("rcu"))


def commit(cluster, group: str, offsets: list[tuple[str, int, int, str | None]]) -> None:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(t, p, o, m or "") for t, p, o, m in offsets], asynchronous=False)
    c.close()


def target_offsets(cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    c.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def flow_cfg(tmp_path, source, target, topic: str, src: str = "A", tgt: str = "B", **props):
    """A flow src->tgt between the session clusters; fresh aliases give the test its own internal topics."""
    return write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                        {f"{src}->{tgt}": {"topics": f"{topic}.*", **props}})


def maps_for(topic: str, partitions: int = 2) -> dict[tuple[str, int], PartitionMap]:
    """Source 0..19 copied; 5 is a compaction hole, 12 a transaction marker: 18 records at target 0..17."""
    runs = (Run(0, 0, 5), Run(6, 5, 6), Run(13, 11, 7))
    return {(topic, p): PartitionMap([MapEntry(topic, p, 0, 20, runs, 18)]) for p in range(partitions)}


def test_checkpoints_are_exact_monotonic_and_java_reads_them(tmp_path, source, target, topic_name, java_probe):
    create_topic(source, topic_name, 2)
    # aliases of its own: the checkpoints topic does not exist yet, whatever ran before
    A = f"CK{topic_name[-8:]}"
    cfg = flow_cfg(tmp_path, source, target, topic_name, src=A)
    flow = cfg.flow(f"{A}->B")
    group = f"g-{topic_name}"
    commit(source, group, [(topic_name, 0, 5, "meta-0"), (topic_name, 1, 12, None)])
    maps = maps_for(topic_name)

    run = emit_checkpoints(cfg, flow, groups=[group], maps=maps)
    assert run.errors == {} and run.groups == [group]
    got = {(c.topic, c.partition): (c.upstream_offset, c.downstream_offset, c.metadata) for c in run.emitted}
    # 5 is a compaction hole -> the next record (source 6, target 5); 12 a marker -> source 13, target 11
    assert got == {(f"{A}.{topic_name}", 0): (5, 5, "meta-0"), (f"{A}.{topic_name}", 1): (12, 11, "")}
    assert run.created_topic and run.topic == f"{A}.checkpoints.internal"

    # the topic is MM2's: 1 partition, compacted
    from confluent_kafka.admin import ConfigResource, ResourceType
    a = admin(target)
    assert len(a.list_topics(f"{A}.checkpoints.internal").topics[f"{A}.checkpoints.internal"].partitions) == 1
    res = ConfigResource(ResourceType.TOPIC, f"{A}.checkpoints.internal")
    assert a.describe_configs([res])[res].result(10)["cleanup.policy"].value == "compact"

    # Python RemoteClusterUtils and Java RemoteClusterUtils agree with what we emitted
    ours = remote_cluster.translate_offsets({"bootstrap.servers": target.bootstrap_servers}, A, group)
    assert {(tp.topic, tp.partition): (om.offset, om.metadata) for tp, om in ours.items()} == {
        (f"{A}.{topic_name}", 0): (5, "meta-0"), (f"{A}.{topic_name}", 1): (11, "")}
    assert java_translate(java_probe, target.bootstrap_servers, A, group) == {
        (f"{A}.{topic_name}", 0): (5, "meta-0"), (f"{A}.{topic_name}", 1): (11, "")}

    # nothing moved: nothing written
    again = emit_checkpoints(cfg, flow, groups=[group], maps=maps)
    assert again.emitted == [] and {a for _, a in again.rows} == {"unchanged"}

    # the group advances on partition 0 and rewinds on partition 1: both are followed
    commit(source, group, [(topic_name, 0, 20, None), (topic_name, 1, 2, None)])
    third = emit_checkpoints(cfg, flow, groups=[group], maps=maps)
    assert sorted(a for _, a in third.rows) == ["advanced", "rewound"]
    assert java_translate(java_probe, target.bootstrap_servers, A, group) == {
        (f"{A}.{topic_name}", 0): (18, ""), (f"{A}.{topic_name}", 1): (2, "")}

    # a translation that would move the target back without a source rewind is held
    shrunk = {(topic_name, 0): PartitionMap([MapEntry(topic_name, 0, 0, 20, (Run(0, 0, 20),), 17)]),
              (topic_name, 1): maps[(topic_name, 1)]}
    commit(source, group, [(topic_name, 0, 21, None)])
    held = emit_checkpoints(cfg, flow, groups=[group], maps=shrunk)
    assert held.emitted == [] and ("held" in {a for _, a in held.rows})
    with FlowClients(cfg, flow) as clients:
        store = CheckpointStore.load(clients)
    assert store.for_group(group)[(f"{A}.{topic_name}", 0)].downstream_offset == 18


def test_group_on_a_filtered_topic_or_excluded_group_is_ignored(tmp_path, source, target, topic_name):
    create_topic(source, topic_name)
    create_topic(source, f"other-{topic_name}")
    cfg = flow_cfg(tmp_path, source, target, topic_name, **{"groups.exclude": "excluded-.*"})
    flow = cfg.flow("A->B")
    g_other, g_excl, g_ok = f"o-{topic_name}", f"excluded-{topic_name}", f"ok-{topic_name}"
    commit(source, g_other, [(f"other-{topic_name}", 0, 3, None)])
    commit(source, g_excl, [(topic_name, 0, 3, None)])
    commit(source, g_ok, [(topic_name, 0, 3, None), (f"other-{topic_name}", 0, 1, None)])
    run = emit_checkpoints(cfg, flow, maps=maps_for(topic_name, 1))
    assert g_other not in run.groups and g_excl not in run.groups and g_ok in run.groups
    assert {(c.group, c.topic) for c in run.emitted if c.group.endswith(topic_name)} == {(g_ok, f"A.{topic_name}")}
    mine = [(r.source_topic, a) for r, a in run.rows if r.group == g_ok]
    assert sorted(mine) == sorted([(topic_name, "new"), (f"other-{topic_name}", "not-replicated")])


def test_group_sync_is_safe(tmp_path, source, target, topic_name):
    create_topic(source, topic_name, 2)
    remote = f"A.{topic_name}"
    create_topic(target, remote, 2)
    cfg = flow_cfg(tmp_path, source, target, topic_name, **{"sync.group.offsets.enabled": True})
    flow = cfg.flow("A->B")
    new_g, ahead_g, active_g = f"new-{topic_name}", f"ahead-{topic_name}", f"active-{topic_name}"
    for g in (new_g, ahead_g, active_g):
        commit(source, g, [(topic_name, 0, 10, None), (topic_name, 1, 4, None)])
    commit(target, ahead_g, [(remote, 0, 15, None)])  # the target is further than the translation on p0
    member = Consumer({**target.client_config(), "group.id": active_g, "enable.auto.commit": False,
                       "session.timeout.ms": 10000})
    member.subscribe([remote])
    deadline = time.monotonic() + 30
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.2)
    assert member.assignment()
    try:
        run = emit_checkpoints(cfg, flow, groups=[new_g, ahead_g, active_g], maps=maps_for(topic_name))
        sync = sync_group_offsets(cfg, flow, store=run.store, groups=[new_g, ahead_g, active_g])
        plans = {p.group: p for p in sync.plans}
        assert sync.errors == {}
        assert plans[new_g].state == "missing" and len(plans[new_g].writes) == 2
        assert plans[ahead_g].state == "empty" and [(x.partition, x.action) for x in plans[ahead_g].partitions] == [
            (0, "skip-ahead"), (1, "write")]
        assert plans[active_g].action == "left-alone" and "active member" in plans[active_g].reason
        # translations: p0 source 10 -> target 9 (the hole at 5), p1 source 4 -> target 4
        assert target_offsets(target, new_g, remote, 2) == {0: 9, 1: 4}
        assert target_offsets(target, ahead_g, remote, 2) == {0: 15, 1: 4}  # never moved back
        assert target_offsets(target, active_g, remote, 2) == {}             # left alone
    finally:
        member.close()
    # the sync needs only the target: a second pass loads the checkpoints from it and has nothing to do
    again = sync_group_offsets(cfg, flow, groups=[new_g, ahead_g])
    assert {p.group: p.action for p in again.plans} == {new_g: "up-to-date", ahead_g: "up-to-date"}


def test_group_sync_disabled_by_default(tmp_path, source, target, topic_name):
    cfg = flow_cfg(tmp_path, source, target, topic_name)
    assert sync_group_offsets(cfg, cfg.flow("A->B")).skipped_reason == "sync.group.offsets.enabled=false"


def test_heartbeats_and_topology_match_java(tmp_path, source, target, topic_name, java_probe, unique):
    cfg = flow_cfg(tmp_path, source, target, topic_name)
    flow = cfg.flow("A->B")
    before = int(time.time() * 1000)
    emitted = emit_heartbeats(cfg, flow)
    assert [(e.cluster, e.source, e.target) for e in emitted] == [("B", "A", "B"), ("A", "B", "A")]
    on_b = [Heartbeat.decode(r.key, r.value) for r in read_partition(cluster_connection(cfg.cluster("B")), "heartbeats")]
    on_a = [Heartbeat.decode(r.key, r.value) for r in read_partition(cluster_connection(cfg.cluster("A")), "heartbeats")]
    assert any(h.source == "A" and h.target == "B" and h.timestamp >= before for h in on_b)
    assert any(h.source == "B" and h.target == "A" and h.timestamp >= before for h in on_a)

    # a replicated heartbeats topic on B (as the data plane writes it) gives latency and topology;
    # chain X -> Y -> B as Y.X.heartbeats, with fresh aliases so other tests' topics do not matter
    x, y = unique("X").replace("-", ""), unique("Y").replace("-", "")
    chain = f"{y}.{x}.heartbeats"
    create_topic(target, chain)
    hb = Heartbeat(x, y, int(time.time() * 1000) - 1500)
    from tests.support import produce
    produce(target, chain, [{"partition": 0, "key": hb.key(), "value": hb.value(), "timestamp": hb.timestamp}])
    mc = remote_cluster.MirrorClient({"bootstrap.servers": target.bootstrap_servers})
    assert {x, y} <= mc.upstream_clusters()
    assert mc.replication_hops(x) == 2 and mc.replication_hops(y) == 1 and mc.replication_hops("nowhere") == -1
    java = run_probe(java_probe, target.bootstrap_servers, "topology", x, y, "nowhere")
    assert {r[1] for r in java if r[0] == "upstream"} == mc.upstream_clusters()
    assert {r[1] for r in java if r[0] == "heartbeats"} == mc.heartbeat_topics()
    assert {r[1] for r in java if r[0] == "checkpoints"} == mc.checkpoint_topics()
    assert {r[1]: int(r[2]) for r in java if r[0] == "hops"} == {x: 2, y: 1, "nowhere": -1}

    chain_cfg = write_config(tmp_path / "chain.yaml", {y: target, "B": target}, {f"{y}->B": {}})
    lat = replication_latency(chain_cfg, chain_cfg.flow(f"{y}->B"))
    assert lat.topic == f"{y}.heartbeats" and lat.latency_ms is None  # that topic does not exist
    # latency through a replicated topic: the newest heartbeat in <source>.heartbeats
    direct = f"{x}.heartbeats"
    create_topic(target, direct)
    produce(target, direct, [{"partition": 0, "key": hb.key(), "value": hb.value(), "timestamp": hb.timestamp}])
    xcfg = write_config(tmp_path / "x.yaml", {x: target, "B": target}, {f"{x}->B": {}})
    lat = replication_latency(xcfg, xcfg.flow(f"{x}->B"))
    assert lat.newest_heartbeat_ms == hb.timestamp and 1500 <= lat.latency_ms < 60000


def test_unknown_group_and_unreachable_cluster_are_one_clear_error(tmp_path, source, target, topic_name):
    from mirrorflow.groups.checkpoint import translate_group
    from mirrorflow_dev.processes import free_port
    cfg = flow_cfg(tmp_path, source, target, topic_name)
    with pytest.raises(MirrorflowError, match="has no committed offsets on cluster 'A'"):
        translate_group(cfg, cfg.flow("A->B"), f"nobody-{topic_name}", maps={})
    # a checkpoint pass waits for a cluster up to broker.outage.max.seconds, then names it
    dead = write_config(tmp_path / "dead.yaml", {"A": source, "B": target}, {"A->B": {"broker.outage.max.seconds": 2}})
    raw = dead.clusters["A"]
    import dataclasses
    bad = dataclasses.replace(dead, clusters={**dead.clusters, "A": dataclasses.replace(
        raw, client={**raw.client, "bootstrap.servers": f"127.0.0.1:{free_port()}"})})
    with pytest.raises(ClusterError, match="cluster 'A': cannot reach"):
        emit_checkpoints(bad, bad.flow("A->B"), maps={})


def _cli(cfg, *args: str) -> tuple[int, str, str]:
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from mirrorflow import cli
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main(["--config", str(cfg.path), *args])
    return rc, out.getvalue(), err.getvalue()


def test_cli_heartbeat_translate_from_checkpoints_and_errors(tmp_path, source, target, topic_name):
    import json
    create_topic(source, topic_name)
    cfg = flow_cfg(tmp_path, source, target, topic_name)
    rc, out, _ = _cli(cfg, "heartbeat", "--flow", "A->B")
    assert rc == 0 and "heartbeat (A,B) written to heartbeats on B" in out and "(B,A) written to heartbeats on A" in out
    rc, out, _ = _cli(cfg, "heartbeat", "--flow", "A->B", "--json")
    assert rc == 0 and json.loads(out)["flow"] == "A->B"

    group = f"g-{topic_name}"
    commit(source, group, [(topic_name, 0, 7, None)])
    emit_checkpoints(cfg, cfg.flow("A->B"), groups=[group], maps=maps_for(topic_name, 1))
    rc, out, _ = _cli(cfg, "translate", "--flow", "A->B", "--group", group, "--from-checkpoints", "--json")
    # the checkpoint was translated through a map the target does not hold: what it re-reads is not known
    assert rc == 0 and json.loads(out) == [{"target_topic": f"A.{topic_name}", "partition": 0,
                                            "target_offset": 6, "metadata": "", "reread": None}]
    rc, _, err = _cli(cfg, "translate", "--flow", "A->C", "--group", group)
    assert rc != 0 and "unknown flow 'A->C'" in err and err.count("\n") == 1
    rc, _, err = _cli(cfg, "translate", "--flow", "A->B", "--group", f"nobody-{topic_name}", "--from-checkpoints")
    assert rc == 1 and err.startswith("mirrorflow: error: no checkpoints for group")
