"""Pure parts of failback and `mirrorflow acls`: the standby pair passes config validation, and
regexes become ACL patterns; the bindings a flow needs (no cluster)."""

from __future__ import annotations

from mirrorflow.ops.acls.required_acls import patterns, required_acls
from tests.unit.test_config import CLUSTERS, parse, problems

IDENTITY = {"replication.policy.class": "IdentityReplicationPolicy"}


def test_identity_pair_with_a_standby_flow_is_valid():
    raw = {"clusters": CLUSTERS, "flows": {"A->B": dict(IDENTITY), "B->A": {**IDENTITY, "standby": True}}}
    cfg = parse(raw)
    assert cfg.flow("B->A").props["standby"] is True and cfg.flow("A->B").props["standby"] is False
    raw["flows"]["B->A"] = dict(IDENTITY)  # without standby: the cycle check refuses both
    assert [k for k, _ in problems(raw)] == [
        "flows.A->B.replication.policy.class", "flows.B->A.replication.policy.class"]


def test_regexes_become_acl_patterns():
    every = lambda n: True  # noqa: E731
    assert patterns(["orders\\..*", "payments", ".*"], [], every) == [
        ("LITERAL", "*"), ("LITERAL", "payments"), ("PREFIXED", "orders.")]
    # any other regex: the names it matches now, filtered
    names = ["a1", "a2", "b1", "a3"]
    assert patterns(["a[12]"], names, lambda n: n != "a2") == [("LITERAL", "a1")]


def test_required_acls_of_a_flow():
    cfg = parse({"clusters": {"A": {"bootstrap.servers": "a:9092", "security.protocol": "SASL_SSL",
                                    "sasl.mechanism": "PLAIN", "sasl.username": "reader", "sasl.password": "x"},
                              "B": {"bootstrap.servers": "b:9092"}},
                 "flows": {"A->B": {"topics": "orders\\..*", "groups": "app-.*", "sync.group.offsets.enabled": True,
                                    "heartbeats.replication.enabled": False}}})
    needs, principals = required_acls(cfg, cfg.flow("A->B"))
    assert principals == {"source": "User:reader", "target": "User:ANONYMOUS"}
    got = {(n.side, n.acl.resource, n.acl.pattern, n.acl.name, n.acl.operation) for n in needs}
    assert {x for x in got if x[0] == "source"} == {
        ("source", "TOPIC", "PREFIXED", "orders.", "READ"), ("source", "TOPIC", "PREFIXED", "orders.", "DESCRIBE"),
        ("source", "TOPIC", "PREFIXED", "orders.", "DESCRIBE_CONFIGS"),
        ("source", "GROUP", "PREFIXED", "app-", "DESCRIBE"),
        ("source", "CLUSTER", "LITERAL", "kafka-cluster", "DESCRIBE"),
        ("source", "GROUP", "PREFIXED", "mirrorflow-", "READ"),
        ("source", "GROUP", "PREFIXED", "mirrorflow-", "DESCRIBE")}
    assert ("target", "TOPIC", "PREFIXED", "A.orders.", "WRITE") in got
    assert ("target", "TRANSACTIONAL_ID", "PREFIXED", "mirrorflow-A-B-", "WRITE") in got
    assert ("target", "TOPIC", "PREFIXED", "mirrorflow.A-B.", "DELETE") in got
    assert ("target", "GROUP", "PREFIXED", "app-", "READ") in got
    assert ("target", "CLUSTER", "LITERAL", "kafka-cluster", "ALTER") in got  # ACL sync is on by default
    assert not any(n.side == "source" and n.acl.operation in ("WRITE", "CREATE", "ALTER") for n in needs)
