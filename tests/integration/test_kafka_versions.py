"""The end-to-end core across Apache Kafka releases: a 3.9 source into a 4.4 target and a 4.4 source
into a 3.9 target (the rest of the suite runs 4.3.1 on both sides). Two clusters of the module, one
per release, serve both directions.

Each direction: exactly-once copy of plain records and of transactions, one of them aborted; the
application's group checkpointed and synced onto the target (on a 4.x source the group uses the
consumer group protocol of KIP-848, which 3.9 brokers do not serve; on 3.9, the classic one); the
source SIGKILLed and an unplanned failover, after which the group resumes on the target at exactly
the next record; producers move to the target; the source comes back and the failback copies the
target's new records to the source exactly once, reporting as divergence exactly the records the
target never got.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, TopicPartition

from mirrorflow.config.properties import DEFAULT_CONFIG_EXCLUDE
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.groups.offset_sync import sync_group_offsets
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.run.runner import run_once
from tests.integration.test_failover import first_record_after_resume
from tests.integration.test_replicate import NOW, cli, records
from tests.support import (admin, consume_all, create_topic, end_transaction, markers_written, produce, producer,
                           set_topic_config, write_config)

pytestmark = pytest.mark.integration

OLD, NEW = "3.9.2", "4.4.0"  # mirrorflow_dev.kafka_release.MATRIX_VERSIONS: scripts/bootstrap fetches their jars
ALIAS = {OLD: "K39", NEW: "K44"}  # the module's clusters, one per release


@pytest.fixture(scope="module")
def releases(kafka_pool):
    """release -> its cluster (started together, once for both directions)."""
    started = kafka_pool.releases({ALIAS[OLD]: OLD, ALIAS[NEW]: NEW})
    for version, alias in ALIAS.items():  # the broker that answers is that release's (its own log says so)
        log = (Path(started[alias].folder) / "logs" / "server.log").read_text(errors="replace")
        assert f"INFO Kafka version: {version} (org.apache.kafka.common.utils." in log, alias
    yield {v: started[a] for v, a in ALIAS.items()}
    kafka_pool.release(*ALIAS.values())


def content(r) -> str:
    return repr(r.content())


def produce_transactions(cluster, topic: str, tag: str) -> None:
    """Three transactions over both partitions: 10 records committed, 7 aborted, 5 committed."""
    p = producer(cluster, **{"transactional.id": f"{tag}-txn"})
    p.init_transactions(30)
    for n, commit, seed in ((10, True, "txa"), (7, False, "aborted"), (5, True, "txb")):
        p.begin_transaction()
        produce_into(p, topic, records(n, 2, seed=seed))
        end_transaction(p, commit)


def produce_into(p, topic: str, recs: list[dict]) -> None:
    for r in recs:
        p.produce(topic, **{k: r[k] for k in ("partition", "key", "value", "headers", "timestamp") if k in r})
    p.flush(30)


def commit_as_member(cluster, group: str, topic: str, offsets: dict[int, int], protocol: str) -> None:
    """The application: a member of `group` (classic or KIP-848 consumer protocol) that subscribed,
    got both partitions, and committed `offsets`; it then leaves (the group is empty, as after a
    region's loss)."""
    conf = {**cluster.client_config(), "group.id": group, "enable.auto.commit": False, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    if protocol == "classic":
        conf["session.timeout.ms"] = 6000
    c = Consumer(conf)
    c.subscribe([topic])
    deadline = time.monotonic() + 60
    while len(c.assignment()) < 2:
        assert time.monotonic() < deadline, f"{group} got no assignment on {cluster.alias}"
        c.poll(0.2)
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    got = {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in offsets], timeout=10)}
    c.close()
    assert got == offsets
    a = admin(cluster)  # alive until its future resolves
    desc = a.describe_consumer_groups([group], request_timeout=30)[group].result(40)
    assert desc.type == (ConsumerGroupType.CONSUMER if protocol == "consumer" else ConsumerGroupType.CLASSIC)


