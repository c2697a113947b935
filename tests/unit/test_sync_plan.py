"""The pure planning rules of topic, config and ACL sync (MM2's MirrorSourceConnector: topic creation, config and ACL sync) and the report."""
from __future__ import annotations

import json

from mirrorflow.kafka.acl_admin import AclBinding
from mirrorflow.metadata.acl_sync import plan_acls, target_acl
from mirrorflow.config import parse
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.metadata.sync_report import DONE, FAILED, SyncReport
from mirrorflow.metadata.topic_sync import Entry, TopicPlanInput, creation_configs, plan_configs, plan_topics

D, T, STATIC, DYN_DEFAULT = "DEFAULT_CONFIG", "DYNAMIC_TOPIC_CONFIG", "STATIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"


def filters(**props) -> FlowFilters:
    cfg = parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
                 "flows": {"A->B": props}})
    return FlowFilters.for_flow(cfg.flow("A->B"))


SOURCE = [
    Entry("cleanup.policy", "compact", T),
    Entry("retention.ms", "604800000", D),
    Entry("segment.bytes", "1073741824", STATIC),          # static broker config: never copied
    Entry("max.message.bytes", "2000000", DYN_DEFAULT),    # dynamic broker default: copied (not `default`)
    Entry("min.insync.replicas", "2", T),                  # excluded
    Entry("message.timestamp.type", "LogAppendTime", T),   # excluded
    Entry("some.secret", None, T, sensitive=True),
    Entry("read.only.thing", "x", T, read_only=True),
]


def test_creation_copies_non_default_non_excluded_entries():
    assert creation_configs(SOURCE, filters()) == {"cleanup.policy": "compact", "max.message.bytes": "2000000"}


def test_creation_with_use_defaults_from_source_copies_defaults_too():
    assert creation_configs(SOURCE, filters(**{"use.defaults.from": "source"})) == {
        "cleanup.policy": "compact", "max.message.bytes": "2000000", "retention.ms": "604800000"}


def test_config_sync_sets_deletes_and_leaves_excluded_alone():
    target = {
        "cleanup.policy": Entry("cleanup.policy", "delete", T),          # drift: SET
        "retention.ms": Entry("retention.ms", "5", T),                   # source default: DELETE the override
        "max.message.bytes": Entry("max.message.bytes", "2000000", DYN_DEFAULT),  # same value, not an override: SET
        "min.insync.replicas": Entry("min.insync.replicas", "1", T),     # excluded: untouched
    }
    ops = plan_configs(SOURCE, target, filters())
    assert [(o.name, o.op, o.value, o.target_value) for o in ops] == [
        ("cleanup.policy", "SET", "compact", "delete"),
        ("max.message.bytes", "SET", "2000000", "2000000"),
        ("retention.ms", "DELETE", None, "5"),
    ]


def test_config_sync_is_idempotent():
    target = {"cleanup.policy": Entry("cleanup.policy", "compact", T),
              "retention.ms": Entry("retention.ms", "604800000", D),
              "max.message.bytes": Entry("max.message.bytes", "2000000", T)}
    assert plan_configs(SOURCE, target, filters()) == []


def test_config_sync_with_use_defaults_from_source_sets_the_source_default():
    target = {"retention.ms": Entry("retention.ms", "5", T), "cleanup.policy": Entry("cleanup.policy", "compact", T),
              "max.message.bytes": Entry("max.message.bytes", "2000000", T)}
    ops = plan_configs(SOURCE, target, filters(**{"use.defaults.from": "source"}))
    assert [(o.name, o.op, o.value) for o in ops] == [("retention.ms", "SET", "604800000")]


def test_plan_topics_creates_expands_and_reports():
    report = SyncReport("A->B", True, ["topics"])
    state = TopicPlanInput(
        source_partitions={"new": 3, "grown": 4, "shrunk": 1, "same": 2, "__consumer_offsets": 50, "B.back": 1},
        target_partitions={"A.grown": 2, "A.shrunk": 3, "A.same": 2, "A.gone": 1, "A.checkpoints.internal": 1,
                           "local": 1})
    existing = plan_topics(filters(), state, report, -1, {"new": {"cleanup.policy": "compact"}})
    assert existing == [("grown", "A.grown"), ("same", "A.same"), ("shrunk", "A.shrunk")]
    assert [(c.kind, c.resource, c.detail) for c in report.changes] == [
        ("add-partitions", "A.grown", "2 -> 4 partitions (source grown has 4)"),
        ("create-topic", "A.new", "3 partitions, replication factor broker default, configs: cleanup.policy=compact "
                                  "(from new)"),
    ]
    assert [(f.kind, f.resource) for f in report.findings] == [
        ("target-has-more-partitions", "A.shrunk"), ("orphan", "A.gone")]
    assert [(s.resource, s.reason) for s in report.skipped] == [
        ("B.back", "came from B (replicating it back would be a cycle)"), ("__consumer_offsets", "internal topic")]


def test_a_topic_whose_configs_could_not_be_read_is_not_created():
    report = SyncReport("A->B", True, ["topics"])
    plan_topics(filters(), TopicPlanInput({"orders": 1}, {}), report, -1, {}, unreadable=frozenset({"orders"}))
    assert report.changes == []
    assert [(s.resource, s.reason) for s in report.skipped] == [
        ("orders", "its configs could not be read, so it is not created without them (see the log)")]


def test_identity_policy_reports_no_orphans():
    report = SyncReport("A->B", True, ["topics"])
    plan_topics(filters(**{"replication.policy.class": "IdentityReplicationPolicy"}),
                TopicPlanInput({"orders": 1}, {"orders": 1, "unrelated": 1}), report, 2, {})
    assert report.changes == [] and report.findings == []


