"""MM2 topologies end to end: IdentityReplicationPolicy (Strimzi's
active/passive recommendation) and aggregation + fan-out flows running at the same time from one
config, each through sync, a Spark copy, checkpoints, group sync and translate on real brokers."""
from __future__ import annotations

import subprocess
import time

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from mirrorflow import config as config_mod
from mirrorflow.clients import cluster_connection
from mirrorflow.errors import ConfigError
from mirrorflow.groups.checkpoint import emit_checkpoints, translate_group
from mirrorflow.groups.heartbeat import emit_heartbeats
from mirrorflow.groups.offset_sync import sync_group_offsets
from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.mm2.formats import Checkpoint
from mirrorflow.observe.status import flow_status
from mirrorflow.state.names import lease_topic, progress_topic, transactional_id
from tests.integration.replicate_helpers import assert_copied, target_offset_of
from tests.integration.test_replicate import CLI, cli
from tests.support import create_topic, produce, write_config

pytestmark = pytest.mark.integration
NOW = int(time.time() * 1000) - 3_600_000  # recent: retention deletes old timestamps


def records(n: int, partitions: int, tag: str) -> list[dict]:
    return [{"partition": i % partitions, "key": f"k{i}".encode(), "value": f"{tag}-{i}".encode(),
             "timestamp": NOW + i, "headers": [("h", str(i).encode())]} for i in range(n)]


def commit(cluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def committed(cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    c.close()
    return {tp.partition: tp.offset for tp in got}


def test_identity_policy_end_to_end(tmp_path, source, target, unique):
    pfx = unique("ident")
    topic = f"{pfx}.orders"
    src, tgt = unique("I"), unique("J")
    create_topic(source, topic, partitions=2)
    produce(source, topic, records(20, 2, "id"))
    flow_props = {"topics": f"{pfx}\\..*", "replication.policy.class": "IdentityReplicationPolicy",
                  "heartbeats.replication.enabled": True, "tasks.max": 2, "lease.timeout.seconds": 1,
                  "sync.group.offsets.enabled": True}
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target}, {f"{src}->{tgt}": flow_props})
    flow = cfg.flow(f"{src}->{tgt}")
    # MM2's heartbeats: into the target's `heartbeats` and (the reverse herder) the source's
    assert {(e.cluster, e.source, e.target) for e in emit_heartbeats(cfg, flow)} == {
        (tgt, src, tgt), (src, tgt, src)}

    cli(cfg, "sync", "--flow", flow.name)
    cli(cfg, "replicate", "--flow", flow.name, "--once")  # spark-submit
    # names are kept, except heartbeats: IdentityReplicationPolicy still prefixes them (no cycles)
    assert_copied(source, target, topic, remote=topic)
    assert_copied(source, target, "heartbeats", remote=f"{src}.heartbeats")

    group = unique("app")
    commit(source, group, topic, {0: 7, 1: 3})
    cp = emit_checkpoints(cfg, flow)
    assert cp.topic == f"{src}.checkpoints.internal" and not cp.errors
    want = {p: target_offset_of(source, target, topic, topic, p, o) for p, o in {0: 7, 1: 3}.items()}
    raw = read_partition(cluster_connection(cfg.cluster(tgt)), cp.topic)
    mine = [Checkpoint.decode(r.key, r.value) for r in raw]
    mine = {c.partition: c for c in mine if c.group == group}
    assert {p: (c.topic, c.upstream_offset, c.downstream_offset) for p, c in mine.items()} == {
        0: (topic, 7, want[0]), 1: (topic, 3, want[1])}
    rows = translate_group(cfg, flow, group)
    assert {(r.target_topic, r.partition, r.target_offset, r.status) for r in rows} == {
        (topic, 0, want[0], "exact"), (topic, 1, want[1], "exact")}
    run = sync_group_offsets(cfg, flow)
    assert run.committed.get(group) == 2, run
    assert committed(target, group, topic, 2) == want

    # an identity-policy cycle is refused when the config is read, naming both flows
    both = {f"{src}->{tgt}": flow_props, f"{tgt}->{src}": flow_props}
    raw_cfg = yaml.safe_load((tmp_path / "mf.yaml").read_text())
    raw_cfg["flows"] = both
    (tmp_path / "cycle.yaml").write_text(yaml.safe_dump(raw_cfg))
    with pytest.raises(ConfigError, match="cycle") as exc:
        config_mod.load(tmp_path / "cycle.yaml")
    assert f"{src}->{tgt}" in str(exc.value) and f"{tgt}->{src}" in str(exc.value)


