"""A flow's operating state (running / paused / stopped) on the target: the CLI sets it, every
step honours it (copy, topic sync, checkpoints), the DAG runs end skipped with the reason."""

from __future__ import annotations

import json

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.observe.status import flow_status, render_text
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import flow_state
from tests.integration.replicate_helpers import make_flow, mirror_topic
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, create_topic, produce, read_progress


def test_pause_stop_resume_from_the_cli(tmp_path, source, target, unique):
    pfx = unique("fstate")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 1)
    produce(source, t, records(30, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 30

    try:
        out = cli(cfg, "flow", "pause", "--flow", "A->B", "--reason", "maintenance of B").stdout
        assert out.startswith("flow A->B: paused by ") and "maintenance of B" in out
        produce(source, t, records(5, 1, seed="new"))
        # no copy (CLI run: exit 0, the reason printed), no topic sync
        proc = cli(cfg, "replicate", "--flow", "A->B", "--once", "--mode", "direct")
        assert "flow A->B: skipped: flow A->B is paused by " in proc.stdout and "maintenance of B" in proc.stdout
        assert len(consume_all(target, remote)) == 30
        create_topic(source, f"{pfx}.new", 1)
        rep = sync_flow(cfg, flow, ["topics"])
        assert not rep.changes and rep.skipped[0].reason.startswith("flow A->B is paused by ")
        # checkpoints go on while paused
        run = emit_checkpoints(cfg, flow)
        assert run.skipped_reason is None
        assert "A->B: enabled, paused by " in render_text([flow_status(cfg, flow)])

        listed = json.loads(cli(cfg, "flow", "list", "--json").stdout)
        assert [(r["flow"], r["state"], r["reason"]) for r in listed] == [("A->B", "paused", "maintenance of B")]

        cli(cfg, "flow", "stop", "--flow", "A->B")
        run = emit_checkpoints(cfg, flow)
        assert run.skipped_reason.startswith("flow A->B is stopped by ")

        cli(cfg, "flow", "resume", "--flow", "A->B")
        with FlowClients(cfg, flow) as clients:
            assert flow_state(clients).state == "running"
        assert run_once(cfg, flow, mode="direct").records == 5
        assert read_progress(cfg, flow, [(t, 0)])[(t, 0)].next == 35  # the control record is no progress
    finally:  # flow A->B is shared by the other tests: never leave it paused
        cli(cfg, "flow", "resume", "--flow", "A->B")


def test_a_state_declared_in_the_config_applies_over_running(tmp_path, source, target, unique):
    pfx = unique("fstate")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(3, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx, state="stopped")
    rep = run_once(cfg, flow, mode="direct")
    assert rep.skipped and "is stopped (in the config (state property))" in rep.skipped and rep.records == 0
    out = cli(cfg, "flow", "resume", "--flow", "A->B").stdout
    assert "the config declares state 'stopped'" in out


def test_a_failed_over_flow_refuses_pause_and_stop_through_every_door(tmp_path, source, target, unique,
                                                                       airflow_db, monkeypatch):
    """A pause or stop of a failed-over flow would erase what its failover recorded (a stop replaces
    the state that names the failback, a pause lets group sync move the failed-over groups again):
    the CLI and the status page's API refuse both, naming the failback, and change nothing; the
    failback still sees the flow as its failover left it. A forced resume is recorded as forced."""
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    from mirrorflow.ops.dr.failover import failover
    from mirrorflow.state.history import read_history

    cfg, flow = copied_flow_of_its_own(tmp_path, source, target, unique, "fsfo")
    src, tgt = flow.source, flow.target
    assert failover(cfg, flow).done

    def state_and_history():
        with FlowClients(cfg, flow) as clients:
            return flow_state(clients), read_history(clients)

    before = state_and_history()
    assert before[0].failed_over and [o.kind for o in before[1]] == ["failover"], before
    for action in ("pause", "stop"):
        proc = cli(cfg, "flow", action, "--flow", flow.name, "--reason", "maintenance", check=False)
        assert proc.returncode == 1, proc.stdout
        assert f"cannot {action} flow {flow.name}: it is stopped by " in proc.stderr, proc.stderr
        assert f"Next step: fail back once {src} is back: `mirrorflow failback --flow {flow.name}`" in proc.stderr
    # the status page's API (and so its buttons): the same refusal, 409
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    client = TestClient(create_app())
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="ada", role="admin"))
    for action in ("pause", "stop"):
        resp = client.post(f"/mirrorflow/api/flows/{flow.id}/control", json={"action": action, "reason": "x"},
                           headers={"Authorization": f"Bearer {token}"})
        assert resp.status_code == 409, resp.text
        assert resp.json()["detail"].startswith(f"cannot {action} flow {flow.name}: it is stopped by "), resp.text
    assert state_and_history() == before  # nothing written
    assert "is stopped" in (emit_checkpoints(cfg, flow).skipped_reason or "")  # no group sync over the moved groups

    # --force is for a resume only (the applications never moved), and the history says it was forced
    proc = cli(cfg, "flow", "stop", "--flow", flow.name, "--force", check=False)
    assert proc.returncode == 2 and "--force: only with `mirrorflow flow resume`, not stop" in proc.stderr
    cli(cfg, "flow", "resume", "--flow", flow.name, "--force", "--reason", "the applications never moved")
    st, ops = state_and_history()
    assert st.state == "running" and [o.kind for o in ops] == ["failover", "resume"], ops
    assert ops[-1].reason == "the applications never moved" and ops[-1].summary.startswith(
        f"forced resume of a failed-over flow (failed over to {tgt!r} at "), ops[-1]
    assert ops[-1].summary.endswith("): its failback is not done"), ops[-1]


