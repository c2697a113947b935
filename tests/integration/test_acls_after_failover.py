"""`mirrorflow acls --after-failover` on real SASL clusters with the StandardAuthorizer: after a failover
of FS->FT (default policy; aliases of its own for the SASL clusters S and T, whose failed-over flow
would stop other tests' S->T), the consumer alice, who read `orders` and committed for her group on S,
cannot read on T -- the ACL sync copied her topic READ, not her group -- and the producer bob, who
wrote `orders` on S, cannot write on T; the report names what each needs (present / missing),
`--apply` through the target admin alias creates it, and then alice reads on T from exactly where
her group stopped on S and bob writes there (real clients). With S not answering, the report is
derived from the ACLs replicated to T and says what it cannot tell."""

from __future__ import annotations

import json

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from mirrorflow import config as config_mod
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.run.runner import run_once
from tests.integration.test_acls_cmd import conf_for
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, create_topic, produce

pytestmark = pytest.mark.integration


def allow(restype, name, pattern, principal, op) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def first_read(cluster, user: str, group: str, topic: str, partition: int):
    """What `user` reads first from `topic`[`partition`] on `cluster` as a member of `group`, from the
    group's committed offset (KafkaException: refused)."""
    errors = []
    c = Consumer({**cluster.client_config(user), "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "error", "isolation.level": "read_committed", "error_cb": errors.append})
    try:
        c.subscribe([topic])
        for _ in range(120):
            msg = c.poll(0.5)
            if msg is not None and msg.error():
                raise KafkaException(msg.error())
            if msg is not None and msg.partition() == partition:
                return msg
        raise AssertionError(f"{user} read nothing from {topic}[{partition}] in group {group}: {errors}")
    finally:
        c.close()


def write_as(cluster, user: str, topic: str) -> None:
    """`user` writes one record to `topic` on `cluster` (RuntimeError naming the broker's refusal)."""
    p = Producer({**cluster.client_config(user), "message.timeout.ms": 10000})
    errors: list[str] = []

    def delivered(err, _msg) -> None:
        errors.append("" if err is None else err.str())

    p.produce(topic, value=b"after the failover", key=b"k", partition=0, on_delivery=delivered)
    left = p.flush(20)
    if left or errors != [""]:
        raise RuntimeError(f"{user} cannot write {topic}: {errors or [f'{left} not delivered']}")


def test_the_applications_acls_after_a_failover_are_printed_and_applied(tmp_path, sasl_cluster, sasl_target,
                                                                         unique):
    pfx = unique("afa")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    remote = f"FS.{topic}"
    raw = {
        "clusters": {
            "FS": conf_for(sasl_cluster, "admin", "MF_AFA_S"),
            "FT": conf_for(sasl_target, "admin", "MF_AFA_T"),
            "SADM": conf_for(sasl_cluster, "admin", "MF_AFA_SADM"),
            "TADM": conf_for(sasl_target, "admin", "MF_AFA_TADM"),
            "GONE": {"bootstrap.servers": "127.0.0.1:1"},
        },
        "flows": {"FS->FT": {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
                           "heartbeats.replication.enabled": False, "emit.heartbeats.enabled": False}},
    }
    path = tmp_path / "mf.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = config_mod.load(path)
    flow = cfg.flow("FS->FT")
    on_s, on_t = AdminClient(sasl_cluster.client_config()), AdminClient(sasl_target.client_config())
    granted = [  # what the applications may do on S
        allow(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", AclOperation.READ),
        allow(ResourceType.GROUP, f"{pfx}-", ResourcePatternType.PREFIXED, "User:alice", AclOperation.READ),
        allow(ResourceType.TOPIC, f"{pfx}.", ResourcePatternType.PREFIXED, "User:bob", AclOperation.WRITE),
    ]
    create_topic(sasl_cluster, topic, 2)
    create_topic(sasl_target, topic, 1)  # T's own topic, where the producers write after the failover
    try:
        for f in on_s.create_acls(granted).values():
            f.result(15)
        bob = {k: v for k, v in sasl_cluster.client_config("bob").items() if k.startswith("sasl.")}
        produce(sasl_cluster, topic, records(20, 2, seed="bob"), **bob)  # bob writes on S
        src = consume_all(sasl_cluster, topic)
        c = Consumer({**sasl_cluster.client_config("alice"), "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 7)], asynchronous=False)
        c.close()
        assert first_read(sasl_cluster, "alice", group, topic, 0).offset() == 4  # alice reads on S

        assert sync_flow(cfg, flow).ok  # topics, configs and ACLs: alice's READ on the remote topic is synced
        assert run_once(cfg, flow, mode="direct").records == 20
        assert group in emit_checkpoints(cfg, flow).groups
        assert json.loads(cli(cfg, "failover", "--flow", "FS->FT", "--yes", "--json").stdout)["done"] is True

        # on T, before: alice's group and bob's writes are refused
        with pytest.raises(KafkaException, match="GROUP_AUTHORIZATION_FAILED|Group authorization failed"):
            first_read(sasl_target, "alice", group, remote, 0)
        with pytest.raises(RuntimeError, match="bob cannot write .*[Aa]uthorization"):
            write_as(sasl_target, "bob", topic)

        args = ["acls", "--flow", "FS->FT", "--after-failover", "--source-admin", "SADM", "--target-admin", "TADM",
                "--json"]
        report = json.loads(cli(cfg, *args).stdout)
        got = {(a["principal"], a["resource"], a["pattern"], a["name"], a["operation"]): a["status"]
               for a in report["acls"]}
        assert got == {
            ("User:alice", "TOPIC", "LITERAL", remote, "READ"): "present",  # replicated by the ACL sync
            ("User:alice", "TOPIC", "LITERAL", topic, "READ"): "missing",
            ("User:alice", "GROUP", "PREFIXED", f"{pfx}-", "READ"): "missing",
            ("User:bob", "TOPIC", "LITERAL", topic, "WRITE"): "missing",
            ("User:bob", "TOPIC", "LITERAL", topic, "DESCRIBE"): "missing",
        }, report
        assert report["after_failover"] == "the ACLs on cluster 'FS'" and report["missing"] == 4
        text = cli(cfg, *args[:-1]).stdout
        assert "ACLs the applications of flow FS->FT need on cluster 'FT' after a failover, derived from the ACLs on " \
               "cluster 'FS'" in text and "  User:alice:" in text, text

        # S does not answer: what the ACLs replicated to T say (alice's topics), and what they cannot
        gone = json.loads(cli(cfg, "acls", "--flow", "FS->FT", "--after-failover", "--source-admin", "GONE",
                              "--target-admin", "TADM", "--json").stdout)
        assert {(a["principal"], a["name"], a["operation"], a["status"]) for a in gone["acls"]} == {
            ("User:alice", remote, "READ", "present"), ("User:alice", topic, "READ", "missing")}
        assert gone["after_failover"] == "the replicated ACLs on cluster 'FT'"
        assert any("which groups the consumers use and which principals write cannot be told" in n
                   for n in gone["notes"]), gone["notes"]

        applied = json.loads(cli(cfg, *args[:-1], "--apply", "--json").stdout)
        assert sorted(a["status"] for a in applied["acls"]) == ["created"] * 4 + ["present"]
        # after: alice resumes exactly where her group stopped on S, bob writes
        msg = first_read(sasl_target, "alice", group, remote, 0)
        want = next(r for r in src if r.partition == 0 and r.offset == 4)
        assert (msg.key(), msg.value(), msg.timestamp()[1]) == (want.key, want.value, want.timestamp)
        write_as(sasl_target, "bob", topic)
        again = json.loads(cli(cfg, *args).stdout)
        assert again["missing"] == 0 and {a["status"] for a in again["acls"]} == {"present"}
    finally:  # exactly this test's bindings (its names are unique); other tests' ACLs stay
        mine = [(ResourceType.TOPIC, n) for n in (topic, remote, f"{pfx}.")] + [(ResourceType.GROUP, f"{pfx}-")]
        filters = [AclBindingFilter(r, n, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                    AclPermissionType.ANY) for r, n in mine]
        for admin in (on_s, on_t):
            for f in admin.delete_acls(filters).values():
                f.result(15)
