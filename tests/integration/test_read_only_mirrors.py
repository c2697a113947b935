"""Read-only mirrors (`mirror.read.only: true`, issue 40 item 1) on real SASL clusters with the
StandardAuthorizer (S and T, under aliases of their own: a failed-over flow would stop other tests'
S->T). The flows' principal is `admin`, a super user of both; the application is `alice`, who may write
the topics on both clusters (ALLOW WRITE). The sync puts a DENY WRITE for User:* on the remote topic
before creating it: the flow's copies pass (a super user), alice's write to the mirror is refused;
the failover's commit lifts it (the promotion, in the history and on the status page) and alice's
write is accepted; the failback puts it on the side that became the mirror. A target without an
authorizer, a principal that may not alter ACLs, and one that may but is not a super user are refused
by `config validate` and by the sync, before anything changes."""

from __future__ import annotations

import json

import pytest
import yaml
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
from mirrorflow.errors import ConfigError
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.observe.status_page import flow_page
from mirrorflow.replication.run.runner import run_once
from mirrorflow_airflow.status_html import render_flow
from tests.integration.test_acl_sync import acls_on, add_acls
from tests.integration.test_acls_after_failover import write_as
from tests.integration.test_acls_cmd import conf_for
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, create_topic, produce

pytestmark = pytest.mark.integration

ANY = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                       AclPermissionType.ANY)
REFUSED = "Topic authorization failed|TOPIC_AUTHORIZATION_FAILED"


def binding(restype, name, pattern, principal, op, perm=AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, "*", op, perm)


def probes_left(cluster) -> list[str]:
    a = AdminClient(cluster.client_config())
    return [b.name for b in a.describe_acls(ANY).result(15) if b.name.startswith("__mirrorflow_probe_")]


def drop(cluster, bindings) -> None:
    a = AdminClient(cluster.client_config())
    flts = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                             b.permission_type) for b in bindings]
    for f in a.delete_acls(flts).values():
        f.result(15)


def test_a_read_only_mirror_refuses_applications_until_the_failover_promotes_it(tmp_path, sasl_cluster,
                                                                                  sasl_target, unique):
    pfx = unique("ro")
    topic = f"{pfx}.orders"  # IdentityReplicationPolicy: the mirror on T has the same name
    common = {"topics": f"{pfx}\\..*", "replication.policy.class": "IdentityReplicationPolicy",
              "mirror.read.only": True, "state.topic.partitions": 2, "heartbeats.replication.enabled": False,
              "emit.heartbeats.enabled": False}
    raw = {"clusters": {"RS": conf_for(sasl_cluster, "admin", "MF_RO_S"),
                        "RT": conf_for(sasl_target, "admin", "MF_RO_T")},
           "flows": {"RS->RT": common, "RT->RS": {**common, "standby": True}}}
    path = tmp_path / "mf.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = config_mod.load(path)
    fwd, rev = cfg.flow("RS->RT"), cfg.flow("RT->RS")
    # alice, the application, may write the topics on both clusters
    alice = [binding(ResourceType.TOPIC, f"{pfx}.", ResourcePatternType.PREFIXED, "User:alice", op)
             for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    create_topic(sasl_cluster, topic, 2)
    add_acls(sasl_cluster, alice)
    add_acls(sasl_target, alice)
    try:
        assert "OK (2 clusters, 2 flows" in cli(cfg, "config", "validate").stdout  # admin: a super user
        assert probes_left(sasl_target) == [] and probes_left(sasl_cluster) == []
        write_as(sasl_cluster, "alice", topic)  # alice writes the primary

        dry = sync_flow(cfg, fwd, dry_run=True)
        assert [(c.kind, c.resource, c.status) for c in dry.changes if c.concern == "acls"] == [
            ("deny-write", topic, "planned")]
        assert acls_on(sasl_target, topic) == []  # the dry run created nothing
        report = sync_flow(cfg, fwd)
        assert report.ok, report.render()
        assert report.counts()["writes_denied"] == 1 and report.counts()["topics_created"] == 1
        assert "1 remote topic made read-only" in report.headline()
        assert acls_on(sasl_target, topic) == [("User:*", "*", "WRITE", "DENY", "LITERAL")]
        assert sync_flow(cfg, fwd).counts()["writes_denied"] == 0  # in place: nothing to add

        produce(sasl_cluster, topic, records(40, 2, seed="onS"))
        assert run_once(cfg, fwd, mode="direct").records == 41  # the flow (a super user) writes the mirror
        with pytest.raises(RuntimeError, match=REFUSED):  # alice may not: the mirror is read-only
            write_as(sasl_target, "alice", topic)
        assert flow_page(cfg, fwd).mirror == ("read-only mirror: 1 remote topic(s) on 'RT' refuse every writer "
                                              "but mirrorflow (DENY WRITE for User:*) until a failover promotes them")

        out = json.loads(cli(cfg, "failover", "--flow", "RS->RT", "--yes", "--json").stdout)
        assert out["done"] is True and out["promoted"] == [topic], out
        assert acls_on(sasl_target, topic) == []
        write_as(sasl_target, "alice", topic)  # promoted: alice writes T now
        # alice's record on T, beside the copy of the one she wrote on S
        assert sum(r.value == b"after the failover" for r in consume_all(sasl_target, topic)) == 2
        # the promotion, in the history and on the status page
        ops = json.loads(cli(cfg, "history", "--flow", "RS->RT", "--json").stdout)
        assert [o["kind"] for o in ops][-2:] == ["failover", "promote"], ops
        assert ops[-1]["summary"] == ("read-only mirror promoted: the DENY WRITE for User:* lifted from 1 remote "
                                      "topic(s) on 'RT'; applications may write them") and ops[-1]["figures"] == {
            "topics": 1}
        page = flow_page(cfg, fwd)
        assert [o.kind for o in page.operations][-1] == "promote"
        assert page.mirror == ("read-only mirror: no remote topic on 'RT' is read-only now (promoted, or not "
                               "synced yet)")
        card = render_flow(page, lambda flow: [])
        assert "<b>promote</b>" in card and "read-only mirror promoted: the DENY WRITE for User:* lifted" in card
        assert 'data-k="mirror">read-only mirror: no remote topic on &#x27;RT&#x27; is read-only now' in card
        again = json.loads(cli(cfg, "failover", "--flow", "RS->RT", "--yes", "--json").stdout)
        assert again["promoted"] == [] and "already" in (again["note"] or ""), again  # lifting twice: once

        # the failback: S becomes the mirror of RT->RS, read-only before the reverse flow copies into it
        fb = json.loads(cli(cfg, "failback", "--flow", "RS->RT", "--yes", "--json").stdout)
        assert fb["done"] is True and fb["read_only"] == [topic], fb
        assert acls_on(sasl_cluster, topic) == [("User:*", "*", "WRITE", "DENY", "LITERAL")]
        with pytest.raises(RuntimeError, match=REFUSED):
            write_as(sasl_cluster, "alice", topic)
        fb_ops = json.loads(cli(cfg, "history", "--flow", "RT->RS", "--json").stdout)
        assert fb_ops[-1]["kind"] == "failback" and fb_ops[-1]["figures"]["made read-only"] == 1, fb_ops
        rep = run_once(cfg, rev, mode="direct")  # the reverse flow (a super user on S) copies alice's record
        assert rep.ok and rep.records == 1, rep.render()
        assert probes_left(sasl_target) == [] and probes_left(sasl_cluster) == []
    finally:
        drop(sasl_cluster, alice + [binding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:*",
                                            AclOperation.WRITE, AclPermissionType.DENY)])
        drop(sasl_target, alice + [binding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:*",
                                           AclOperation.WRITE, AclPermissionType.DENY)])


