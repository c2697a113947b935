"""The re-seed DAG: a Params form (topic, dry run) over the core re-seed, run with dag.test()."""

from __future__ import annotations

import os

import pytest

from mirrorflow.replication.run.runner import run_once
from tests.integration.replicate_helpers import make_flow, mirror_topic
from tests.integration.test_replicate import records
from tests.integration.test_topic_identity import recreate_topic
from tests.support import consume_all, produce, read_progress

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_reseed.py")


def test_reseed_dag_restarts_a_recreated_topic(tmp_path, source, target, airflow_db, unique, monkeypatch):
    pfx = unique("rsdag")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 1)
    produce(source, t, records(40, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 40
    recreate_topic(source, t)
    produce(source, t, records(7, 1, seed="new"))
    assert run_once(cfg, flow, mode="direct").stopped_partitions == 1

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_reseed__A-B")
    assert type(dag.timetable).__name__ == "NullTimetable"  # manual trigger only
    assert set(dag.params.keys()) == {"topic", "dry_run", "force"} and dag.params["dry_run"] is True
    assert dag.params["force"] is False  # a topic no run stopped is refused unless forced
    before = read_progress(cfg, flow, [(t, 0)])[(t, 0)]
    # the default is a dry run: nothing written
    run = dag.test(run_conf={"topic": t})
    ti = run.get_task_instances()[0]
    assert ti.state == "success"
    out = ti.xcom_pull(task_ids="reseed")
    assert out["dry_run"] is True and out["partitions"][0]["end"] == 7
    assert read_progress(cfg, flow, [(t, 0)])[(t, 0)] == before
    run = dag.test(run_conf={"topic": t, "dry_run": False})
    assert run.get_task_instances()[0].state == "success"
    assert read_progress(cfg, flow, [(t, 0)])[(t, 0)].epoch == 1
    from mirrorflow.clients import FlowClients
    from mirrorflow.state.history import read_history

    with FlowClients(cfg, flow) as clients:
        last = read_history(clients)[-1]
    # the history names the Airflow user who triggered it and the door (it named the worker's OS user)
    assert (last.kind, last.by, last.via, last.summary) == ("reseed", "dag_test", "airflow", f"re-seeded {t}")
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 7, rep.render()
    assert [r.value for r in consume_all(target, remote)[40:]] == [r.value for r in consume_all(source, t)]
