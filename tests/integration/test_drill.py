"""The DR drill on real brokers: the failover rehearsed while the flow runs. Where each
group would resume is exactly what its checkpoint translates; the RPO counts what was produced after
the last copy; the verify is bounded to the window asked; the shadow groups get the resume offsets;
the real group on the target, the flow state and the flow's runs are untouched; the drill is in the
history and on `mirrorflow status`."""

from __future__ import annotations

import json

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import CheckpointStore, emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.history import read_history
from tests.integration.test_failover import commit, committed_offsets
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.integration


def drilled_flow(tmp_path, source, target, unique):
    """A flow of its own, 60 records copied, group G committed on the source at {0: 23, 1: 11} and
    checkpointed, G on the target at {0: 3, 1: 4} (an earlier sync), then 20 records not copied."""
    src, tgt, pfx = unique("DA"), unique("DB"), unique("drill")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target}, {f"{src}->{tgt}": {
        "topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 1,
        "heartbeats.replication.enabled": False}})
    flow = cfg.flow(f"{src}->{tgt}")
    remote = f"{src}.{topic}"
    create_topic(source, topic, 2)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(60, 2))
    assert run_once(cfg, flow, mode="direct").records == 60
    commit(source, group, topic, {0: 23, 1: 11})
    assert group in emit_checkpoints(cfg, flow).groups
    commit(target, group, remote, {0: 3, 1: 4})
    produce(source, topic, records(20, 2, seed="late"))  # after the last copy: the RPO
    return cfg, flow, topic, remote, group


def test_drill_rehearses_the_failover_and_moves_nothing(tmp_path, source, target, unique):
    cfg, flow, topic, remote, group = drilled_flow(tmp_path, source, target, unique)
    with FlowClients(cfg, flow) as clients:
        translated = {f"{t}:{p}": c.downstream_offset for (t, p), c in CheckpointStore.load(clients).for_group(group).items()}
    assert set(translated) == {f"{remote}:0", f"{remote}:1"}

    out = json.loads(cli(cfg, "drill", "--flow", flow.name, "--verify-from", "offset:20",
                         "--shadow-suffix", ".drill", "--json").stdout)
    assert out["ok"] is True, out
    assert out["resumes"] == {group: translated}  # exactly what the checkpoint translates
    # ... which is the first record the application had not read on the source
    src, dst = consume_all(source, topic), consume_all(target, remote)
    for p, resume in ((0, 23), (1, 11)):
        want = next(r for r in src if r.partition == p and r.offset == resume).content()
        assert translated[f"{remote}:{p}"] == next(r.offset for r in dst if r.partition == p and r.content() == want)
    # RPO: the 20 records produced after the last copy, per partition
    assert out["not_replicated"] == 20
    assert {(x["partition"], x["replicated_to"], x["source_end"], x["not_replicated"]) for x in out["partitions"]} == {
        (0, 30, 40, 10), (1, 30, 40, 10)}
    assert out["seconds_behind"] > 0
    # the verify was bounded to source offsets 20.. of the copied 0..30 of each partition
    assert out["verify"] == "ok" and out["verify_from"] == "offset:20"
    assert out["verify_report"]["records"] == 20 and out["verify_report"]["matched"] == 20
    assert set(out["steps"]) == {"plan", "verify", "shadow commit"}
    assert out["rto_s"] == pytest.approx(sum(out["steps"].values()), abs=0.01)
    # shadow group: committed at the resume offsets; the real group and the flow untouched
    assert out["shadow"] == {f"{group}.drill": translated}
    assert committed_offsets(target, f"{group}.drill", remote, 2) == {0: translated[f"{remote}:0"],
                                                                      1: translated[f"{remote}:1"]}
    assert committed_offsets(target, group, remote, 2) == {0: 3, 1: 4}
    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "running" and out["state"].startswith("running")
        last = read_history(clients)[-1]
    assert (last.kind, last.via, last.figures["RPO offsets"], last.figures["groups"], last.figures["verify"]) == (
        "drill", "cli", 20, 1, "ok")
    status = cli(cfg, "status", "--flow", flow.name).stdout
    assert "last drill at " in status and "RPO 20 offsets not replicated" in status
    assert "1 group(s) would resume, verify ok, shadow groups <group>.drill" in status
    from mirrorflow.observe.status_page import flow_page
    from mirrorflow_airflow import status_html

    card = status_html.render_flow(flow_page(cfg, flow), lambda f: [])  # the status page's card of the flow
    assert card.count("last drill at ") == 1 and "RPO 20 offsets not replicated" in card
    # the flow's runs were never blocked: the next copies the 20 records
    assert run_once(cfg, flow, mode="direct").records == 20

    # bad suffixes: refused, nothing committed (a group of the flow; an existing group that is no shadow)
    proc = cli(cfg, "drill", "--flow", flow.name, "--shadow-suffix", "", check=False)
    assert proc.returncode == 2 and "--shadow-suffix: must not be empty" in proc.stderr
    commit(target, f"{group}.mine", remote, {0: 1})
    proc = cli(cfg, "drill", "--flow", flow.name, "--shadow-suffix", ".mine", check=False)
    assert proc.returncode == 2 and f"are not shadows of a drill: {group}.mine" in proc.stderr
    assert committed_offsets(target, f"{group}.mine", remote, 2) == {0: 1, 1: -1001}
    assert committed_offsets(target, group, remote, 2) == {0: 3, 1: 4}


