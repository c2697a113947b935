"""Topic sync on real clusters: creation with partitions and configs, partition growth, config sync,
orphans, dry run, idempotence, active/active cycles, the CLI and its errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka.admin import ConfigResource, ConfigSource, NewPartitions, ResourceType

from mirrorflow.errors import ClusterError, ConfigError
from mirrorflow.metadata.sync import sync_flow
from tests.support import admin, create_topic, set_topic_config, wait_for_topic, write_config

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def configs(cluster, topic):
    res = ConfigResource(ResourceType.TOPIC, topic)
    a = admin(cluster)
    return a.describe_configs([res])[res].result(15)


def overrides(cluster, topic):
    """The topic-level overrides (DYNAMIC_TOPIC_CONFIG) of a topic."""
    return {k: e.value for k, e in configs(cluster, topic).items()
            if ConfigSource(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG}


def partitions(cluster, topic):
    md = admin(cluster).list_topics(topic, timeout=10).topics.get(topic)
    return None if md is None or md.error else len(md.partitions)


def topics(cluster):
    return set(admin(cluster).list_topics(timeout=10).topics)


def mine(report, name):
    """(kind, resource, status) of the report's changes on topics carrying `name`."""
    return [(c.kind, c.resource, c.status) for c in report.changes if name in c.resource]


def test_creates_remote_topic_with_partitions_and_non_excluded_configs(tmp_path, source, target, topic_name):
    create_topic(source, topic_name, partitions=3, config={
        "cleanup.policy": "compact", "retention.ms": "123456", "max.message.bytes": "2000000",
        "min.insync.replicas": "1", "message.timestamp.type": "LogAppendTime",  # both excluded by default
    })
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target}, {"A->B": {"topics": topic_name}})
    report = sync_flow(cfg, "A->B")
    remote = f"A.{topic_name}"
    assert mine(report, topic_name) == [("create-topic", remote, "done")]
    detail = report.changes[[c.resource for c in report.changes].index(remote)].detail
    assert detail == (f"3 partitions, replication factor broker default, configs: cleanup.policy=compact, "
                      f"max.message.bytes=2000000, retention.ms=123456 (from {topic_name})")
    wait_for_topic(target, remote, 3)
    assert partitions(target, remote) == 3
    assert overrides(target, remote) == {"cleanup.policy": "compact", "retention.ms": "123456",
                                         "max.message.bytes": "2000000"}
    got = configs(target, remote)
    assert got["message.timestamp.type"].value == "CreateTime"  # excluded: not copied
    assert ConfigSource(got["min.insync.replicas"].source) != ConfigSource.DYNAMIC_TOPIC_CONFIG  # excluded
    assert report.ok and report.counts()["topics_created"] >= 1

    again = sync_flow(cfg, "A->B")
    assert again.changed_nothing, again.render()
    assert "nothing to change: the target is in sync" in again.render()


def test_partitions_are_added_never_removed_and_a_larger_target_is_reported(tmp_path, source, target, unique):
    grow, big = unique("grow"), unique("big")
    create_topic(source, grow, partitions=2)
    create_topic(source, big, partitions=2)
    create_topic(target, f"A.{big}", partitions=4)  # the target already has more
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target}, {"A->B": {"topics": f"{grow}|{big}"}})
    first = sync_flow(cfg, "A->B")
    assert mine(first, grow) == [("create-topic", f"A.{grow}", "done")]
    assert [(f.kind, f.resource, f.message) for f in first.findings if big in f.resource] == [
        ("target-has-more-partitions", f"A.{big}",
         f"the target has 4 partitions, the source {big} has 2; partitions are never removed")]

    a = admin(source)
    a.create_partitions([NewPartitions(grow, 5)])[grow].result(15)
    wait_for_topic(source, grow, 5)
    second = sync_flow(cfg, "A->B")
    assert [(c.kind, c.resource, c.detail, c.status) for c in second.changes if grow in c.resource] == [
        ("add-partitions", f"A.{grow}", f"2 -> 5 partitions (source {grow} has 5)", "done")]
    wait_for_topic(target, f"A.{grow}", 5)
    assert partitions(target, f"A.{grow}") == 5
    assert partitions(target, f"A.{big}") == 4
    assert second.counts()["topics_expanded"] == 1
    assert sync_flow(cfg, "A->B").changed_nothing


