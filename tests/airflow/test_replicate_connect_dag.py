"""The replicate DAG with spark.remote: one task runs the whole run (plan, the copy on a running Spark
Connect server, report), emits an Asset event per remote topic it wrote to and the copy's lineage;
with the server down the task fails naming it, copies nothing and frees the flow's lease."""
from __future__ import annotations

import os
import time

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow_dev.processes import free_port
from mirrorflow.state.lease import current_holder
from tests.airflow.lineage_support import lineage, record_lineage
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
    assert dag.task_ids == ["replicate"]  # the copy runs on the server: no task start of its own
    assert dag.get_task("replicate").task_type == "DeferrableTask"

    topic = f"{prefix}.orders"
    mirror_topic(source, target, topic, 2)
    produce(source, topic, [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                             "timestamp": NOW + i} for i in range(200)])
    record_lineage(dag)
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"replicate": "success"}, states
    report = run.get_task_instances()[0].xcom_pull(task_ids="replicate")
    assert report["records"] == 200 and report["lag"] == 0 and report["units"] == 2
    assert_copied(source, target, topic)
    assert_map_exact(cfg, cfg.flow("A->B"), source, target, topic, 2)
    # an Asset event for the remote topic, with what was copied; the copy's OpenLineage
    [extra] = events(target, f"A.{topic}")
    assert (extra["kind"], extra["run"], extra["records"]) == ("replicate", report["run"], 200), extra
    assert [(p["partition"], p["source_offsets"], p["records"]) for p in extra["partitions"]] == [
        (0, [0, 100], 100), (1, [0, 100], 100)]
    assert lineage("mirrorflow_replicate__A-B.replicate", run.run_id)[-1] == (
        "COMPLETE", [(f"kafka://{source.bootstrap_servers}", topic)],
        [(f"kafka://{target.bootstrap_servers}", f"A.{topic}")])

    produce(source, topic, [{"partition": i % 2, "key": b"n", "value": f"new{i}".encode(), "timestamp": NOW + 500 + i}
                            for i in range(6)])
    run = dag.test()
    report = run.get_task_instances()[0].xcom_pull(task_ids="replicate")
    assert report["records"] == 6 and report["lag"] == 0
    assert_copied(source, target, topic)

    run = dag.test()  # nothing new: nothing copied, the report still made, no Asset event
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"replicate": "success"}, states
    report = run.get_task_instances()[0].xcom_pull(task_ids="replicate")
    assert (report["units"], report["records"], report["lag"]) == (0, 0, 0)
    assert len(events(target, f"A.{topic}")) == 2

    # the server is not there (stopped, or never started): the run fails naming it, nothing is
    # copied, and the flow's lease is free at once (a 10-minute lease here)
    dead = f"sc://127.0.0.1:{free_port()}"
    with_remote(cfg, dead)  # the tasks read the config file when they run
    produce(source, topic, [{"partition": i % 2, "key": b"d", "value": f"down{i}".encode(), "timestamp": NOW + 900 + i}
                            for i in range(4)])
    capfd.readouterr()
    caplog.clear()
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"replicate": "failed"}, states
    captured = capfd.readouterr()
    log = caplog.text + captured.out + captured.err  # dag.test() runs the tasks here
    assert f"cannot reach the Spark Connect server {dead} (spark.remote)" in log, log[-3000:]
    with FlowClients(cfg, cfg.flow("A->B")) as clients:
        assert current_holder(clients) is None
    assert len(consume_all(target, f"A.{topic}")) == 206  # the 4 stay uncopied

    with_remote(cfg, connect_server.remote)  # back: the next run copies exactly the 4
    run = dag.test()
    report = run.get_task_instances()[0].xcom_pull(task_ids="replicate")
    assert report["records"] == 4 and report["lag"] == 0
    assert_copied(source, target, topic)


def events(target, remote: str) -> list[dict]:
    """The extras of the Asset events of the remote topic's Asset (the Kafka provider's URI form)."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    uri = f"kafka://{target.bootstrap_servers.split(',')[0]}/{remote}"
    with create_session() as s:
        return [e for (e,) in s.query(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                .filter(AssetModel.uri == uri).order_by(AssetEvent.id).all()]