def test_a_pause_decided_before_a_failover_committed_is_not_applied_over_it(tmp_path, source, target, unique):
    """Pause, resume and stop apply only over the state they were decided on: a failover that
    commits between an operator's read and write stands (it used to be overwritten, and the flow then
    looked paused, its checkpoints free to move the groups the failover had moved)."""
    from mirrorflow.errors import StateError
    from mirrorflow.state.flow_state import set_flow_state, stored_state

    pfx = unique("cas")
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"state.namespace": pfx})
    with FlowClients(cfg, flow) as clients:
        decided_on = stored_state(clients)  # what the operator's pause read: running, nothing recorded
        assert decided_on.state == "running" and decided_on.rev == ""
        set_flow_state(clients, "stopped", "failover of plan p1", "ops@host", via="cli", cause="failover")
        with pytest.raises(StateError, match=f"flow {flow.name} changed state while this pause was being recorded"):
            set_flow_state(clients, "paused", "maintenance", "alice", via="status-page", expect=decided_on)
        now = flow_state(clients)
        assert now.failed_over and now.reason == "failover of plan p1"
        # decided on what is there now, the same change applies (here: a forced resume's record)
        fresh = stored_state(clients)
        set_flow_state(clients, "running", "forced", "alice", via="cli", expect=fresh)
        assert flow_state(clients).state == "running"
        # and a second writer that read the same state loses, whichever door it came through
        base = stored_state(clients)
        set_flow_state(clients, "paused", "first", "bob", via="airflow", expect=base)
        with pytest.raises(StateError, match="changed state"):
            set_flow_state(clients, "stopped", "second", "carol", via="cli", expect=base)
        assert (flow_state(clients).state, flow_state(clients).by) == ("paused", "bob")


def test_a_resume_racing_a_failover_never_restarts_the_failed_over_flow(tmp_path, source, target, unique, monkeypatch):
    """A resume decided while the flow ran (its checks passed) and a failover that commits right after
    them: the resume must not apply over the failover (the flow would copy again from a source its
    applications left). Found by the model-based search (a resume raced a failover's commit and the
    flow was running afterwards): the resume read the state it writes over only after its checks, so it
    took the failover's record for its base. The failover here is real, committed at that moment."""
    from mirrorflow.errors import StateError
    from mirrorflow.ops.control import flow_control
    from mirrorflow.ops.dr.failover import failover
    from mirrorflow.ops.control.flow_control import control_flow

    cfg, flow = copied_flow_of_its_own(tmp_path, source, target, unique, "rsfo")

    checked = flow_control.resume_problem

    def then_a_failover(*a, **kw):  # the resume's checks pass (the flow runs), then the failover commits
        why = checked(*a, **kw)
        assert why is None and failover(cfg, flow).done
        return why

    monkeypatch.setattr(flow_control, "resume_problem", then_a_failover)
    with pytest.raises(StateError, match=f"flow {flow.name} changed state while this resume was being recorded"):
        control_flow(cfg, flow, "resume", "alice", via="cli")
    with FlowClients(cfg, flow) as clients:
        now = flow_state(clients)
    assert now.failed_over and now.state == "stopped", now.describe()
    assert run_once(cfg, flow, mode="direct").skipped  # and it copies nothing


def copied_flow_of_its_own(tmp_path, source, target, unique, tag: str):
    """A flow with aliases of its own (its failover touches no other test's flow) that copied 5 records."""
    from tests.support import write_config

    pfx = unique(tag)
    topic = f"{pfx}.orders"
    src, tgt = unique(f"{tag}A"), unique(f"{tag}B")
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target}, {f"{src}->{tgt}": {
        "topics": f"{pfx}\\..*", "state.topic.partitions": 1, "heartbeats.replication.enabled": False}})
    flow = cfg.flow(f"{src}->{tgt}")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(5, 1))
    assert run_once(cfg, flow, mode="direct").records == 5
    return cfg, flow
