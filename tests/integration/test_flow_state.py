"""A flow's operating state (running / paused / stopped) on the target: the CLI sets it, every
step honours it (copy, topic sync, checkpoints), the DAG runs end skipped with the reason."""

from __future__ import annotations

import json

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.ops.observe.status import flow_status, render_text
from mirrorflow.replication.runner import run_once
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
