"""Secrets from Airflow connections: a cluster that names only `airflow.conn.id`
takes its bootstrap servers and SASL settings from an Airflow connection of the Kafka provider's
type, in the DAG's tasks and in the Spark executors of its copy, whether the connection is an
`AIRFLOW_CONN_<ID>` variable or a row of Airflow's metadata DB (then the copy task hands it to
spark-submit's environment). The password is in no plan or run file, task log, XCom or rendered
template field.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml

from mirrorflow.replication.plan.run_plan import Plan
from tests.support import consume_all, create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark]

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "mirrorflow_replicate.py"


def test_replicate_dag_with_clusters_from_airflow_connections(
    tmp_path, sasl_cluster, sasl_target, airflow_db, unique, monkeypatch, capfd
):
    """Both kinds of connection in one run (one spark-submit): the source's is an AIRFLOW_CONN_
    variable, the target's a row of the metadata DB; executors read from one and write to the other."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models import Connection
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    source = sasl_cluster
    src_conn, conn_id = (f"kafka_{k}_{unique('c').replace('-', '_')}" for k in ("s", "t"))
    secrets = {source.client_config()["sasl.password"], sasl_target.client_config()["sasl.password"]}
    # librdkafka settings, as the Kafka provider keeps them
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{src_conn.upper()}", json.dumps({"conn_type": "kafka", "extra": source.client_config()})
    )
    with create_session() as session:
        session.add(Connection(conn_id=conn_id, conn_type="kafka", extra=json.dumps(sasl_target.client_config())))
    prefix = unique("conn")
    topic = f"{prefix}.orders"
    create_topic(source, topic, 2)
    create_topic(sasl_target, f"AS.{topic}", 2)
    now = int(time.time() * 1000)
    produce(source, topic, [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                             "timestamp": now - 1000 + i} for i in range(120)])
    cfg = tmp_path / "mf.yaml"
    cfg.write_text(yaml.safe_dump({
        "clusters": {"AS": {"airflow.conn.id": src_conn}, "T": {"airflow.conn.id": conn_id}},
        "flows": {"AS->T": {"topics": f"{prefix}\\..*", "tasks.max": 2, "state.topic.partitions": 1,
                            "heartbeats.replication.enabled": False}},
        "spark": {"master": "local[2]"},
    }))
    assert not [x for x in secrets if x in cfg.read_text()]
    runs = tmp_path / "runs"
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg))
    monkeypatch.setenv("MIRRORFLOW_RUN_DIR", str(runs))
    monkeypatch.setenv("MIRRORFLOW_KEEP_RUNS", "1")  # the plan file stays, to be searched for the secret
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_replicate__AS-T")
    assert sorted(dag.get_task("copy").kafka_conn_ids) == sorted([src_conn, conn_id])

    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"plan": "success", "copy": "success", "report": "success"}, states
    src, dst = consume_all(source, topic), consume_all(sasl_target, f"AS.{topic}")
    assert len(src) == 120
    assert [r.content() for r in dst] == [r.content() for r in src]

    # never written: run files, task logs (console and files), XComs, rendered template fields
    out, err = capfd.readouterr()
    seen = [out, err]
    seen += [f.read_text(errors="replace") for d in (runs, Path(os.environ["AIRFLOW_HOME"]) / "logs")
             if d.exists() for f in d.rglob("*") if f.is_file()]
    assert any(f.name == "plan.json" for f in runs.rglob("*"))
    with create_session() as session:
        xcoms = [json.dumps(x.value, default=str) for x in session.query(XComModel).filter_by(run_id=run.run_id)]
        seen += xcoms
        # the plan travels compressed in XCom: search it decoded too
        plans = [json.dumps(Plan.decode(m).to_dict()) for x in xcoms for m in re.findall(r"mfplan1:[A-Za-z0-9+/=]+", x)]
        assert plans and '"tasks"' in plans[0]
        seen += plans
        seen += [json.dumps(r.rendered_fields, default=str)
                 for r in session.query(RenderedTaskInstanceFields).filter_by(run_id=run.run_id)]
    assert len(seen) > 4
    assert not [s for s in seen for x in secrets if x in s]
    assert f"AIRFLOW_CONN_{conn_id.upper()}" not in os.environ  # the DB's connection: handed to spark-submit only