def acl(topic, op, perm="ALLOW", pattern="LITERAL", principal="User:alice", host="*"):
    return AclBinding("TOPIC", pattern, topic, principal, host, op, perm)


def test_acl_rules():
    f = filters(topics="orders|pay")
    assert target_acl(acl("orders", "ALL"), f) == (acl("A.orders", "READ"), None)
    assert target_acl(acl("orders", "WRITE"), f) == (None, "ALLOW WRITE is not synced: only mirrorflow writes "
                                                           "remote topics")
    assert target_acl(acl("orders", "WRITE", "DENY"), f) == (acl("A.orders", "WRITE", "DENY"), None)
    assert target_acl(acl("orders", "ALL", "DENY"), f) == (acl("A.orders", "ALL", "DENY"), None)
    assert target_acl(acl("orders", "DESCRIBE", host="10.0.0.1"), f) == (acl("A.orders", "DESCRIBE", host="10.0.0.1"), None)
    assert target_acl(acl("ord", "READ", pattern="PREFIXED"), f) == (None, "PREFIXED ACLs are not synced (only LITERAL)")
    assert target_acl(acl("other", "READ"), f) == (None, "topic not replicated (not selected by topics / "
                                                         "topics.exclude)")
    assert target_acl(acl("B.orders", "READ"), filters()) == (
        None, "topic not replicated (came from B (replicating it back would be a cycle))")
    assert target_acl(acl("*", "READ"), filters()) == (acl("A.*", "READ"), None)  # a literal name, as in MM2
    ident = filters(**{"replication.policy.class": "IdentityReplicationPolicy"})
    assert target_acl(acl("orders", "READ"), ident) == (acl("orders", "READ"), None)


def test_the_wildcard_topic_acl_is_not_synced_as_a_wildcard():
    why = "the wildcard topic ACL (*) is not synced: on the target it would apply to every topic"
    assert target_acl(acl("*", "READ"), filters()) == (acl("A.*", "READ"), None)  # a literal name, as in MM2
    identity = filters(**{"replication.policy.class": "IdentityReplicationPolicy"})
    assert target_acl(acl("orders", "READ"), identity) == (acl("orders", "READ"), None)  # names kept
    assert target_acl(acl("*", "READ"), identity) == (None, why)  # would grant on every topic of B


def test_plan_acls_adds_only_what_the_target_lacks_once():
    report = SyncReport("A->B", True, ["acls"])
    planned = plan_acls([acl("orders", "ALL"), acl("orders", "READ"), acl("orders", "DESCRIBE")],
                        {acl("A.orders", "DESCRIBE")}, filters(), report)
    assert [a for a, _ in planned] == [acl("A.orders", "READ")]
    assert [c.detail for c in report.changes] == ["ALLOW READ for User:alice from host * (source: ALLOW ALL)"]


def test_report_text_json_and_summary():
    r = SyncReport("A->B", False, ["topics", "acls"])
    r.change("topics", "create-topic", "A.orders", "3 partitions").status = DONE
    failed = r.change("topics", "add-partitions", "A.pay", "1 -> 2 partitions")
    failed.status, failed.error = FAILED, "Broker: Invalid partitions"
    r.change("acls", "add-acl", "A.orders", "ALLOW READ for User:alice from host *").status = DONE
    r.find("topics", "orphan", "A.gone", "its source topic 'gone' no longer exists on A; left in place")
    for t in ("__a", "__b", "__c"):
        r.skip("topics", t, "internal topic")
    assert r.lines(max_skips_per_reason=2) == [
        "sync A->B (topics, acls): applied",
        "changes:",
        "  create topic    A.orders: 3 partitions",
        "  add partitions  A.pay: 1 -> 2 partitions [FAILED]: Broker: Invalid partitions",
        "  add ACL         A.orders: ALLOW READ for User:alice from host *",
        "findings (left as they are):",
        "  orphan          A.gone: its source topic 'gone' no longer exists on A; left in place",
        "skipped:",
        "  topics: internal topic: __a, __b and 1 more",
        "result: 1 topic created, 1 ACL added; 1 failed; 3 skipped; 1 orphaned",
    ]
    assert r.counts() == {"topics_created": 1, "topics_expanded": 0, "configs_changed": 0,
                          "topics_with_config_changes": 0, "acls_added": 1, "writes_denied": 0, "failed": 1,
                          "skipped": 3, "orphans": 1, "targets_with_more_partitions": 0}
    summary = r.summary()
    assert summary["ok"] is False and summary["failures"] == ["A.pay: Broker: Invalid partitions"]
    assert len(json.dumps(summary)) < 1000  # small enough for XCom
    assert json.loads(json.dumps(r.to_dict()))["changes"][1]["status"] == "failed"
    dry = SyncReport("A->B", True, ["topics"])
    dry.change("topics", "create-topic", "A.x", "1 partitions")
    assert dry.headline() == "1 topic to create"
    assert SyncReport("A->B", False, ["topics"]).headline() == "nothing to change: the target is in sync"


def test_controller_chunks_keep_requests_under_the_kraft_limit():
    """KRaft refuses a request of more than 10,000 controller records: topic creations are cut into
    requests of at most 5,000 records (a topic: 1 + partitions + configs), in order, none empty."""
    from mirrorflow.metadata.topic_sync import controller_chunks

    sizes = [100] * 120 + [6000, 1]
    chunks = controller_chunks(sizes, lambda n: 1 + n)
    assert [len(c) for c in chunks] == [49, 49, 22, 1, 1]
    assert [x for c in chunks for x in c] == sizes
    assert controller_chunks([], lambda n: n) == []
    assert controller_chunks([1, 2, 3], lambda n: n, limit=3) == [[1, 2], [3]]
