"""The replicate DAG per flow: shape, a clear failure without the Spark connection, and a dag.test()
run that copies through spark-submit and emits an Asset event per target topic (with the copied
offsets in its extra; none from a run that copied nothing)."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.airflow.lineage_support import lineage, record_lineage
from tests.integration.replicate_helpers import assert_copied, assert_map_exact, mirror_topic
from tests.support import consume_all, produce, write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_replicate.py")
NOW = int(time.time() * 1000) - 60_000


@pytest.fixture
def dagbag(tmp_path, source, target, airflow_db, unique, monkeypatch):
    prefix = unique("rdag")
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": f"{prefix}\\..*", "schedule": "*/10 * * * *", "tasks.max": 2,
                                 "state.topic.partitions": 2, "transaction.max.records": 100,
                                 # other tests leave a `heartbeats` topic on A; this test mirrors only its own
                                 "heartbeats.replication.enabled": False}})
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    monkeypatch.setenv("MIRRORFLOW_RUN_DIR", str(tmp_path / "runs"))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    return cfg, prefix, bag


def test_one_replicate_dag_per_flow(dagbag):
    cfg, _, bag = dagbag
    dag = bag.get_dag("mirrorflow_replicate__A-B")
    assert dag.max_active_runs == 1 and dag.catchup is False
    assert type(dag.timetable).__name__ == "CronTriggerTimetable" and "*/10 * * * *" in repr(dag.timetable)
    assert set(dag.task_ids) == {"plan", "copy", "report"}
    assert dag.get_task("copy").upstream_task_ids == {"plan"}
    assert dag.get_task("report").upstream_task_ids == {"plan", "copy"}
    assert dag.get_task("copy").task_type == "MirrorflowSparkSubmitOperator"
    # the application it submits is the repository's spark_jobs/ file (a checkout, the Docker image)
    app = Path(dag.get_task("copy").application)
    assert app == Path(__file__).resolve().parents[2] / "spark_jobs" / "mirrorflow_copy.py" and app.is_file()


def on_its_own_machine(dag, base: Path) -> list[tuple[str, list[str]]]:
    """Run each task of `dag` as if on a machine of its own (Celery, Kubernetes executors): its own
    MIRRORFLOW_RUN_DIR, and every directory an earlier task had is gone. Returns, per task run, its
    task id and the files the earlier tasks' directories held before they were removed."""
    seen: list[tuple[str, list[str]]] = []

    def fresh_machine(context) -> None:
        task_id = context["ti"].task_id
        left = sorted(str(f.relative_to(base)) for f in base.rglob("*") if f.is_file())
        shutil.rmtree(base, ignore_errors=True)
        (base / task_id).mkdir(parents=True)
        os.environ["MIRRORFLOW_RUN_DIR"] = str(base / task_id)
        seen.append((task_id, left))

    for t in dag.tasks:
        t._pre_execute_hook = fresh_machine
    return seen


def test_dag_run_copies_through_spark_submit(dagbag, source, target, monkeypatch, tmp_path):
    cfg, prefix, bag = dagbag
    topic = f"{prefix}.orders"
    mirror_topic(source, target, topic, 2)
    produce(source, topic, [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                             "headers": [("h", b"1")], "timestamp": NOW + i} for i in range(300)])
    dag = bag.get_dag("mirrorflow_replicate__A-B")
    # no shared disk: plan, copy and report each get a run directory of their own, and the earlier
    # tasks' directories are removed before a task starts; the plan reaches copy through XCom and
    # the spark-submit driver as a file it ships (--files), the results reach report via the target
    monkeypatch.setenv("MIRRORFLOW_RUN_DIR", str(tmp_path / "unused"))
    machines = on_its_own_machine(dag, tmp_path / "machines")
    # without the connection the copy fails clearly (never a silent yarn submit)
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["copy"] == "failed" and run.state == "failed"

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    from airflow.sdk.observability import stats

    sent: list[tuple] = []
    for kind in ("incr", "gauge", "timing"):
        monkeypatch.setattr(stats, kind, lambda name, value=None, *a, _k=kind, **kw: sent.append((_k, name, value)))
    machines.clear()
    record_lineage(dag)
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"plan": "success", "copy": "success", "report": "success"}, states
    assert [task for task, _ in machines] == ["plan", "copy", "report"]
    assert machines[1][1] == [] and machines[2][1] == [], machines  # the plan task left no file to read
    assert not (tmp_path / "unused").exists()
    assert_copied(source, target, topic)
    flow = cfg.flow("A->B")
    assert_map_exact(cfg, flow, source, target, topic, 2)
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    report = tis["report"].xcom_pull(task_ids="report")
    assert report["records"] == 300 and report["lag"] == 0
    # the results the report read: the driver's, on the target under the run's id, one per unit
    from mirrorflow.clients import FlowClients
    from mirrorflow.replication.plan.run_plan import Plan
    from mirrorflow.state.run_results import read

    planned = tis["plan"].xcom_pull(task_ids="plan")
    plan = Plan.decode(planned["plan"])
    with FlowClients(cfg, flow) as clients:
        written = read(clients, planned["run"])
    assert written["run"] == plan.run == planned["run"] and "job_finished" in written
    assert len(written["results"]) == planned["units"]
    per_partition = {p: sum(r["records"] for r in written["results"] if r["partition"] == p) for p in (0, 1)}
    assert per_partition == {0: 150, 1: 150}
    assert report["topics"] == [f"A.{topic}"]
    assert ("incr", "mirrorflow.replicate.records", 300) in sent, sent
    assert ("gauge", "mirrorflow.replicate.lag", 0) in sent
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    uri = f"kafka://{target.bootstrap_servers.split(',')[0]}/A.{topic}"  # the Kafka provider's form

    def events() -> list[dict]:
        with create_session() as s:
            return [e for (e,) in s.query(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                    .filter(AssetModel.uri == uri).all()]

    [extra] = events()
    # per partition: the source range copied, the target range holding exactly those records, the count
    on_target = consume_all(target, f"A.{topic}")
    ranges = [{"partition": p, "source_offsets": [0, 150],
               "target_offsets": [min(r.offset for r in on_target if r.partition == p),
                                  max(r.offset for r in on_target if r.partition == p) + 1],
               "records": 150} for p in (0, 1)]
    assert extra == {"flow": "A->B", "source_cluster": "A", "target_cluster": "B", "kind": "replicate",
                     "run": planned["run"], "source_topic": topic, "target_topic": f"A.{topic}", "records": 300,
                     "partitions": ranges}, extra
    # OpenLineage: the copy task of the flow's DAG read the source topic and wrote the remote topic
    assert lineage("mirrorflow_replicate__A-B.copy", run.run_id)[-1] == (
        "COMPLETE", [(f"kafka://{source.bootstrap_servers}", topic)],
        [(f"kafka://{target.bootstrap_servers}", f"A.{topic}")])
    # nothing new: copy is skipped, the report still runs, and emits no event
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"plan": "success", "copy": "skipped", "report": "success"}, states
    assert len(events()) == 1


