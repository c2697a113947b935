"""A flow with `schedule: "@continuous"`: its replicate DAG is Airflow-continuous (one run at a time),
and one dag.test() run copies, through spark-submit, records produced while it runs, then ends at
continuous.run.seconds with its report and the lease released for the next run."""
from __future__ import annotations

import os
import threading
import time

import pytest

from tests.integration.test_continuous import assert_exact, assert_no_open_transaction, records, wait_for
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_replicate.py")


@pytest.fixture
def dagbag(tmp_path, source, target, airflow_db, unique, monkeypatch):
    prefix = unique("cdag")
    cfg = write_config(tmp_path / "mf.yaml", {"G": source, "B": target},
                       {"G->B": {"topics": f"{prefix}\\..*", "schedule": "@continuous", "tasks.max": 2,
                                 "state.topic.partitions": 2, "heartbeats.replication.enabled": False,
                                 "continuous.run.seconds": 45, "continuous.poll.ms": 100,
                                 "continuous.state.check.seconds": 1}})
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    monkeypatch.setenv("MIRRORFLOW_RUN_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    return cfg, prefix, bag


def test_continuous_dag_run_copies_records_produced_while_it_runs(dagbag, source, target):
    cfg, prefix, bag = dagbag
    dag = bag.get_dag("mirrorflow_replicate__G-B")
    assert type(dag.timetable).__name__ == "ContinuousTimetable" and dag.max_active_runs == 1
    topic, remote = f"{prefix}.orders", f"G.{prefix}.orders"
    create_topic(source, topic, 2)
    create_topic(target, remote, 2)
    produce(source, topic, records(50, 2))

    def while_it_runs() -> None:  # once the job copies, produce more: the same run must copy them
        wait_for(target, remote, 50, timeout=120)
        produce(source, topic, records(70, 2, start=50))

    producer = threading.Thread(target=while_it_runs, daemon=True)
    producer.start()
    started = time.time()
    run = dag.test()
    producer.join(5)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"plan": "success", "copy": "success", "report": "success"}, states
    report = [ti for ti in run.get_task_instances() if ti.task_id == "report"][0].xcom_pull(task_ids="report")
    assert report["records"] == 120 and report["lag"] == 0, report
    flow = cfg.flow("G->B")
    assert assert_exact(cfg, flow, source, target, topic, remote, 2) == 120
    assert_no_open_transaction(target, flow, remote, 2)
    assert time.time() - started >= 45  # it copied until its deadline, not only what was there at the start

    # the lease was released: the next run (Airflow starts it at once) takes over
    from mirrorflow.clients import FlowClients
    from mirrorflow.state.lease import current_holder

    with FlowClients(cfg, flow) as clients:
        assert current_holder(clients) is None


def test_continuous_dag_honours_the_dry_run_param_and_refuses_a_cap(dagbag, source, target):
    cfg, prefix, bag = dagbag
    dag = bag.get_dag("mirrorflow_replicate__G-B")
    topic, remote = f"{prefix}.dry", f"G.{prefix}.dry"
    create_topic(source, topic, 2)
    create_topic(target, remote, 2)
    produce(source, topic, records(40, 2))

    # a dry run plans and ends: the copy is skipped (not after continuous.run.seconds), nothing is copied
    run = dag.test(run_conf={"dry_run": True})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"plan": "success", "copy": "skipped", "report": "success"}, states
    plan = [ti for ti in run.get_task_instances() if ti.task_id == "plan"][0].xcom_pull(task_ids="plan")
    assert (plan["units"], plan["would_copy"]) == (0, 40), plan
    assert [ti for ti in run.get_task_instances() if ti.task_id == "report"][0].xcom_pull(
        task_ids="report")["records"] == 0
    assert consume_all(target, remote) == []

    # a per-partition cap cannot apply to a followed partition: the run fails before it takes the lease
    run = dag.test(run_conf={"max_records_per_partition": 5})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["plan"] == "failed" and run.state == "failed", states
    assert consume_all(target, remote) == []
    from mirrorflow.clients import FlowClients
    from mirrorflow.state.lease import current_holder

    with FlowClients(cfg, cfg.flow("G->B")) as clients:
        assert current_holder(clients) is None