def future_timestamps_need_the_targets_limit_raised(cfg, flow, source, target, topic: str) -> None:
    """A 3.x topic takes any timestamp; a 4.x broker refuses one more than
    `message.timestamp.after.max.ms` ahead of its clock (default: unbounded before 4.0, one hour
    since). A record timestamped two hours ahead fails its unit with the broker's reason, nothing of
    it committed; with the limit raised on the target topic, the next run copies it exactly."""
    create_topic(source, topic, 1)
    assert sync_flow(cfg, flow, ["topics"]).ok
    ahead = int(time.time() * 1000) + 2 * 3_600_000
    produce(source, topic, [{"partition": 0, "key": b"k%d" % i, "value": b"v%d" % i,
                             "timestamp": ahead if i == 1 else NOW + i} for i in range(3)])
    rep = run_once(cfg, flow, mode="direct")
    [failed] = [p for p in rep.partitions if p.topic == topic]
    assert not rep.ok and rep.records == 0 and failed.status == "failed", rep.render()
    [error] = failed.errors  # the record named, not the batch's first offset, and the limit to raise
    assert error.startswith(f"record {topic}[0] offset 1 (timestamp {ahead}) was refused by target topic "
                            f"{topic!r} on cluster ") and "message.timestamp.after.max.ms" in error, error
    assert error.endswith("nothing from offset 0 on was marked copied"), error
    assert consume_all(target, topic) == []  # the unit's transaction took nothing
    set_topic_config(target, topic, message_timestamp_after_max_ms=str(2**63 - 1))
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 3, rep.render()
    assert [r.content() for r in consume_all(target, topic)] == [r.content() for r in consume_all(source, topic)]


# a topic config only the source's release knows: (3.9 -> 4.x) removed in 4.0, (4.x -> 3.9) new in 4.x
ONE_SIDED_CONFIG = {OLD: ("message.format.version", "2.8"), NEW: ("max.decompressed.message.bytes", "2000000")}


def a_config_the_target_does_not_know_must_be_excluded(tmp_path, source, target, s: str, t: str, pfx: str) -> None:
    """A source topic that sets a config the target's release does not know cannot be created there:
    the sync names the topic and the config; with the config in config.properties.exclude it is
    created with the rest of its configs."""
    name, value = ONE_SIDED_CONFIG[source.kafka_version]
    topic = f"{pfx}.configs"
    create_topic(source, topic, 1, {name: value, "retention.ms": "7200000"})
    flow = {"topics": f"{pfx}\\..*", "replication.policy.class": "IdentityReplicationPolicy"}
    cfg = write_config(tmp_path / "configs.yaml", {s: source, t: target}, {f"{s}->{t}": flow})
    rep = sync_flow(cfg, cfg.flow(f"{s}->{t}"), ["topics"])
    assert not rep.ok and f"[FAILED]: Unknown topic config name: {name}" in rep.render(), rep.render()
    assert topic not in admin(target).list_topics(timeout=10).topics
    excluded = [*DEFAULT_CONFIG_EXCLUDE, re.escape(name)]
    cfg = write_config(tmp_path / "configs.yaml", {s: source, t: target},
                       {f"{s}->{t}": {**flow, "config.properties.exclude": excluded}})
    rep = sync_flow(cfg, cfg.flow(f"{s}->{t}"), ["topics"])
    assert rep.ok and f"configs: retention.ms=7200000 (from {topic})" in rep.render(), rep.render()


