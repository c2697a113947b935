"""The failback DAG: no Params but dry_run, preflight (divergence), a dry run that stops after it,
and a run whose approval step is given (dag.test's mark_success_pattern) that starts the reverse flow."""

from __future__ import annotations

import os

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.ops.dr.failover import failover
from mirrorflow.replication.runner import run_once
from mirrorflow.state.flow_state import flow_state
from tests.airflow.lineage_support import lineage, record_lineage
from tests.integration.test_replicate import records
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_failback.py")


def test_failback_dag_dry_run_then_approved_start(tmp_path, source, target, airflow_db, unique, monkeypatch):
    pfx = unique("fbdag")
    topic = f"{pfx}.orders"
    common = {"topics": f"{pfx}\\..*", "replication.policy.class": "IdentityReplicationPolicy",
              "state.topic.partitions": 2, "heartbeats.replication.enabled": False}
    # aliases KA/KB: flows of their own, so their states touch no other test's flow
    cfg = write_config(tmp_path / "mf.yaml", {"KA": source, "KB": target},
                       {"KA->KB": common, "KB->KA": {**common, "standby": True}})
    fwd, rev = cfg.flow("KA->KB"), cfg.flow("KB->KA")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, fwd, ["topics"]).ok
    produce(source, topic, records(30, 1))
    assert run_once(cfg, fwd, mode="direct").records == 30
    produce(source, topic, records(4, 1, seed="late"))  # never replicated
    assert failover(cfg, fwd).done
    produce(target, topic, records(3, 1, seed="wait"))  # written on B before the failback

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_failback__KA-KB")
    assert type(dag.timetable).__name__ == "NullTimetable"
    assert set(dag.params.keys()) == {"dry_run", "reseed"}
    assert dag.get_task("approve_failback").task_type == "ApprovalOperator"

    run = dag.test(run_conf={"dry_run": True})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"preflight": "success", "go_on": "success", "approve_failback": "skipped", "start": "skipped"}
    pre = [ti for ti in run.get_task_instances() if ti.task_id == "preflight"][0].xcom_pull(task_ids="preflight")
    assert pre["diverged"] == 4 and f"{topic}[0]: 4 records at offsets 30..34" in pre["text"], pre["text"]
    assert pre["to_copy"] == 3 and pre["split"] == 0 and "written on KB outside KA->KB: 3 records" in pre["text"]
    with FlowClients(cfg, rev) as clients:
        assert flow_state(clients).state == "stopped"

    record_lineage(dag)
    run = dag.test(run_conf={"dry_run": False}, mark_success_pattern="approve_.*")
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["start"] == "success", states
    # OpenLineage: the reverse flow it started copies the topic on KB back to KA (identity policy: same name)
    assert lineage("mirrorflow_failback__KA-KB.start", run.run_id)[-1] == (
        "COMPLETE", [(f"kafka://{target.bootstrap_servers}", topic)], [(f"kafka://{source.bootstrap_servers}", topic)])
    with FlowClients(cfg, rev) as clients:
        assert flow_state(clients).state == "running"
    produce(target, topic, records(6, 1, seed="onB"))
    assert run_once(cfg, rev, mode="direct").records == 9  # only what B got after the failover
    assert len(consume_all(source, topic)) == 43
