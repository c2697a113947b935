"""`mirrorflow acls` on real SASL clusters with the StandardAuthorizer: flow S->T run by the
ordinary users alice (source, read-only) and bob (target). Without the ACLs a run fails with a
clear error; after `acls --apply` (through admin aliases) sync, replicate, checkpoints, group sync
and heartbeats all succeed, and nothing is written to the source."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from confluent_kafka.admin import AclBindingFilter, AdminClient

from mirrorflow import config as config_mod
from mirrorflow.errors import MirrorflowError
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.groups.heartbeat import emit_heartbeats
from mirrorflow.groups.offset_sync import sync_group_offsets
from mirrorflow.kafka.acl_admin import to_kafka
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.ops.acls.required_acls import required_acls
from mirrorflow.replication.run.runner import run_once
from tests.integration.test_failover import commit
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, create_topic, produce

pytestmark = pytest.mark.integration


def conf_for(cluster, user: str, var: str) -> dict:
    conf = dict(cluster.client_config(user))
    os.environ[var] = conf["sasl.password"]
    conf["sasl.password"] = "${env:%s}" % var
    return conf


def drop_acls(cfg, flow) -> None:
    """Delete exactly the bindings `acls --apply` created for the flow (other tests' ACLs stay)."""
    needs, _ = required_acls(cfg, flow)
    for side, cluster in (("source", "SADM"), ("target", "TADM")):
        a = AdminClient(cfg.clusters[cluster].client_config())
        filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                    b.permission_type) for b in (to_kafka(n.acl) for n in needs if n.side == side)]
        for f in a.delete_acls(filters).values():
            f.result(15)


def test_acls_apply_lets_read_only_principals_run(tmp_path, sasl_cluster, sasl_target, unique):
    pfx = unique("acl")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    raw = {
        "clusters": {
            "S": conf_for(sasl_cluster, "alice", "MF_ACL_S_ALICE"),
            "T": conf_for(sasl_target, "bob", "MF_ACL_T_BOB"),
            "SADM": conf_for(sasl_cluster, "admin", "MF_ACL_S_ADMIN"),
            "TADM": conf_for(sasl_target, "admin", "MF_ACL_T_ADMIN"),
        },
        "flows": {"S->T": {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "sync.group.offsets.enabled": True,
                           "state.topic.partitions": 2, "heartbeats.replication.enabled": False}},
    }
    path = tmp_path / "mf.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = config_mod.load(path)
    flow = cfg.flow("S->T")
    create_topic(sasl_cluster, topic, 2)
    produce(sasl_cluster, topic, records(20, 2))
    commit(sasl_cluster, group, topic, {0: 4, 1: 7})
    try:
        offline = json.loads(cli(cfg, "acls", "--flow", "S->T", "--offline", "--json").stdout)
        assert offline["principals"] == {"source": "User:alice", "target": "User:bob"}
        src = {(a["resource"], a["pattern"], a["name"], a["operation"])
               for a in offline["acls"] if a["side"] == "source"}
        assert src == {("TOPIC", "PREFIXED", f"{pfx}.", op) for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")} | {
            ("GROUP", "PREFIXED", f"{pfx}-", "DESCRIBE"), ("CLUSTER", "LITERAL", "kafka-cluster", "DESCRIBE"),
            ("GROUP", "PREFIXED", "mirrorflow-", "READ"), ("GROUP", "PREFIXED", "mirrorflow-", "DESCRIBE")}

        # without the ACLs: a clear error naming the cluster and what is not allowed
        with pytest.raises(MirrorflowError) as err:
            run_once(cfg, flow, mode="direct")
        assert str(err.value) == ("cannot create the state topics of flow S->T on cluster 'T': cluster 'T': cannot "
                                  "create topic 'mirrorflow.S-T.progress.internal': Authorization failed.")
        checked = json.loads(cli(cfg, "acls", "--flow", "S->T", "--source-admin", "SADM", "--target-admin",
                                 "TADM", "--json").stdout)
        assert checked["missing"] == len(checked["acls"]) and {a["status"] for a in checked["acls"]} == {"missing"}

        applied = json.loads(cli(cfg, "acls", "--flow", "S->T", "--apply", "--source-admin", "SADM",
                                 "--target-admin", "TADM", "--json").stdout)
        assert {a["status"] for a in applied["acls"]} == {"created"} and applied["ok"] is True

        # with them: every step of a run succeeds as alice (read-only on S) and bob
        assert sync_flow(cfg, flow).ok
        rep = run_once(cfg, flow, mode="direct")
        assert rep.ok and rep.records == 20, rep.render()
        run = emit_checkpoints(cfg, flow)
        assert group in run.groups and not run.errors
        gs = sync_group_offsets(cfg, flow)
        assert not gs.errors and [g.group for g in gs.plans if g.writes] == [group]
        hb = emit_heartbeats(cfg, flow)  # the reverse heartbeat into S is not allowed: skipped, no failure
        assert [(e.cluster, e.topic) for e in hb] == [("T", "heartbeats")]
        assert len(consume_all(sasl_target, f"S.{topic}")) == 20

        again = json.loads(cli(cfg, "acls", "--flow", "S->T", "--source-admin", "SADM", "--target-admin",
                               "TADM", "--json").stdout)
        assert again["missing"] == 0 and {a["status"] for a in again["acls"]} == {"present"}
    finally:
        drop_acls(cfg, flow)