def test_config_sync_is_incremental_and_keeps_target_overrides_of_excluded_properties(tmp_path, source, target,
                                                                                      topic_name):
    create_topic(source, topic_name, config={"retention.ms": "100000", "cleanup.policy": "compact"})
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target}, {"A->B": {"topics": topic_name}})
    sync_flow(cfg, "A->B", "topics")
    remote = f"A.{topic_name}"
    wait_for_topic(target, remote)
    # target-side changes: one on an excluded property (must survive), one on a synced property
    # the source leaves at its default (MM2: deleted), one drift of a synced value (MM2: overwritten)
    set_topic_config(target, remote, min_insync_replicas="1", segment_ms="3600000",
          retention_ms="5")
    # a source-side change to sync
    set_topic_config(source, topic_name, cleanup_policy="delete", max_message_bytes="3000000")

    dry = sync_flow(cfg, "A->B", "configs", dry_run=True)
    plan = [(c.kind, c.detail, c.status) for c in dry.changes]
    assert plan == [
        ("set-config", "cleanup.policy = delete (target had compact)", "planned"),
        ("set-config", "max.message.bytes = 3000000 (target had 1048588)", "planned"),
        ("set-config", "retention.ms = 100000 (target had 5)", "planned"),
        ("delete-config", "segment.ms (target override 3600000 removed: the source uses the default)", "planned"),
    ]
    assert overrides(target, remote)["retention.ms"] == "5"  # the dry run changed nothing

    report = sync_flow(cfg, "A->B", "configs")
    assert [(c.kind, c.status) for c in report.changes] == [("set-config", "done")] * 3 + [("delete-config", "done")]
    assert report.counts()["configs_changed"] == 4 and report.counts()["topics_with_config_changes"] == 1
    assert overrides(target, remote) == {"cleanup.policy": "delete", "max.message.bytes": "3000000",
                                         "retention.ms": "100000", "min.insync.replicas": "1"}
    assert sync_flow(cfg, "A->B", "configs").changed_nothing


def test_use_defaults_from_source_sets_source_defaults(tmp_path, source, target, topic_name):
    create_topic(source, topic_name)
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": topic_name, "use.defaults.from": "source",
                                 "config.properties.exclude": ".*"}})  # exclude all but ...
    # with every property excluded nothing is copied, defaults or not
    report = sync_flow(cfg, "A->B", "topics")
    assert [c.detail.split(", configs: ")[1] for c in report.changes if topic_name in c.resource] == [
        f"none (from {topic_name})"]
    cfg = write_config(tmp_path / "mf2.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": topic_name, "use.defaults.from": "source",
                                 "config.properties.exclude": "(?!retention\\.ms$).*"}})
    report = sync_flow(cfg, "A->B", "configs")
    # (the session's clusters hold other tests' topics too, e.g. `heartbeats`: look at this test's topic)
    assert [(c.kind, c.detail) for c in report.changes if topic_name in c.resource] == [
        ("set-config", "retention.ms = 604800000 (target had 604800000)")]
    assert overrides(target, f"A.{topic_name}") == {"retention.ms": "604800000"}


def test_orphaned_remote_topic_is_reported_and_kept(tmp_path, source, target, topic_name):
    create_topic(source, topic_name)
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target}, {"A->B": {"topics": topic_name}})
    sync_flow(cfg, "A->B")
    remote = f"A.{topic_name}"
    wait_for_topic(target, remote)
    a = admin(source)
    a.delete_topics([topic_name])[topic_name].result(15)
    for _ in range(50):
        if topic_name not in topics(source):
            break
    report = sync_flow(cfg, "A->B")
    assert [(f.kind, f.message) for f in report.findings if f.resource == remote] == [
        ("orphan", f"its source topic {topic_name!r} no longer exists on A; left in place")]
    wait_for_topic(target, remote)
    assert report.counts()["orphans"] >= 1
    assert f"orphan          {remote}: its source topic" in report.render()