@pytest.mark.parametrize("src_version,tgt_version", [(OLD, NEW), (NEW, OLD)], ids=["3.9-to-4.4", "4.4-to-3.9"])
def test_copy_groups_failover_and_failback_across_releases(tmp_path, releases, kafka_pool, unique,
                                                           src_version, tgt_version):
    source, target = releases[src_version], releases[tgt_version]
    assert (source.kafka_version, target.kafka_version) == (src_version, tgt_version)
    s, t = f"S{src_version[0]}", f"T{tgt_version[0]}"  # the flow's aliases: S3->T4 or S4->T3
    pfx = unique("kv")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    common = {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "replication.policy.class": "IdentityReplicationPolicy",
              "sync.group.offsets.enabled": True, "state.topic.partitions": 2, "lease.timeout.seconds": 2,
              "heartbeats.replication.enabled": False}
    cfg = write_config(tmp_path / "mf.yaml", {s: source, t: target},
                       {f"{s}->{t}": common, f"{t}->{s}": {**common, "standby": True}})
    fwd, rev = cfg.flow(f"{s}->{t}"), cfg.flow(f"{t}->{s}")

    # exactly-once copy: 60 plain records, then 10 + 5 in committed transactions around 7 aborted ones
    create_topic(source, topic, 2)
    assert sync_flow(cfg, fwd, ["topics"]).ok
    produce(source, topic, records(60, 2))
    produce_transactions(source, topic, pfx)
    markers_written(source, topic, 2)
    src = consume_all(source, topic)
    assert len(src) == 75 and not [r for r in src if b"aborted" in (r.value or b"")]
    rep = run_once(cfg, fwd, mode="direct")
    assert rep.ok and rep.records == 75, rep.render()
    copied = consume_all(target, topic)
    assert [(r.partition, r.content()) for r in copied] == [(r.partition, r.content()) for r in src]
    assert run_once(cfg, fwd, mode="direct").records == 0
    if source.release.major < 4 <= target.release.major:
        future_timestamps_need_the_targets_limit_raised(cfg, fwd, source, target, f"{pfx}.future")
    a_config_the_target_does_not_know_must_be_excluded(tmp_path, source, target, s, t, unique("kvcfg"))

    # the application read part of each partition on the source; checkpoint and group sync put the
    # group on the target at the translated offsets (4.x: the consumer group protocol, 3.9: classic)
    protocol = "consumer" if source.release.major >= 4 else "classic"
    commit_as_member(source, group, topic, {0: 23, 1: 17}, protocol)
    run = emit_checkpoints(cfg, fwd)
    assert group in run.groups
    sync_group_offsets(cfg, fwd, store=run.store)
    for p, at in ((0, 23), (1, 17)):
        _, msg = first_record_after_resume(target, group, topic, p)
        want = next(r for r in src if r.partition == p and r.offset == at)
        assert (msg.key(), msg.value(), msg.timestamp()[1]) == (want.key, want.value, want.timestamp)

    # records the target never gets, then the whole source cluster is lost: unplanned failover
    produce(source, topic, records(20, 2, seed="late"))
    src = consume_all(source, topic)
    ends = {p: 1 + max(r.offset for r in src if r.partition == p) for p in (0, 1)}
    kafka_pool.dev.kill(source.alias)
    try:
        out = json.loads(cli(cfg, "failover", "--flow", fwd.name, "--yes", "--json").stdout)
        assert out["done"] is True, out
        for p, at in ((0, 23), (1, 17)):  # the application resumes on the target at exactly its next record
            _, msg = first_record_after_resume(target, group, topic, p)
            want = next(r for r in src if r.partition == p and r.offset == at)
            assert (msg.key(), msg.value(), msg.timestamp()[1]) == (want.key, want.value, want.timestamp)
        produce(target, topic, records(12, 2, seed="onT"))  # producers moved to the target
        failed_over_at = {p["partition"]: p["target_end"] for p in out["partitions"]}
        new_on_t = [r for r in consume_all(target, topic) if r.offset >= failed_over_at[r.partition]]
        assert len(new_on_t) == 12
    finally:
        kafka_pool.dev.restart(source.alias, attached=True)

    # failback: the reverse flow copies exactly the target's new records back, none of what came from the source
    done = json.loads(cli(cfg, "failback", "--flow", fwd.name, "--yes", "--json").stdout)
    assert done["done"] is True, done
    late = {p: sorted(r.offset for r in src if r.partition == p and b"late" in (r.value or b"")) for p in (0, 1)}
    assert [(d["topic"], d["partition"], d["ranges"], d["records"]) for d in done["divergence"]] == [
        (topic, p, [[late[p][0], ends[p]]], 10) for p in (0, 1)]
    rep = run_once(cfg, rev, mode="direct")
    assert rep.ok and rep.records == 12, rep.render()
    markers_written(source, topic, 2)  # the source was SIGKILLed and restarted before this run
    on_s = consume_all(source, topic)
    assert [r for r in on_s if r.offset < ends[r.partition]] == src  # the source's own records untouched
    back = [r for r in on_s if r.offset >= ends[r.partition]]
    assert sorted(map(content, back)) == sorted(map(content, new_on_t))
    assert len(back) == 12 and run_once(cfg, rev, mode="direct").records == 0
