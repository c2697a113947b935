"""The operations history on the target: every pause, resume, stop and reseed appended (never
compacted) with who, when, through which door and why; `mirrorflow history` reads it back."""
from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import ConfigResource

from mirrorflow.clients import FlowClients
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.history import read_history
from mirrorflow.state.lease import whoami
from mirrorflow.state.names import history_topic
from tests.integration.test_replicate import cli
from tests.support import admin, create_topic, produce, write_config

pytestmark = pytest.mark.integration


def _flow(tmp_path, source, target, unique, topic: str):
    # aliases of its own, so the flow's history holds only this test's operations
    src, tgt = unique("HA"), unique("HB")
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"topics": topic, "heartbeats.replication.enabled": False,
                                          "state.topic.partitions": 1}})
    return cfg, cfg.flow(f"{src}->{tgt}")


def test_pause_stop_resume_and_reseed_are_appended_with_who_and_why(tmp_path, source, target, unique):
    topic = unique("hist")
    cfg, flow = _flow(tmp_path, source, target, unique, topic)
    create_topic(source, topic, partitions=2)
    create_topic(target, f"{flow.source}.{topic}", partitions=2)
    produce(source, topic, [{"partition": i % 2, "value": b"v%d" % i} for i in range(9)])
    assert cli(cfg, "history", "--flow", flow.name).stdout == f"flow {flow.name}: no operation recorded yet\n"

    cli(cfg, "flow", "pause", "--flow", flow.name, "--reason", "maintenance of B")
    cli(cfg, "flow", "pause", "--flow", flow.name, "--reason", "still maintaining")  # kept: appended, not compacted
    cli(cfg, "flow", "stop", "--flow", flow.name)
    cli(cfg, "flow", "resume", "--flow", flow.name, "--reason", "done")
    cli(cfg, "reseed", "--flow", flow.name, "--topic", topic, "--yes")

    rows = json.loads(cli(cfg, "history", "--flow", flow.name, "--json").stdout)
    me = whoami().rsplit(" pid ", 1)[0]  # user@host; the pid is the CLI process's
    assert [(r["flow"], r["kind"], r["via"], r["reason"], r["summary"], r["figures"]) for r in rows] == [
        (flow.name, "pause", "cli", "maintenance of B", "", {}),
        (flow.name, "pause", "cli", "still maintaining", "", {}),
        (flow.name, "stop", "cli", "", "", {}),
        (flow.name, "resume", "cli", "done", "", {}),
        (flow.name, "reseed", "cli", "", f"re-seeded {topic}", {"partitions": 2, "offsets to copy": 9}),
    ]
    assert all(r["by"].startswith(me + " pid ") for r in rows)
    assert [r["at"] for r in rows] == sorted(r["at"] for r in rows)
    # the state record and the history line of one change carry the same time
    with FlowClients(cfg, flow) as clients:
        st = flow_state(clients)
        assert (st.state, st.reason, st.at) == ("running", "done", rows[3]["at"])
        assert [o.kind for o in read_history(clients, 2)] == ["resume", "reseed"]
    text = cli(cfg, "history", "--flow", flow.name, "--limit", "1").stdout.splitlines()
    assert len(text) == 1 and text[0].endswith(f" reseed by {rows[4]['by']} (cli): re-seeded {topic}; partitions 2, "
                                               "offsets to copy 9")

    # the topic: one partition, deleted by time and size, never compacted
    res, tadmin = ConfigResource(ConfigResource.Type.TOPIC, history_topic(flow)), admin(target)
    conf = tadmin.describe_configs([res])[res].result(30)
    assert (conf["cleanup.policy"].value, conf["retention.ms"].value, conf["retention.bytes"].value) == (
        "delete", str(366 * 24 * 3600 * 1000), str(64 * 1024 * 1024))
    assert len(tadmin.list_topics(history_topic(flow), timeout=10).topics[history_topic(flow)].partitions) == 1


def test_a_refused_resume_and_a_bad_limit_record_nothing(tmp_path, source, target, unique):
    topic = unique("hist")
    cfg, flow = _flow(tmp_path, source, target, unique, topic)
    bad = cli(cfg, "history", "--flow", flow.name, "--limit", "0", check=False)
    assert bad.returncode == 2 and "limit: expected a positive number of operations, got 0" in bad.stderr
    # the standby of a pair with the identity policy both ways: resuming it while A->B runs is refused
    ident = {"replication.policy.class": "IdentityReplicationPolicy", "topics": topic,
             "heartbeats.replication.enabled": False, "state.topic.partitions": 1}
    a, b = flow.source, flow.target
    cfg = write_config(tmp_path / "pair.yaml", {a: source, b: target},
                       {f"{a}->{b}": ident, f"{b}->{a}": {**ident, "standby": True}})
    proc = cli(cfg, "flow", "resume", "--flow", f"{b}->{a}", check=False)
    assert proc.returncode != 0 and f"cannot resume flow {b}->{a}: the reverse flow {a}->{b} is running" in proc.stderr
    assert json.loads(cli(cfg, "history", "--flow", f"{b}->{a}", "--json").stdout) == []