def test_a_target_that_cannot_keep_a_mirror_read_only_is_refused_before_anything_changes(
        tmp_path, sasl_cluster, sasl_target, target, unique):
    pfx = unique("rono")
    topic = f"{pfx}.orders"
    flow = {"topics": f"{pfx}\\..*", "mirror.read.only": True, "heartbeats.replication.enabled": False,
            "emit.heartbeats.enabled": False}
    raw = {"clusters": {"NS": conf_for(sasl_cluster, "admin", "MF_RONO_S"),
                        "PLAIN": dict(target.client_config()),  # B: no authorizer
                        "ALICE": conf_for(sasl_target, "alice", "MF_RONO_A")},
           "flows": {"NS->PLAIN": flow, "NS->ALICE": flow}}
    path = tmp_path / "mf.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = config_mod.load(path)
    create_topic(sasl_cluster, topic, 1)

    proc = cli(cfg, "config", "validate", check=False)
    assert proc.returncode == 2, proc.stderr
    assert ("flows.NS->PLAIN.mirror.read.only: cluster 'PLAIN' has no authorizer (its brokers set no "
            "authorizer.class.name), so it enforces no ACL") in proc.stderr
    assert ("flows.NS->ALICE.mirror.read.only: the principal of cluster 'ALICE''s connection may not alter ACLs "
            "(DeleteAcls/CreateAcls were refused: it needs ALTER on the cluster)") in proc.stderr

    with pytest.raises(ConfigError, match="cluster 'PLAIN' has no authorizer"):
        sync_flow(cfg, "NS->PLAIN")
    assert f"NS.{topic}" not in AdminClient(target.client_config()).list_topics(timeout=10).topics  # nothing created

    # alice may alter ACLs now, but is no super user: the DENY would refuse her copies too
    alter = [binding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", op)
             for op in (AclOperation.ALTER, AclOperation.DESCRIBE)]
    add_acls(sasl_target, alter)
    try:
        proc = cli(cfg, "config", "validate", check=False)
        assert proc.returncode == 2, proc.stderr
        assert ("flows.NS->ALICE.mirror.read.only: the principal of cluster 'ALICE''s connection is not a super "
                "user of that cluster (super.users)") in proc.stderr
        assert "NS->PLAIN" in proc.stderr
        with pytest.raises(ConfigError, match="is not a super user of that cluster"):
            sync_flow(cfg, "NS->ALICE", ["topics", "acls"])
        assert acls_on(sasl_target, f"NS.{topic}") == []
        assert f"NS.{topic}" not in AdminClient(sasl_target.client_config()).list_topics(timeout=10).topics
        assert probes_left(sasl_target) == []  # the probe's binding is gone again
    finally:
        drop(sasl_target, alter)