def test_dry_run_changes_nothing_then_apply_then_nothing_left(tmp_path, source, target, topic_name):
    create_topic(source, topic_name, partitions=2, config={"retention.ms": "7200000"})
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target}, {"A->B": {"topics": topic_name}})
    remote = f"A.{topic_name}"
    dry = sync_flow(cfg, "A->B", dry_run=True)
    assert mine(dry, topic_name) == [("create-topic", remote, "planned")]
    assert remote not in topics(target)
    text = dry.render()
    assert text.startswith("sync A->B (topics, configs, acls): dry run, nothing was changed\nplan:\n")
    assert f"  create topic    {remote}: 2 partitions, replication factor broker default, " \
           f"configs: retention.ms=7200000 (from {topic_name})" in text
    applied = sync_flow(cfg, "A->B")
    assert mine(applied, topic_name) == [("create-topic", remote, "done")]
    assert partitions(target, remote) == 2
    assert sync_flow(cfg, "A->B").changed_nothing


def test_replication_factor_the_broker_cannot_meet_fails_that_topic_with_the_reason(tmp_path, source, target,
                                                                                     topic_name):
    create_topic(source, topic_name)
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": topic_name, "replication.factor": 3}})
    report = sync_flow(cfg, "A->B", "topics")
    [change] = [c for c in report.changes if topic_name in c.resource]
    assert change.status == "failed" and not report.ok
    assert "The target replication factor of 3 cannot be reached because only 1 broker(s) are registered" \
        in change.error
    assert f"A.{topic_name}" not in topics(target)
    assert "1 failed" in report.headline()


def test_active_active_default_policy_has_no_cycle(tmp_path, source, target, unique):
    orders_a, orders_b = unique("orders-a"), unique("orders-b")
    create_topic(source, orders_a)
    create_topic(target, orders_b)
    pattern = f"{orders_a}|{orders_b}|.*\\.{orders_a}|.*\\.{orders_b}"
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": pattern}, "B->A": {"topics": pattern}})
    ab = sync_flow(cfg, "A->B", "topics")
    ba = sync_flow(cfg, "B->A", "topics")
    assert mine(ab, orders_a) == [("create-topic", f"A.{orders_a}", "done")]
    assert mine(ba, orders_b) == [("create-topic", f"B.{orders_b}", "done")]
    # A.orders-a on B came from A: B->A skips it as a cycle
    assert [(s.resource, s.reason) for s in ba.skipped if orders_a in s.resource] == [
        (f"A.{orders_a}", "came from A (replicating it back would be a cycle)")]
    wait_for_topic(source, f"B.{orders_b}")
    ab2 = sync_flow(cfg, "A->B", "topics")
    assert [(s.resource, s.reason) for s in ab2.skipped if orders_b in s.resource] == [
        (f"B.{orders_b}", "came from B (replicating it back would be a cycle)")]
    assert not [c for c in ab2.changes if orders_b in c.resource or orders_a in c.resource]
    assert f"A.B.{orders_b}" not in topics(target) and f"B.A.{orders_a}" not in topics(source)
    wait_for_topic(source, f"B.{orders_b}")
    wait_for_topic(target, f"A.{orders_a}")


def test_heartbeats_topics_are_replicated_whatever_the_topic_filter(tmp_path, third, target):
    create_topic(third, "heartbeats")
    cfg = write_config(tmp_path / "mf.yaml", {"C": third, "B": target}, {"C->B": {"topics": "nothing-matches"}})
    report = sync_flow(cfg, "C->B", "topics")
    assert [(c.kind, c.resource, c.status) for c in report.changes] == [("create-topic", "C.heartbeats", "done")]
    cfg = write_config(tmp_path / "mf2.yaml", {"C": third, "B": target},
                       {"C->B": {"topics": "nothing-matches", "heartbeats.replication.enabled": False}})
    assert ("heartbeats", "not selected by topics / topics.exclude") in [
        (s.resource, s.reason) for s in sync_flow(cfg, "C->B", "topics", dry_run=True).skipped]


