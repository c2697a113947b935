"""The control DAG: pause, resume or stop a flow from a Params form, recorded on the target with the
Airflow user who triggered the run (dag.test() triggers as `dag_test`)."""
from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.history import read_history
from tests.support import write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_control.py")


def note_of(run) -> str | None:
    """The run's note as Airflow's database holds it (what the run's page shows)."""
    from airflow.models import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(DagRun).filter(DagRun.dag_id == run.dag_id, DagRun.run_id == run.run_id).one().note


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


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
    assert set(dag.params.keys()) == {"action", "reason", "force"}
    # the form submits with its defaults
    assert (dag.params["action"], dag.params["reason"], dag.params["force"]) == ("pause", None, False)
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
    # a run of the stopped flow's replicate DAG: every task skipped ("success" in Airflow), and the run's
    # note (written by mirrorflow_airflow/plugins/notes.py's listener when the run ends) says why and what next
    replicate = DagBag(dag_folder=DAG_FILE.replace("control", "replicate")).get_dag(f"mirrorflow_replicate__{flow.id}")
    run = replicate.test(run_conf={"topics": None, "max_records_per_partition": None, "dry_run": False})
    assert run.state == "success" and {ti.state for ti in run.get_task_instances()} == {"skipped"}
    assert note_of(run) == (
        f"flow {flow.name} is stopped by dag_test since {iso(st.at)} (on the target): maintenance of B: no copying. "
        f"Next step: resume it when ready: `mirrorflow flow resume --flow {flow.name}`, the DAG "
        f"mirrorflow_control__{flow.id} (action resume) or the Resume button on the status page")
    assert dag.test(run_conf={"action": "resume", "reason": "done"}).get_task_instances()[0].state == "success"

    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "running"
        ops = read_history(clients)
    assert [(o.flow, o.kind, o.by, o.via, o.reason) for o in ops] == [
        (flow.name, "stop", "dag_test", "airflow", "maintenance of B"),
        (flow.name, "resume", "dag_test", "airflow", "done"),
    ]


def test_control_dag_refuses_to_pause_or_stop_a_failed_over_flow(tmp_path, source, target, airflow_db, unique,
                                                                  monkeypatch, capfd):
    from mirrorflow.metadata.sync import sync_flow
    from mirrorflow.ops.dr.failover import failover
    from mirrorflow.replication.run.runner import run_once
    from tests.integration.test_replicate import records
    from tests.support import create_topic, produce

    src, tgt = unique("DA"), unique("DB")  # a flow of its own: its failover touches no other test's flow
    topic = unique("ctlfo")
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"topics": topic, "heartbeats.replication.enabled": False,
                                          "state.topic.partitions": 1}})
    flow = cfg.flow(f"{src}->{tgt}")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(3, 1))
    assert run_once(cfg, flow, mode="direct").records == 3
    assert failover(cfg, flow).done
    with FlowClients(cfg, flow) as clients:
        before = flow_state(clients), read_history(clients)
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=DAG_FILE).get_dag(f"mirrorflow_control__{flow.id}")
    for action in ("pause", "stop"):
        capfd.readouterr()
        run = dag.test(run_conf={"action": action, "reason": "maintenance", "force": False})
        assert run.get_task_instances()[0].state == "failed"
        out = "".join(capfd.readouterr())
        assert f"cannot {action} flow {flow.name}: it is stopped by " in out and (
            f"Next step: fail back once {src} is back") in out, out[-3000:]
    with FlowClients(cfg, flow) as clients:
        assert (flow_state(clients), read_history(clients)) == before  # nothing written
