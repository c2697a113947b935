"""The failover DAG: Params form, preflight, a dry run that stops after it, and a run whose
approval step is given (dag.test's mark_success_pattern) that commits and stops the flow."""

from __future__ import annotations

import os

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.runner import run_once
from mirrorflow.state.flow_state import flow_state
from tests.integration.test_failover import commit, first_record_after_resume
from tests.integration.test_replicate import records
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_failover.py")


def test_failover_dag_dry_run_then_approved_commit(tmp_path, source, target, airflow_db, unique, monkeypatch):
    pfx = unique("fodag")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    # source alias F: a flow of its own (F->B), so its stopped state touches no other test's flow
    cfg = write_config(tmp_path / "mf.yaml", {"F": source, "B": target}, {"F->B": {
        "topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
        "heartbeats.replication.enabled": False}})
    flow = cfg.flow("F->B")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(40, 1))
    assert run_once(cfg, flow, mode="direct").records == 40
    commit(source, group, topic, {0: 17})
    assert group in emit_checkpoints(cfg, flow).groups

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_failover__F-B")
    assert type(dag.timetable).__name__ == "NullTimetable"
    assert set(dag.params.keys()) == {"mode", "groups", "dry_run"}
    assert dag.get_task("approve_failover").task_type == "ApprovalOperator"

    run = dag.test(run_conf={"dry_run": True})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"preflight": "success", "go_on": "success", "approve_failover": "skipped", "commit": "skipped"}
    pre = [ti for ti in run.get_task_instances() if ti.task_id == "preflight"][0].xcom_pull(task_ids="preflight")
    assert pre["not_replicated"] == 0 and f"{group} resumes F.{topic}[0] at" in pre["text"], pre["text"]
    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "running"

    # every Param given: dag.test() keeps the previous run_conf in the DAG object's params
    run = dag.test(run_conf={"mode": "unplanned", "groups": "", "dry_run": False}, mark_success_pattern="approve_.*")
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    go = [ti for ti in run.get_task_instances() if ti.task_id == "go_on"][0]
    assert states["commit"] == "success", (states, run.run_id, run.conf, go.xcom_pull(task_ids="go_on"))
    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "stopped"
    want = consume_all(source, topic)[17]
    _, msg = first_record_after_resume(target, group, f"F.{topic}", 0)
    assert (msg.key(), msg.value()) == (want.key, want.value)
