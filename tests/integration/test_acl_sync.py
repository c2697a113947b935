"""Topic ACL sync on real SASL clusters with the StandardAuthorizer (S -> T), as MM2's MirrorSourceConnector.syncTopicAcls does it."""
from __future__ import annotations

import logging
import os

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   ResourcePatternType, ResourceType)

from mirrorflow.errors import ClusterError
from mirrorflow.metadata.sync import sync_flow
from tests.support import admin, create_topic, produce, wait_for_topic, write_config

pytestmark = pytest.mark.integration

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


def acl(topic, principal, op, perm=ALLOW, pattern=LITERAL, host="*"):
    return AclBinding(ResourceType.TOPIC, topic, pattern, principal, host, op, perm)


def add_acls(cluster, bindings):
    a = admin(cluster)
    for f in a.create_acls(bindings).values():
        f.result(15)


def acls_on(cluster, topic):
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    a = admin(cluster)  # keep the client alive until its future resolves
    return sorted((b.principal, b.host, b.operation.name, b.permission_type.name, b.resource_pattern_type.name)
                  for b in a.describe_acls(flt).result(15))


def test_topic_acls_are_synced_renamed_and_filtered_as_mm2_does(tmp_path, sasl_cluster, sasl_target, unique):
    topic, other = unique("payments"), unique("secret")
    create_topic(sasl_cluster, topic)
    create_topic(sasl_cluster, other)
    add_acls(sasl_cluster, [
        acl(topic, "User:alice", AclOperation.ALL),                      # -> ALLOW READ
        acl(topic, "User:alice", AclOperation.WRITE),                    # ALLOW WRITE: never synced
        acl(topic, "User:bob", AclOperation.READ, DENY),                 # DENY: kept
        acl(topic, "User:bob", AclOperation.WRITE, DENY),                # DENY WRITE: kept
        acl(topic, "User:bob", AclOperation.DESCRIBE, host="10.0.0.1"),  # kept with its host
        acl(topic[:8], "User:alice", AclOperation.READ, pattern=PREFIXED),  # PREFIXED: skipped
        acl(other, "User:alice", AclOperation.READ),                     # topic not replicated
    ])
    cfg = write_config(tmp_path / "mf.yaml", {"S": sasl_cluster, "T": sasl_target}, {"S->T": {"topics": topic}})
    remote = f"S.{topic}"

    dry = sync_flow(cfg, "S->T", "acls", dry_run=True)
    assert sorted((c.resource, c.detail, c.status) for c in dry.changes) == [
        (remote, "ALLOW DESCRIBE for User:bob from host 10.0.0.1", "planned"),
        (remote, "ALLOW READ for User:alice from host * (source: ALLOW ALL)", "planned"),
        (remote, "DENY READ for User:bob from host *", "planned"),
        (remote, "DENY WRITE for User:bob from host *", "planned"),
    ]
    assert acls_on(sasl_target, remote) == []  # the dry run created nothing
    skipped = {(s.resource, s.reason) for s in dry.skipped}
    assert (f"{topic} (ALLOW WRITE for User:alice from host *)",
            "ALLOW WRITE is not synced: only mirrorflow writes remote topics") in skipped
    assert (f"{topic[:8]} (ALLOW READ for User:alice from host *)",
            "PREFIXED ACLs are not synced (only LITERAL)") in skipped
    assert (f"{other} (ALLOW READ for User:alice from host *)",
            "topic not replicated (not selected by topics / topics.exclude)") in skipped

    report = sync_flow(cfg, "S->T")
    assert report.ok, report.render()
    assert report.counts()["acls_added"] == 4 and report.counts()["topics_created"] == 1
    assert acls_on(sasl_target, remote) == [
        ("User:alice", "*", "READ", "ALLOW", "LITERAL"),
        ("User:bob", "*", "READ", "DENY", "LITERAL"),
        ("User:bob", "*", "WRITE", "DENY", "LITERAL"),
        ("User:bob", "10.0.0.1", "DESCRIBE", "ALLOW", "LITERAL"),
    ]
    assert acls_on(sasl_target, other) == [] and acls_on(sasl_target, f"S.{other}") == []

    # a second run changes nothing
    again = sync_flow(cfg, "S->T")
    assert again.changed_nothing, again.render()

    # the authorizer enforces the synced ACLs: alice reads the remote topic, and still cannot write it
    wait_for_topic(sasl_target, remote)
    produce(sasl_target, remote, [{"value": b"hello", "partition": 0}])
    c = Consumer({**sasl_target.client_config("alice"), "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(remote, 0, 0)])
    msg = None
    for _ in range(30):
        msg = c.poll(1)
        # librdkafka looks up the group coordinator even for assign(); alice has no group ACL and
        # needs none to read an assigned partition, so that refusal may arrive first and is skipped
        if msg is not None and msg.error() is not None and msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            continue
        if msg is not None:
            break
    c.close()
    assert msg is not None and msg.error() is None and msg.value() == b"hello"
    p = Producer({**sasl_target.client_config("alice"), "message.timeout.ms": 10000})
    errors = []
    p.produce(remote, b"x", on_delivery=lambda err, m: errors.append(err))
    p.flush(15)
    assert errors and errors[0] is not None and errors[0].name() == "TOPIC_AUTHORIZATION_FAILED"

    # additive only: an ACL removed on the source stays on the target
    a = admin(sasl_cluster)
    for f in a.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, LITERAL, "User:bob", None,
                                             AclOperation.ANY, AclPermissionType.ANY)]).values():
        f.result(15)
    after = sync_flow(cfg, "S->T", "acls")
    assert after.changed_nothing
    assert len(acls_on(sasl_target, remote)) == 4