def test_dag_run_is_skipped_while_the_flow_is_paused_or_another_run_holds_it(dagbag, source, target, monkeypatch):
    """Both end the run skipped with nothing copied; once resumed and released, one run copies all
    (one spark-submit run for both cases: the suite's time is mostly Spark start-ups)."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.replication.run.runner import take_lease
    from mirrorflow.state.flow_state import set_flow_state
    from mirrorflow.state.lease import current_holder
    from tests.support import consume_all

    cfg, prefix, bag = dagbag
    topic = f"{prefix}.orders"
    mirror_topic(source, target, topic, 1)
    produce(source, topic, [{"value": f"v{i}".encode(), "timestamp": NOW + i} for i in range(10)])
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[1]"}')
    dag = bag.get_dag("mirrorflow_replicate__A-B")
    skipped = {"plan": "skipped", "copy": "skipped", "report": "skipped"}
    with FlowClients(cfg, cfg.flow("A->B")) as clients:
        set_flow_state(clients, "paused", "a test")
        try:
            run = dag.test()
            assert {ti.task_id: ti.state for ti in run.get_task_instances()} == skipped
            assert run.state == "success"
            assert consume_all(target, f"A.{topic}") == []
        finally:  # flow A->B is shared by the other tests: never leave it paused
            set_flow_state(clients, "running")

        held = take_lease(clients, "cli-run", "a CLI run of the test")
        try:
            run = dag.test()
            assert {ti.task_id: ti.state for ti in run.get_task_instances()} == skipped
            assert run.state == "success"
            assert consume_all(target, f"A.{topic}") == []
        finally:
            held.release()
        run = dag.test()
        assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
            "plan": "success", "copy": "success", "report": "success"}
        assert current_holder(clients) is None  # the report task released the DAG run's lease
    assert_copied(source, target, topic)


def test_report_fails_naming_the_units_whose_results_never_came(dagbag, source, target):
    """A copy that handed back nothing (a driver that died after exit 0, results expired) is a
    failed report naming the units, never "ok, 0 copied"; the lease is released all the same."""
    from airflow.sdk.exceptions import AirflowFailException

    from mirrorflow.clients import FlowClients
    from mirrorflow.state.lease import current_holder
    from mirrorflow_airflow.dag_builders.replicate import plan_task, report_task

    cfg, prefix, _ = dagbag
    topic = f"{prefix}.lost"
    mirror_topic(source, target, topic, 1)
    produce(source, topic, [{"value": f"v{i}".encode(), "timestamp": NOW + i} for i in range(5)])
    planned = plan_task("A->B", "manual__no_copy", str(cfg.path))
    assert planned["units"] == 1 and planned["offsets"] == 5
    with pytest.raises(AirflowFailException) as exc:
        report_task("A->B", planned, None, str(cfg.path))
    assert f"has no result for 1 of its 1 planned unit(s): {topic}[0] 0..5" in str(exc.value)
    with FlowClients(cfg, cfg.flow("A->B")) as clients:
        assert current_holder(clients) is None
