"""Topic, group and config-property filters behave as MM2's defaults (DefaultTopicFilter, DefaultGroupFilter, DefaultConfigPropertyFilter)."""
from __future__ import annotations

import pytest

from mirrorflow.config import parse
from mirrorflow.mm2.filters import FlowFilters, compile_list


def flow(**props):
    cfg = parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
                 "flows": {"A->B": props}})
    return FlowFilters.for_flow(cfg.flow("A->B"))


@pytest.mark.parametrize("topic, replicated", [
    ("orders", True), ("mm2-offsets.B.internal", False), ("connect-configs-internal", False),
    ("orders.replica", False), ("__consumer_offsets", False), ("__anything", False),
    (".hidden", False), ("A.checkpoints.internal", False), ("my.internal.topic", True),
    ("orders.replicas", True),  # full match: `.*\.replica` does not match `...replicas`
    ("heartbeats", True), ("C.heartbeats", True),
    ("B.orders", False),  # came from the target: a cycle
    ("C.B.orders", False), ("C.orders", True),
])
def test_default_topic_selection(topic, replicated):
    assert flow().should_replicate_topic(topic) is replicated


def test_topics_lists_are_comma_separated_trimmed_and_full_matched():
    f = flow(topics="orders, pay.* ,audit")
    assert [t for t in ("orders", "orders2", "payments", "pay", "audit", "xaudit", "my-orders")
            if f.should_replicate_topic(t)] == ["orders", "payments", "pay", "audit"]
    f = flow(topics=["orders", "pay.*"], **{"topics.exclude": "pay-secret, .*-tmp"})
    assert [t for t in ("orders", "payments", "pay-secret", "pay-tmp", "orders-tmp", "__pay")
            if f.should_replicate_topic(t)] == ["orders", "payments"]


def test_replacing_topics_exclude_drops_the_defaults():
    f = flow(**{"topics.exclude": "secret"})
    assert f.should_replicate_topic("orders.replica")  # no longer excluded
    assert not f.should_replicate_topic("secret")
    assert not f.should_replicate_topic("__consumer_offsets")  # internal topics stay out whatever the filter


def test_empty_lists_match_nothing():
    f = flow(topics="", groups="")
    assert not f.should_replicate_topic("orders")
    assert f.should_replicate_topic("heartbeats")  # except heartbeats while heartbeats.replication.enabled
    assert not f.should_replicate_group("g1")
    f = flow(**{"topics.exclude": "", "groups.exclude": [], "config.properties.exclude": ""})
    assert f.should_replicate_topic("orders.replica")
    assert f.should_replicate_group("console-consumer-1")
    assert f.configs.should_replicate_config_property("min.insync.replicas")
    assert compile_list([]) is None


def test_heartbeats_replication_can_be_disabled():
    f = flow(topics="orders", **{"heartbeats.replication.enabled": False})
    assert not f.should_replicate_topic("heartbeats")
    assert not f.should_replicate_topic("C.heartbeats")
    assert f.should_replicate_topic("orders")


@pytest.mark.parametrize("group, replicated", [
    ("app", True), ("console-consumer-123", False), ("connect-sink", False), ("__internal", False),
    ("my-connect-group", True),
])
def test_default_group_filter(group, replicated):
    assert flow().should_replicate_group(group) is replicated


def test_group_include_list():
    f = flow(groups="group1|group2, team-.*", **{"groups.exclude": "team-test"})
    assert [g for g in ("group1", "group2", "group3", "team-a", "team-test") if f.should_replicate_group(g)] == [
        "group1", "group2", "team-a"]


@pytest.mark.parametrize("prop, synced", [
    ("follower.replication.throttled.replicas", False), ("leader.replication.throttled.replicas", False),
    ("message.timestamp.difference.max.ms", False), ("message.timestamp.type", False),
    ("unclean.leader.election.enable", False), ("min.insync.replicas", False),
    ("retention.ms", True), ("cleanup.policy", True), ("min.insync.replicasX", True),
])
def test_default_config_property_filter(prop, synced):
    assert flow().configs.should_replicate_config_property(prop) is synced


def test_use_defaults_from():
    assert not flow().configs.should_replicate_source_default("retention.ms")
    assert flow(**{"use.defaults.from": "source"}).configs.should_replicate_source_default("retention.ms")


def test_remote_topic_and_identity_policy():
    assert flow().remote_topic("orders") == "A.orders"
    assert flow(**{"replication.policy.separator": "__"}).remote_topic("orders") == "A__orders"
    ident = flow(**{"replication.policy.class": "IdentityReplicationPolicy"})
    assert ident.remote_topic("orders") == "orders"
    assert ident.remote_topic("heartbeats") == "A.heartbeats"
    assert ident.should_replicate_topic("B.orders")  # identity cannot see cycles (config validation can)
    assert not ident.should_replicate_topic("B.heartbeats")


def test_separator_changes_cycle_detection():
    f = flow(**{"replication.policy.separator": "__"})
    assert not f.should_replicate_topic("B__orders")
    assert f.should_replicate_topic("B.orders")  # not a remote name under this separator
