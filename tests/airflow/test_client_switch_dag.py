"""The client switch through Airflow's doors (issue 40 item 3): the drill DAG rehearses the steps as a
dry run inside its RTO; the failover DAG's approval page lists them, and after the approved commit one
task per step runs in the `client_switch` group, in order: the alias file flips, each step is recorded
with the approver, and a failing step fails its task naming it while the commit stands and the steps
after it are not run; the failback DAG runs its own steps after the start. Real brokers, dag.test()."""

from __future__ import annotations

import os

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.history import read_history
from tests.airflow.test_failover_dag import answer_when_asked
from tests.integration.test_client_switch import BUILTIN, alias_file
from tests.integration.test_failover import commit, committed_offsets
from tests.integration.test_replicate import records
from tests.support import create_topic, produce, write_config

pytestmark = pytest.mark.airflow

DAGS = os.path.join(os.path.dirname(__file__), "..", "..", "dags")


def states(run) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def test_drill_failover_and_failback_dags_run_the_switch_steps(tmp_path, source, target, airflow_db, unique,
                                                               monkeypatch, capfd):
    pfx = unique("cswdag")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    app, second, readers = (tmp_path / n for n in ("app.properties", "second.properties", "readers.properties"))
    app_before = alias_file(app, source.bootstrap_servers)
    second_before = alias_file(second, source.bootstrap_servers)
    readers_before = alias_file(readers, target.bootstrap_servers)
    common = {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
              "heartbeats.replication.enabled": False}
    cfg = write_config(tmp_path / "mf.yaml", {"VA": source, "VB": target}, {
        "VA->VB": {**common,
                   "client.switch.failover": [
                       {"name": "app-alias", "callable": BUILTIN, "args": {"path": str(app)}},
                       {"name": "second", "callable": BUILTIN, "args": {"path": str(second)}},
                       {"name": "third", "callable": BUILTIN, "args": {"path": str(second), "key": "other"}}],
                   "client.switch.failback": [{"name": "readers", "callable": BUILTIN,
                                               "args": {"path": str(readers)}}]},
        "VB->VA": {**common, "standby": True, "initial.position": "latest"}})
    flow = cfg.flow("VA->VB")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(20, 1))
    assert run_once(cfg, flow, mode="direct").records == 20
    commit(source, group, topic, {0: 7})
    assert group in emit_checkpoints(cfg, flow).groups
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    # the drill: the steps' dry runs in its RTO, nothing changed
    drill = DagBag(dag_folder=os.path.join(DAGS, "mirrorflow_drill.py")).get_dag("mirrorflow_drill__VA-VB")
    run = drill.test(run_conf={"groups": None, "verify_from": "latest", "shadow_suffix": None})
    ti = run.get_task_instances()[0]
    assert ti.state == "success"
    out = ti.xcom_pull(task_ids="drill")
    assert [k for k in out["steps"] if k.startswith("client switch")] == [
        "client switch app-alias", "client switch second", "client switch third"]
    assert out["rto_s"] >= sum(out["steps"].values()) - 0.01 and out["client_switch"] == "3 step(s) ok", out
    assert app.read_text() == app_before and second.read_text() == second_before

    bag = DagBag(dag_folder=os.path.join(DAGS, "mirrorflow_failover.py"))
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_failover__VA-VB")
    assert [t.task_id for t in dag.tasks if t.task_id.startswith("client_switch.")] == [
        "client_switch.app-alias", "client_switch.second", "client_switch.third"]
    assert dag.get_task("client_switch.app-alias").upstream_task_ids == {"commit"}
    assert dag.get_task("client_switch.third").upstream_task_ids == {"client_switch.second"}

    second.unlink()  # the second step will fail: its file is gone
    seen: dict = {}
    answer = answer_when_asked(dag.dag_id, "Approve", "carol", seen)
    capfd.readouterr()
    run = dag.test(run_conf={"mode": "unplanned", "groups": None, "max_lag": None, "take_over": False,
                             "dry_run": False, "approval_timeout_minutes": 7, "approvers": None})
    answer.join(5)
    log = "".join(capfd.readouterr())
    assert states(run) == {"preflight": "success", "go_on": "success", "approve_failover": "success",
                           "commit": "success", "client_switch.app-alias": "success",
                           "client_switch.second": "failed", "client_switch.third": "upstream_failed"}, states(run)
    # the approval page listed the steps it approves
    assert "**Approve also runs 3 client-switch step(s)** after the commit, in order" in seen["body"], seen["body"]
    assert f"`app-alias: {BUILTIN}(path='{app}')`" in seen["body"]
    # the failing step: one error naming it; the failover stands
    plan_id = run.get_task_instances()[0].xcom_pull(task_ids="preflight")["plan_id"]
    assert (f"failover of VA->VB: client-switch step 'second' ({BUILTIN}) failed: cannot read {second}: No such "
            f"file or directory. The failover stands (committed, plan {plan_id}; nothing undone); steps not run: "
            "third.") in log, log[-3000:]
    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "stopped"
        recs = [r for r in read_history(clients) if r.kind == "client-switch"]
    assert committed_offsets(target, group, f"VA.{topic}", 1) == {0: 7}
    assert app.read_text() == app_before.replace(source.bootstrap_servers, target.bootstrap_servers)
    assert [(r.figures["step"], r.figures["ok"], r.by, r.via) for r in recs] == [
        ("app-alias", True, "carol", "airflow"), ("second", False, "carol", "airflow")]
    assert all(isinstance(r.figures["seconds"], float) for r in recs)

    # the failback DAG: its step after the start
    fb = DagBag(dag_folder=os.path.join(DAGS, "mirrorflow_failback.py")).get_dag("mirrorflow_failback__VA-VB")
    answer = answer_when_asked(fb.dag_id, "Approve", "dave", seen, task_id="approve_failback")
    run = fb.test(run_conf={"dry_run": False, "reseed": False, "accept_loss": False, "approval_timeout_minutes": 7,
                            "approvers": None})
    answer.join(5)
    assert states(run) == {"preflight": "success", "go_on": "success", "approve_failback": "success",
                           "start": "success", "client_switch.readers": "success"}, states(run)
    assert readers.read_text() == readers_before.replace(target.bootstrap_servers, source.bootstrap_servers)
    with FlowClients(cfg, cfg.flow("VB->VA")) as clients:
        recs = [r for r in read_history(clients) if r.kind == "client-switch"]
    assert [(r.figures["step"], r.by) for r in recs] == [("readers", "dave")]
