"""The replicate DAG with spark.remote: its copy task runs on a running Spark Connect server; with the
server down the copy task fails naming it, copies nothing and frees the flow's lease."""
from __future__ import annotations

import os
import time

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow_dev.processes import free_port
from mirrorflow.state.lease import current_holder
from tests.connect_support import with_remote
from tests.integration.replicate_helpers import assert_copied, assert_map_exact, mirror_topic
from tests.support import consume_all, produce, write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_replicate.py")
NOW = int(time.time() * 1000) - 60_000


def test_dag_copies_on_the_connect_server(tmp_path, source, target, airflow_db, unique, monkeypatch,
                                           connect_server, caplog, capfd):
    prefix = unique("cdag")
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": f"{prefix}\\..*", "tasks.max": 2, "state.topic.partitions": 2,
                                 "heartbeats.replication.enabled": False, "lease.timeout.seconds": 600}})
    cfg = with_remote(cfg, connect_server.remote)
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    monkeypatch.setenv("MIRRORFLOW_RUN_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)  # not needed with spark.remote
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_replicate__A-B")
    assert dag.get_task("copy").upstream_task_ids == {"plan"}
    assert dag.get_task("copy").task_type != "MirrorflowSparkSubmitOperator"

    topic = f"{prefix}.orders"
    mirror_topic(source, target, topic, 2)
    produce(source, topic, [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                             "timestamp": NOW + i} for i in range(200)])
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"plan": "success", "copy": "success", "report": "success"}, states
    report = [ti for ti in run.get_task_instances() if ti.task_id == "report"][0].xcom_pull(task_ids="report")
    assert report["records"] == 200 and report["lag"] == 0
    assert_copied(source, target, topic)
    assert_map_exact(cfg, cfg.flow("A->B"), source, target, topic, 2)

    produce(source, topic, [{"partition": i % 2, "key": b"n", "value": f"new{i}".encode(), "timestamp": NOW + 500 + i}
                            for i in range(6)])
    run = dag.test()
    report = [ti for ti in run.get_task_instances() if ti.task_id == "report"][0].xcom_pull(task_ids="report")
    assert report["records"] == 6 and report["lag"] == 0
    assert_copied(source, target, topic)

    run = dag.test()  # nothing new: copy is skipped, the report still runs
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"plan": "success", "copy": "skipped", "report": "success"}, states

    # the server is not there (stopped, or never started): the copy task fails naming it, the report
    # does not run, nothing is copied, and the flow's lease is free at once (a 10-minute lease here)
    dead = f"sc://127.0.0.1:{free_port()}"
    with_remote(cfg, dead)  # the tasks read the config file when they run
    produce(source, topic, [{"partition": i % 2, "key": b"d", "value": f"down{i}".encode(), "timestamp": NOW + 900 + i}
                            for i in range(4)])
    capfd.readouterr()
    caplog.clear()
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"plan": "success", "copy": "failed", "report": "upstream_failed"}, states
    captured = capfd.readouterr()
    log = caplog.text + captured.out + captured.err  # dag.test() runs the tasks here
    assert f"cannot reach the Spark Connect server {dead} (spark.remote)" in log, log[-3000:]
    with FlowClients(cfg, cfg.flow("A->B")) as clients:
        assert current_holder(clients) is None
    assert len(consume_all(target, f"A.{topic}")) == 206  # the 4 stay uncopied

    with_remote(cfg, connect_server.remote)  # back: the next run copies exactly the 4
    run = dag.test()
    report = [ti for ti in run.get_task_instances() if ti.task_id == "report"][0].xcom_pull(task_ids="report")
    assert report["records"] == 4 and report["lag"] == 0
    assert_copied(source, target, topic)
