"""The drill DAG: the failover rehearsed from a Params form (defaults submit as they are), recorded
with the Airflow user who triggered it (dag.test() triggers as `dag_test`); nothing moved."""
from __future__ import annotations

import os

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.state.flow_state import flow_state, read_control
from mirrorflow.state.history import read_history
from tests.integration.test_drill import drilled_flow
from tests.integration.test_failover import committed_offsets

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_drill.py")


def test_drill_dag_rehearses_with_the_triggering_user(tmp_path, source, target, airflow_db, unique, monkeypatch):
    cfg, flow, _topic, remote, group = drilled_flow(tmp_path, source, target, unique)
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.exceptions import ParamValidationError

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag(f"mirrorflow_drill__{flow.id}")
    assert type(dag.timetable).__name__ == "NullTimetable"  # manual trigger only
    # every field optional: the form submits with its defaults
    assert {k: dag.params[k] for k in dag.params.keys()} == {"groups": None, "verify_from": None,
                                                             "shadow_suffix": None}
    with pytest.raises(ParamValidationError, match="param groups"):
        dag.test(run_conf={"groups": "(", "verify_from": None, "shadow_suffix": None})

    run = dag.test(run_conf={"groups": None, "verify_from": "offset:25", "shadow_suffix": ".dagdrill"})
    ti = run.get_task_instances()[0]
    assert ti.state == "success"
    out = ti.xcom_pull(task_ids="drill")
    resumes = out["resumes"][group]
    assert set(resumes) == {f"{remote}:0", f"{remote}:1"}
    assert (out["not_replicated"], out["verify"], out["verify_report"]["records"]) == (20, "ok", 10)
    assert committed_offsets(target, f"{group}.dagdrill", remote, 2) == {p: resumes[f"{remote}:{p}"] for p in (0, 1)}
    assert committed_offsets(target, group, remote, 2) == {0: 3, 1: 4}  # the real group: untouched
    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "running"
        record = read_control(clients, "drill")
        last = read_history(clients)[-1]
    assert (record["by"], record["plan"], record["shadow_groups"]) == ("dag_test", out["plan"], [f"{group}.dagdrill"])
    assert (last.kind, last.by, last.via) == ("drill", "dag_test", "airflow")
