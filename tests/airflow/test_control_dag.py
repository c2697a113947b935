"""The control DAG: pause, resume or stop a flow from a Params form, recorded on the target with the
Airflow user who triggered the run (dag.test() triggers as `dag_test`)."""
from __future__ import annotations

import os

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.history import read_history
from tests.support import write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_control.py")


def test_control_dag_stops_and_resumes_with_the_triggering_user(tmp_path, source, target, airflow_db,
                                                                       unique, monkeypatch):
    src, tgt = unique("CA"), unique("CB")  # a flow of its own: its history holds only this test's lines
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"topics": unique("ctl"), "heartbeats.replication.enabled": False,
                                          "state.topic.partitions": 1}})
    flow = cfg.flow(f"{src}->{tgt}")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.exceptions import ParamValidationError

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag(f"mirrorflow_control__{flow.id}")
    assert type(dag.timetable).__name__ == "NullTimetable"  # manual trigger only
    assert set(dag.params.keys()) == {"action", "reason"}
    assert (dag.params["action"], dag.params["reason"]) == ("pause", None)  # the form submits with its defaults
    assert dag.params.get_param("action").schema["enum"] == ["pause", "resume", "stop"]
    with pytest.raises(ParamValidationError, match="param action"):
        dag.test(run_conf={"action": "delete", "reason": None})

    # every run_conf names every Param: dag.test() keeps the previous run's values in dag.params
    run = dag.test(run_conf={"action": "stop", "reason": "maintenance of B"})
    ti = run.get_task_instances()[0]
    assert ti.state == "success"
    assert ti.xcom_pull(task_ids="control")["state"] == "stopped"
    with FlowClients(cfg, flow) as clients:
        st = flow_state(clients)
        assert (st.state, st.reason, st.by) == ("stopped", "maintenance of B", "dag_test")
    assert dag.test(run_conf={"action": "resume", "reason": "done"}).get_task_instances()[0].state == "success"

    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "running"
        ops = read_history(clients)
    assert [(o.flow, o.kind, o.by, o.via, o.reason) for o in ops] == [
        (flow.name, "stop", "dag_test", "airflow", "maintenance of B"),
        (flow.name, "resume", "dag_test", "airflow", "done"),
    ]