def test_verify_window_and_resume_offsets_of_a_report():
    """Pure: the window a drill verifies, and where groups resume (never backwards, left-alone apart)."""
    from mirrorflow.errors import ConfigError
    from mirrorflow.groups.offset_sync import GroupSyncPlan, PartitionSync
    from mirrorflow.ops.dr.drill import DrillReport, verify_start
    from mirrorflow.ops.dr.failover_plan import FailoverPlan, PartitionRPO

    now = 1_764_000_000_000  # 2025-11-24T16:00:00Z
    assert verify_start(None, now) == "2025-11-24T15:00:00.000+00:00"  # the last hour
    assert verify_start("90s", now) == "2025-11-24T15:58:30.000+00:00"
    assert [verify_start(w, now) for w in ("offset:7", "earliest", "latest")] == ["offset:7", "earliest", "latest"]
    with pytest.raises(ConfigError, match="--verify-from: expected a duration back from now .* got 'yesterday'"):
        verify_start("yesterday", now)
    with pytest.raises(ConfigError, match="needs a time zone"):
        verify_start("2025-11-24T15:00:00", now)

    plan = FailoverPlan("A->B", "B", "unplanned", None, (
        PartitionRPO("o", 0, "A.o", 30, 31, 40, now - 4000), PartitionRPO("o", 1, "A.o", 30, 31, 30, now - 9000)), (
        GroupSyncPlan("app", "empty", 0, "sync", (PartitionSync("A.o", 0, 24, 3, "write"),
                                                  PartitionSync("A.o", 1, 12, 14, "skip-ahead"),
                                                  PartitionSync("A.gone", 0, 5, None, "skip-no-topic"))),
        GroupSyncPlan("busy", "active", 2, "left-alone", (PartitionSync("A.o", 0, 5, None, "skip-active"),),
                      "2 active member(s) on the target")), now)
    rep = DrillReport("A->B", "B", "me", at_ms=now, plan=plan, steps={"plan": 0.5, "verify": 1.25})
    assert rep.resumes() == {"app": {"A.o:0": 24, "A.o:1": 14}}  # ahead on B: stays there
    assert rep.left_alone() == {"busy": "2 active member(s) on the target"}
    assert (rep.not_replicated, rep.seconds_behind, rep.rto_s) == (10, 4.0, 1.75)  # partition 1 caught up: 0 s
    # the record's RTO is the sum of its steps as it shows them (rounded apart, these added up to 0.481 s, the RTO
    # 0.480 s, which tests/integration/test_client_switch.py compares)
    rounding = DrillReport("A->B", "B", "me", at_ms=now, plan=plan,
                           steps={"plan": 0.2726, "verify": 0.2076, "client switch x": 0.0001}).record()
    assert rounding["steps"] == {"plan": 0.273, "verify": 0.208, "client switch x": 0.0}
    assert rounding["rto_s"] == 0.481
    assert rep.ok and "RPO 10 offsets not replicated (4 s behind), RTO 1.8 s, 1 group(s) would resume " \
                      "(1 left alone), verify not run" in rep.render()
    rep.plan = FailoverPlan("A->B", "B", "unplanned", None, plan.partitions, plan.groups, now, errors={"g": "denied"})
    assert not rep.ok and "g: CANNOT be read on the target: denied" in rep.render()