def test_aggregation_and_fan_out_at_the_same_time(tmp_path, source, target, third, unique):
    """east->central and west->central (aggregation) with east->dr (fan-out), all three copying at
    once: state, transactional ids and leases are per flow; status and translation are independent."""
    pfx = unique("topo")
    east_t, west_t = f"{pfx}.east", f"{pfx}.west"
    east, west, central, dr = unique("E"), unique("W"), unique("C"), unique("D")
    create_topic(source, east_t, partitions=2)
    create_topic(target, west_t, partitions=2)
    produce(source, east_t, records(30, 2, "east"))
    produce(target, west_t, records(16, 2, "west"))
    base = {"tasks.max": 2, "lease.timeout.seconds": 1, "heartbeats.replication.enabled": False}
    flows = {f"{east}->{central}": {**base, "topics": f"{pfx}\\.east"},
             f"{west}->{central}": {**base, "topics": f"{pfx}\\.west"},
             f"{east}->{dr}": {**base, "topics": f"{pfx}\\.east"}}
    cfg = write_config(tmp_path / "mf.yaml", {east: source, west: target, central: third, dr: target}, flows)
    for name in flows:
        assert sync_flow(cfg, name, "topics").ok
    # three copies at once (direct mode: the identity test above copies through spark-submit)
    procs = [subprocess.Popen([*CLI, "--config", str(cfg.path), "replicate", "--flow", name, "--once",
                               "--mode", "direct"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in flows]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1][-2000:] for o in outs]
    assert_copied(source, third, east_t, remote=f"{east}.{east_t}")
    assert_copied(target, third, west_t, remote=f"{west}.{west_t}")
    assert_copied(source, target, east_t, remote=f"{east}.{east_t}")

    fl = {n: cfg.flow(n) for n in flows}
    ids = {n: (progress_topic(f), lease_topic(f), transactional_id(f, east_t, 0)) for n, f in fl.items()}
    assert len({x for v in ids.values() for x in v}) == 9, ids  # nothing shared between the flows
    assert [(flow_status(cfg, f).lag, flow_status(cfg, f).records) for f in fl.values()] == [(0, 30), (0, 16), (0, 30)]

    # independence: new east records copied to central only; the dr flow shows them as its lag
    produce(source, east_t, records(6, 2, "late"))
    cli(cfg, "replicate", "--flow", f"{east}->{central}", "--once", "--mode", "direct")
    assert flow_status(cfg, fl[f"{east}->{central}"]).lag == 0
    assert flow_status(cfg, fl[f"{east}->{dr}"]).lag == 6
    assert flow_status(cfg, fl[f"{west}->{central}"]).lag == 0

    # one group on east, translated exactly onto both of its targets; a west group onto central
    g_east, g_west = unique("geast"), unique("gwest")
    commit(source, g_east, east_t, {0: 5, 1: 2})
    commit(target, g_west, west_t, {1: 4})
    for name, cluster in ((f"{east}->{central}", third), (f"{east}->{dr}", target)):
        remote = f"{east}.{east_t}"
        want = {p: target_offset_of(source, cluster, east_t, remote, p, o) for p, o in {0: 5, 1: 2}.items()}
        assert not emit_checkpoints(cfg, fl[name]).errors
        rows = translate_group(cfg, fl[name], g_east)
        assert {(r.target_topic, r.partition, r.target_offset, r.status) for r in rows} == {
            (remote, 0, want[0], "exact"), (remote, 1, want[1], "exact")}, name
    wc = fl[f"{west}->{central}"]
    assert not emit_checkpoints(cfg, wc).errors
    [row] = translate_group(cfg, wc, g_west)
    assert (row.target_topic, row.partition, row.status) == (f"{west}.{west_t}", 1, "exact")
    assert row.target_offset == target_offset_of(target, third, west_t, f"{west}.{west_t}", 1, 4)
    # each flow's checkpoints go to its own `<source>.checkpoints.internal` on its own target
    on_central = {Checkpoint.decode(r.key, r.value).group
                  for t in (f"{east}.checkpoints.internal", f"{west}.checkpoints.internal")
                  for r in read_partition(cluster_connection(cfg.cluster(central)), t)}
    assert {g_east, g_west} <= on_central
