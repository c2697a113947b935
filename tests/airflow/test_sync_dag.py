"""The generated sync DAGs: they import cleanly, look as specified, and a dag.test() run syncs for real."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.airflow.lineage_support import lineage, record_lineage
from tests.support import create_topic, write_config

pytestmark = pytest.mark.airflow
DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "mirrorflow_sync.py"


def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAG_FILE))


def test_one_dag_per_enabled_flow_with_schedule_tags_retries_and_tasks(airflow_db, tmp_path, monkeypatch):
    cfg = tmp_path / "mf.yaml"
    cfg.write_text("clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
                   "  C: {bootstrap.servers: '127.0.0.1:3'}\n"
                   "flows:\n  A->B: {refresh.topics.interval.seconds: 120}\n  B->C: {enabled: false}\n"
                   "  A->C: {refresh.topics.enabled: false}\n")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg))
    bag = dagbag()
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == ["mirrorflow_sync__A-B", "mirrorflow_sync__A-C"]
    dag = bag.get_dag("mirrorflow_sync__A-B")
    assert type(dag.timetable).__name__ == "DeltaTriggerTimetable" and dag.timetable.delta == timedelta(seconds=120)
    assert dag.max_active_runs == 1
    assert set(dag.tags) == {"mirrorflow", "sync", "A->B"}
    assert set(dag.task_ids) == {"topics_and_partitions", "configs", "acls"}
    # topics first; configs and ACLs side by side after it (two task starts in a row, not three)
    assert dag.get_task("configs").upstream_task_ids == dag.get_task("acls").upstream_task_ids == {
        "topics_and_partitions"}
    assert all(t.retries == 2 for t in dag.tasks)
    assert dag.get_task("acls").trigger_rule == dag.get_task("configs").trigger_rule == "none_failed"
    # refresh.topics.enabled: false: configs and ACLs still sync on their 600 s timers
    assert bag.get_dag("mirrorflow_sync__A-C").timetable.delta == timedelta(seconds=600)


def test_a_bad_config_is_an_import_error_naming_file_and_key(airflow_db, tmp_path, monkeypatch):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("clusters:\n  A: {bootstrap.servers: 'x:1'}\n  B: {bootstrap.servers: 'y:1'}\n"
                   "flows:\n  A->B: {topics: '[unclosed'}\n")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg))
    bag = dagbag()
    assert bag.dag_ids == []
    [(path, error)] = bag.import_errors.items()
    assert path.endswith("mirrorflow_sync.py")
    assert f"{cfg}: flows.A->B.topics: invalid regex '[unclosed'" in error
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(tmp_path / "missing.yaml"))
    [(path, error)] = dagbag().import_errors.items()
    assert f"{tmp_path / 'missing.yaml'}: cannot read config file: No such file or directory" in error


@pytest.mark.integration
def test_dag_test_run_creates_the_remote_topics(airflow_db, tmp_path, monkeypatch, source, target, topic_name):
    from airflow.sdk import DagRunState  # noqa: F401 - the sdk must be importable here

    create_topic(source, topic_name, partitions=2, config={"retention.ms": "3600000"})
    cfg_path = tmp_path / "mf.yaml"
    write_config(cfg_path, {"A": source, "B": target}, {"A->B": {"topics": topic_name}})
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg_path))
    dag = dagbag().get_dag("mirrorflow_sync__A-B")
    from tests.support import admin
    record_lineage(dag)
    dry = dag.test(run_conf={"dry_run": True})
    assert dry.state == "success"
    assert f"A.{topic_name}" not in admin(target).list_topics(timeout=10).topics  # the dry run changed nothing
    record_lineage(dag)
    run = dag.test(run_conf={"dry_run": False})  # explicit: a second dag.test() here reused the first run's conf
    assert run.state == "success"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    # A is not SASL: the ACL concern has nothing to sync and is skipped with its reason
    assert states == {"topics_and_partitions": "success", "configs": "success", "acls": "skipped"}
    a = admin(target)
    md = a.list_topics(f"A.{topic_name}", timeout=10).topics[f"A.{topic_name}"]
    assert md.error is None and len(md.partitions) == 2
    from mirrorflow import config as config_mod
    from mirrorflow.metadata.sync import sync_flow
    assert sync_flow(config_mod.load(cfg_path), "A->B", "topics,configs").changed_nothing
    # OpenLineage: the topics task of the flow's DAG read the source topic and wrote its remote topic
    events = lineage("mirrorflow_sync__A-B.topics_and_partitions", run.run_id)
    assert [e[0] for e in events] == ["START", "COMPLETE"], events
    _, inputs, outputs = events[1]
    assert (f"kafka://{source.bootstrap_servers}", topic_name) in inputs, events
    # every source topic the flow selects (also `heartbeats`, when another test made one on A) -> its remote topic
    assert outputs == [(f"kafka://{target.bootstrap_servers}", f"A.{name}") for ns, name in inputs], events
    assert {ns for ns, _ in inputs} == {f"kafka://{source.bootstrap_servers}"}
    # a dry run moved nothing
    assert lineage("mirrorflow_sync__A-B.topics_and_partitions", dry.run_id)[-1][1:] == ([], [])
