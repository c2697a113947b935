"""Secrets from Airflow connections (issue 12.3): a cluster that names only `airflow.conn.id`
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

from mirrorflow.replication.handoff import decode_plan
from tests.support import consume_all, create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark]

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "mirrorflow_replicate.py"


@pytest.mark.parametrize("where", ["env", "metadata-db"])
def test_replicate_dag_with_a_cluster_from_an_airflow_connection(
    tmp_path, source, sasl_target, airflow_db, unique, monkeypatch, capfd, where
):
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models import Connection
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    conn_id = f"kafka_t_{unique('c').replace('-', '_')}"
    secret = sasl_target.client_config()["sasl.password"]
    extra = sasl_target.client_config()  # librdkafka settings, as the Kafka provider keeps them
    if where == "env":
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka", "extra": extra}))
    else:
        with create_session() as session:
            session.add(Connection(conn_id=conn_id, conn_type="kafka", extra=json.dumps(extra)))
    prefix = unique("conn")
    topic = f"{prefix}.orders"
    create_topic(source, topic, 2)
    create_topic(sasl_target, f"AS.{topic}", 2)
    now = int(time.time() * 1000)
    produce(source, topic, [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                             "timestamp": now - 1000 + i} for i in range(120)])
    cfg = tmp_path / "mf.yaml"
    cfg.write_text(yaml.safe_dump({
        "clusters": {"AS": source.client_config(), "T": {"airflow.conn.id": conn_id}},
        "flows": {"AS->T": {"topics": f"{prefix}\\..*", "tasks.max": 2, "state.topic.partitions": 1,
                            "heartbeats.replication.enabled": False}},
        "spark": {"master": "local[2]"},
    }))
    assert secret not in cfg.read_text()
    runs = tmp_path / "runs"
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg))
    monkeypatch.setenv("MIRRORFLOW_RUN_DIR", str(runs))
    monkeypatch.setenv("MIRRORFLOW_KEEP_RUNS", "1")  # the plan file stays, to be searched for the secret
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_replicate__AS-T")
    assert dag.get_task("copy").kafka_conn_ids == [conn_id]

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
        plans = [json.dumps(decode_plan(m)) for x in xcoms for m in re.findall(r"mfplan1:[A-Za-z0-9+/=]+", x)]
        assert plans and '"tasks"' in plans[0]
        seen += plans
        seen += [json.dumps(r.rendered_fields, default=str)
                 for r in session.query(RenderedTaskInstanceFields).filter_by(run_id=run.run_id)]
    assert len(seen) > 4
    assert not [s for s in seen if secret in s]
    if where == "metadata-db":
        assert f"AIRFLOW_CONN_{conn_id.upper()}" not in os.environ  # handed to spark-submit only