def test_target_without_authorizer_is_skipped_with_the_reason(tmp_path, sasl_cluster, target, topic_name):
    create_topic(sasl_cluster, topic_name)
    add_acls(sasl_cluster, [acl(topic_name, "User:alice", AclOperation.READ)])
    cfg = write_config(tmp_path / "mf.yaml", {"S": sasl_cluster, "B": target}, {"S->B": {"topics": topic_name}})
    report = sync_flow(cfg, "S->B", "acls")
    assert [(s.resource, s.reason) for s in report.skipped] == [
        ("*", "target cluster B has no authorizer (ACLs cannot be created)")]
    assert report.changed_nothing


def test_source_without_authorizer_is_skipped_with_one_log_line(tmp_path, source, sasl_target, caplog):
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "T": sasl_target}, {"A->T": {"topics": ""}})
    with caplog.at_level(logging.INFO, logger="mirrorflow.metadata.acl_sync"):
        report = sync_flow(cfg, "A->T", "acls")
    assert [(s.concern, s.resource, s.reason) for s in report.skipped] == [
        ("acls", "*", "source cluster A has no authorizer (no ACLs to sync)")]
    assert report.ok and report.changed_nothing
    assert [r.getMessage() for r in caplog.records if r.name == "mirrorflow.metadata.acl_sync"] == [
        "ACL sync skipped for A->T: source cluster A has no authorizer"]


def test_acl_sync_can_be_disabled(tmp_path, sasl_cluster, sasl_target):
    cfg = write_config(tmp_path / "mf.yaml", {"S": sasl_cluster, "T": sasl_target},
                       {"S->T": {"topics": "", "sync.topic.acls.enabled": False}})
    report = sync_flow(cfg, "S->T", "acls")
    assert [(s.resource, s.reason) for s in report.skipped] == [("*", "disabled by sync.topic.acls.enabled=false")]


def test_wrong_credentials_are_one_clear_error_without_the_secret(tmp_path, sasl_cluster, sasl_target):
    cfg = write_config(tmp_path / "mf.yaml", {"S": sasl_cluster, "T": sasl_target}, {"S->T": {}})
    var = "MIRRORFLOW_TEST_T_PASSWORD"
    good = os.environ[var]
    os.environ[var] = "not-the-password-42"
    try:
        with pytest.raises(ClusterError) as exc:
            sync_flow(cfg, "S->T", dry_run=True)
    finally:
        os.environ[var] = good
    msg = str(exc.value)
    assert msg.startswith(f"cluster 'T': authentication failed at {sasl_target.bootstrap_servers}: "
                          "check the SASL username and password")
    assert "not-the-password-42" not in msg and good not in msg


def test_a_source_principal_that_may_not_read_acls_is_reported_not_taken_for_no_acls(tmp_path, sasl_cluster, sasl_target):
    import yaml

    write_config(tmp_path / "mf.yaml", {"S": sasl_cluster, "T": sasl_target}, {"S->T": {"topics": ""}})
    raw = yaml.safe_load((tmp_path / "mf.yaml").read_text())
    os.environ["MIRRORFLOW_TEST_S_ALICE_PASSWORD"] = sasl_cluster.users["alice"]
    raw["clusters"]["S"].update({"sasl.username": "alice", "sasl.password": "${env:MIRRORFLOW_TEST_S_ALICE_PASSWORD}"})
    (tmp_path / "alice.yaml").write_text(yaml.safe_dump(raw))
    from mirrorflow import config as config_mod
    # librdkafka answers DescribeAcls with an empty list here; sync must not take that for "no ACLs"
    report = sync_flow(config_mod.load(tmp_path / "alice.yaml"), "S->T", "acls")
    assert [(s.resource, s.reason) for s in report.skipped] == [
        ("*", "the ACLs of source cluster S cannot be read: its principal needs DESCRIBE on the cluster")]
