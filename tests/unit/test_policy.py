"""Replication policies behave exactly as MM2's (DefaultReplicationPolicy / IdentityReplicationPolicy in Kafka's connect/mirror-client), including Java split semantics."""
from __future__ import annotations

import pytest

from mirrorflow.config import parse
from mirrorflow.errors import ConfigError
from mirrorflow.mm2.policy import (DefaultReplicationPolicy, IdentityReplicationPolicy, _java_split, flow_policy,
                               policy_from_props)

DEFAULT = DefaultReplicationPolicy()


@pytest.mark.parametrize("topic, source", [
    ("A.B.orders", "A"), ("orders", None), ("x.", None), ("...", None), ("", None), (".x", ""), ("A..x", "A"),
    ("us-west.orders", "us-west"), (None, None),
])
def test_topic_source_follows_java_split(topic, source):
    assert DEFAULT.topic_source(topic) == source


@pytest.mark.parametrize("s, sep, pieces", [
    ("a.b.c", ".", ["a", "b", "c"]), ("a.b..", ".", ["a", "b"]), (".a", ".", ["", "a"]), ("", ".", []),
    ("...", ".", []), ("a__b___c", "__", ["a", "b", "_c"]), ("a.b", "__", ["a.b"]),
    ("a*b", "*", ["a", "b"]),  # the separator is literal, not a regex
])
def test_java_split(s, sep, pieces):
    assert _java_split(s, sep) == pieces


@pytest.mark.parametrize("topic, upstream, original", [
    ("A.B.orders", "B.orders", "orders"), ("orders", None, "orders"), ("A..x", ".x", "x"),  # ".x" has source "" and upstream "x"
    ("A.heartbeats", "heartbeats", "heartbeats"), (".x", "x", "x"),
])
def test_upstream_and_original_topic(topic, upstream, original):
    assert DEFAULT.upstream_topic(topic) == upstream
    assert DEFAULT.original_topic(topic) == original


def test_default_policy_names():
    assert DEFAULT.format_remote_topic("A", "orders") == "A.orders"
    assert DEFAULT.heartbeats_topic() == "heartbeats"
    assert DEFAULT.checkpoints_topic("A") == "A.checkpoints.internal"
    assert DEFAULT.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert [t for t in ("heartbeats", "A.heartbeats", "B.A.heartbeats", "myheartbeats", "heartbeats.x")
            if DEFAULT.is_heartbeats_topic(t)] == ["heartbeats", "A.heartbeats", "B.A.heartbeats"]
    assert DEFAULT.is_checkpoints_topic("A.checkpoints.internal")
    assert not DEFAULT.is_checkpoints_topic("A.checkpoints")


def test_separator_double_underscore_with_and_without_internal_separator():
    p = DefaultReplicationPolicy("__")
    assert p.format_remote_topic("us-west", "t") == "us-west__t"
    assert p.checkpoints_topic("us-west") == "us-west__checkpoints__internal"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs__B__internal"
    assert p.topic_source("us-west__t") == "us-west"
    assert p.topic_source("us-west.t") is None
    assert p.upstream_topic("A__B__t") == "B__t" and p.original_topic("A__B__t") == "t"
    assert p.is_checkpoints_topic("us-west__checkpoints__internal")
    assert p.is_mm2_internal_topic("x__internal")
    legacy = DefaultReplicationPolicy("__", internal_separator_enabled=False)
    assert legacy.checkpoints_topic("us-west") == "us-west.checkpoints.internal"
    assert legacy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert legacy.format_remote_topic("us-west", "t") == "us-west__t"  # remote names keep the separator
    assert legacy.is_checkpoints_topic("us-west.checkpoints.internal")


@pytest.mark.parametrize("topic, internal", [
    ("__consumer_offsets", True), (".hiddentopic", True), ("mm2-offsets.CLUSTER.internal", True),
    ("mm2-offsets-CLUSTER-internal", True), ("mm2-offsets_CLUSTER_internal", False),  # Kafka's ReplicationPolicyTest
    ("A.checkpoints.internal", True), ("orders", False), ("_single", False), ("internal", False),
])
def test_internal_topics(topic, internal):
    assert DEFAULT.is_internal_topic(topic) is internal


def test_internal_topic_with_custom_separator():
    p = DefaultReplicationPolicy("__")
    assert p.is_internal_topic("A__checkpoints__internal")  # MM2-internal under the separator
    assert p.is_internal_topic("connect.internal") and p.is_internal_topic("connect-internal")


@pytest.mark.parametrize("topic, target, cycle", [
    ("B.orders", "B", True), ("C.B.orders", "B", True), ("C.orders", "B", False), ("orders", "B", False),
    ("B.heartbeats", "B", True), ("C.heartbeats", "B", False), ("A.orders", "B", False),
])
def test_is_cycle_for_flow_a_to_b(topic, target, cycle):
    assert DEFAULT.is_cycle(topic, target) is cycle


def test_identity_policy():
    p = IdentityReplicationPolicy(source_cluster_alias="A")
    assert p.format_remote_topic("A", "orders") == "orders"
    assert p.format_remote_topic("A", "heartbeats") == "A.heartbeats"  # heartbeats are still prefixed
    assert p.format_remote_topic("A", "myheartbeats") == "A.myheartbeats"  # a plain suffix test, as in MM2
    assert p.topic_source("orders") == "A" and p.topic_source("B.orders") == "A"
    assert p.upstream_topic("B.orders") == "B.orders" and p.original_topic("B.orders") == "B.orders"
    assert p.topic_source("B.heartbeats") == "B" and p.upstream_topic("B.heartbeats") == "heartbeats"
    assert p.is_heartbeats_topic("B.A.heartbeats")
    assert not p.is_cycle("orders", "B")  # cannot be detected: upstream_topic(t) == t stops the walk
    assert p.is_cycle("B.heartbeats", "B")
    assert p.checkpoints_topic("A") == "A.checkpoints.internal"
    client = IdentityReplicationPolicy()  # as in a MirrorClient: no source.cluster.alias
    assert client.topic_source("orders") is None


def test_policy_from_props_and_flow_policy():
    assert policy_from_props({}) == DefaultReplicationPolicy(".", True)
    assert policy_from_props({"replication.policy.separator": "_",
                              "replication.policy.internal.topic.separator.enabled": "false"}) == \
        DefaultReplicationPolicy("_", False)
    for name in ("IdentityReplicationPolicy", "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
                 "io.strimzi.kafka.connect.mirror.IdentityReplicationPolicy", "identity"):
        assert policy_from_props({"replication.policy.class": name}, "A") == IdentityReplicationPolicy(".", True, "A")
    with pytest.raises(ConfigError) as exc:
        policy_from_props({"replication.policy.class": "com.acme.Mine"})
    assert exc.value.problems[0][0] == "replication.policy.class"
    cfg = parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
                 "flows": {"A->B": {"replication.policy.separator": "__"},
                           "B->A": {"replication.policy.class": "IdentityReplicationPolicy", "enabled": False}}})
    assert flow_policy(cfg.flow("A->B")) == DefaultReplicationPolicy("__", True)
    assert flow_policy(cfg.flow("B->A")) == IdentityReplicationPolicy(".", True, "B")