def test_disabled_concern_is_reported_as_skipped(tmp_path, source, target):
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": "", "sync.topic.configs.enabled": False}})
    report = sync_flow(cfg, "A->B", "configs")
    assert [(s.concern, s.resource, s.reason) for s in report.skipped] == [
        ("configs", "*", "disabled by sync.topic.configs.enabled=false")]


def _cli(args, cfg_path, **env):
    code = "import sys; from mirrorflow.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "--config", str(cfg_path), *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "include"), **env})


def test_cli_dry_run_json_text_and_only(tmp_path, source, target, topic_name):
    create_topic(source, topic_name)
    write_config(tmp_path / "mf.yaml", {"A": source, "B": target}, {"A->B": {"topics": topic_name}})
    r = _cli(["sync", "--flow", "A->B", "--dry-run", "--json", "--only", "topics"], tmp_path / "mf.yaml")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["dry_run"] is True and data["concerns"] == ["topics"]
    assert [(c["kind"], c["resource"], c["status"]) for c in data["changes"] if topic_name in c["resource"]] == [
        ("create-topic", f"A.{topic_name}", "planned")]
    r = _cli(["sync", "--flow", "A->B"], tmp_path / "mf.yaml")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("sync A->B (topics, configs, acls): applied\nchanges:\n")
    assert f"create topic    A.{topic_name}: 1 partitions" in r.stdout
    r = _cli(["sync", "--flow", "A->B", "--only", "topics,configs"], tmp_path / "mf.yaml")
    assert r.stdout.endswith("result: nothing to change: the target is in sync\n") or \
        "result: nothing to change: the target is in sync" in r.stdout, r.stdout
    r = _cli(["sync", "--flow", "A->B", "--only", "topics,partitions"], tmp_path / "mf.yaml")
    assert r.returncode == 1
    assert r.stderr.strip() == ("mirrorflow: error: --only: unknown concern(s) partitions; "
                                "choose from topics, configs, acls")


def test_unknown_flow_and_unreachable_cluster_are_one_clear_error(tmp_path, source, target):
    write_config(tmp_path / "mf.yaml", {"A": source, "B": target}, {"A->B": {}})
    r = _cli(["sync", "--flow", "A->C"], tmp_path / "mf.yaml")
    assert r.returncode == 2
    assert r.stderr.strip() == f"mirrorflow: error: {tmp_path / 'mf.yaml'}: flows: unknown flow 'A->C' (did you mean 'A->B'?)"
    cfg_path = tmp_path / "down.yaml"
    cfg_path.write_text("clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n"
                        f"  B: {{bootstrap.servers: '{target.bootstrap_servers}'}}\nflows:\n  A->B: {{}}\n")
    from mirrorflow import config as config_mod
    with pytest.raises(ClusterError) as exc:
        sync_flow(config_mod.load(cfg_path), "A->B")
    assert str(exc.value).startswith("cluster 'A': cannot reach 127.0.0.1:1")
    with pytest.raises(ConfigError):
        sync_flow(config_mod.load(cfg_path), "B->A")


def test_identity_policy_keeps_names_and_a_custom_separator_is_used(tmp_path, source, third, unique):
    kept, sep = unique("migrated"), unique("sep")
    create_topic(source, kept, partitions=2)
    create_topic(source, sep)
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "C": third},
                       {"A->C": {"topics": kept, "replication.policy.class": "IdentityReplicationPolicy"}})
    report = sync_flow(cfg, "A->C", "topics")
    assert mine(report, kept) == [("create-topic", kept, "done")]
    assert partitions(third, kept) == 2
    cfg = write_config(tmp_path / "mf2.yaml", {"A": source, "C": third},
                       {"A->C": {"topics": sep, "replication.policy.separator": "__"}})
    report = sync_flow(cfg, "A->C", "topics")
    assert mine(report, sep) == [("create-topic", f"A__{sep}", "done")]
    wait_for_topic(third, f"A__{sep}")  # a loaded broker's metadata may lag the create
