"""The schemas DAG (a Params form over the core schema pass, dag.test() on real registries and brokers) and the
sync DAG's `schemas` task, generated only for flows whose clusters both name a schema registry."""
from __future__ import annotations

import os

import pytest

from tests.integration.test_schemas import avro, schema_config
from tests.registry_support import call, register

pytestmark = pytest.mark.airflow
DAGS = os.path.join(os.path.dirname(__file__), "..", "..", "dags")


def bag_of(name: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.path.join(DAGS, name))
    assert bag.import_errors == {}
    return bag


def test_dags_only_for_flows_with_registries(airflow_db, tmp_path, monkeypatch):
    cfg = tmp_path / "mf.yaml"
    cfg.write_text("clusters:\n"
                   "  A: {bootstrap.servers: '127.0.0.1:1', schema.registry.url: 'http://127.0.0.1:9/apis/ccompat/v7'}\n"
                   "  B: {bootstrap.servers: '127.0.0.1:2', schema.registry.url: 'http://127.0.0.1:8/apis/ccompat/v7'}\n"
                   "  C: {bootstrap.servers: '127.0.0.1:3'}\n"
                   "flows:\n  A->B: {}\n  A->C: {}\n")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg))
    assert bag_of("mirrorflow_schemas.py").dag_ids == ["mirrorflow_schemas__A-B"]
    sync = bag_of("mirrorflow_sync.py")
    assert "schemas" in sync.get_dag("mirrorflow_sync__A-B").task_ids
    assert "schemas" not in sync.get_dag("mirrorflow_sync__A-C").task_ids


def test_schemas_dag_dry_run_then_copy(airflow_db, tmp_path, source, target, registries, unique, monkeypatch):
    p = unique("dag")
    i = register(registries["A"].confluent_url, f"{p}.orders-value", avro("O", ("o", "long")))
    cfg = schema_config(tmp_path, source, target, registries, p)
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    dag = bag_of("mirrorflow_schemas.py").get_dag("mirrorflow_schemas__A-B")
    assert type(dag.timetable).__name__ == "NullTimetable" and dag.params["dry_run"] is True
    run = dag.test()  # the default: a dry run
    ti = run.get_task_instances()[0]
    assert ti.state == "success"
    assert ti.xcom_pull(task_ids="schemas")["missing"] >= 1
    assert f"A.{p}.orders-value" not in call(registries["B"].confluent_url, "GET", "/subjects")
    run = dag.test(run_conf={"dry_run": False})
    assert run.get_task_instances()[0].state == "success"
    assert call(registries["B"].confluent_url, "GET", f"/subjects/A.{p}.orders-value/versions/1")["id"] == i


def test_the_sync_dags_schemas_task_copies_unless_the_form_leaves_it_out(airflow_db, tmp_path, source, target,
                                                                         registries, unique, monkeypatch):
    """The sync DAG's `schemas` task runs with the form's defaults (what a scheduled run gets) and copies the
    flow's schemas with their ids; a manual run whose `only` leaves `schemas` out skips it."""
    p = unique("sdag")
    i = register(registries["A"].confluent_url, f"{p}.orders-value", avro("O", ("o", "long")))
    cfg = schema_config(tmp_path, source, target, registries, p)
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    dag = bag_of("mirrorflow_sync.py").get_dag("mirrorflow_sync__A-B")
    assert dag.params["only"] == ["topics", "configs", "acls", "schemas"]
    run = dag.test()  # the form's defaults
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["schemas"] == "success", states
    assert call(registries["B"].confluent_url, "GET", f"/subjects/A.{p}.orders-value/versions/1")["id"] == i
    register(registries["A"].confluent_url, f"{p}.users-value", avro("U", ("u", "long")))
    run = dag.test(run_conf={"only": ["topics"]})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["schemas"] == "skipped" and states["topics_and_partitions"] == "success", states
    assert f"A.{p}.users-value" not in call(registries["B"].confluent_url, "GET", "/subjects")
