"""The heartbeat DAG per flow: MM2's heartbeats in a DAG of their own (a window per run, waited for
on the triggerer), so that the checkpoint DAG's run lasts seconds; its schedule, a dag.test() run
that emits, and a stopped flow's scheduled run that waits out its window before it ends skipped."""
from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.mm2.formats import Heartbeat
from tests.support import admin, write_config

pytestmark = pytest.mark.airflow
DAGS = os.path.join(os.path.dirname(__file__), "..", "..", "dags")


def dagbag(cfg_path, monkeypatch, dag_file: str):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg_path))
    bag = DagBag(dag_folder=os.path.join(DAGS, dag_file))
    assert bag.import_errors == {}
    return bag


def test_one_heartbeat_dag_per_flow_windows_back_to_back(airflow_db, tmp_path, monkeypatch):
    cfg = tmp_path / "mf.yaml"
    cfg.write_text(
        "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
        "  C: {bootstrap.servers: '127.0.0.1:3'}\n"
        "flows:\n  A->B: {}\n  B->A: {enabled: false, emit.heartbeats.interval.seconds: 120}\n"
        "  A->C: {emit.heartbeats.enabled: false, emit.checkpoints.enabled: false}\n"
    )
    bag = dagbag(cfg, monkeypatch, "mirrorflow_heartbeat.py")
    assert sorted(bag.dag_ids) == ["mirrorflow_heartbeat__A-B", "mirrorflow_heartbeat__A-C",
                                   "mirrorflow_heartbeat__B-A"]  # a disabled flow too, as MM2's connector
    dag = bag.get_dag("mirrorflow_heartbeat__A-B")
    # MM2's 1 s interval: 60 s windows, the next as soon as one ends
    assert type(dag.timetable).__name__ == "ContinuousTimetable" and dag.max_active_runs == 1
    assert dag.task_ids == ["heartbeat"] and dag.get_task("heartbeat").tick_s == 60
    assert dag.catchup is False and dag.default_args["retries"] >= 2 and "heartbeat" in dag.tags
    # an interval not shorter than the window: one emission per run, on that interval
    slow = bag.get_dag("mirrorflow_heartbeat__B-A")
    assert slow.timetable.delta == timedelta(seconds=120) and slow.get_task("heartbeat").tick_s == 120
    assert bag.get_dag("mirrorflow_heartbeat__A-C").schedule is None  # emit.heartbeats.enabled: false
    # the checkpoint DAG no longer holds a window of heartbeats; with no job enabled it is manual only
    checkpoints = dagbag(cfg, monkeypatch, "mirrorflow_checkpoint.py")
    assert checkpoints.get_dag("mirrorflow_checkpoint__A-B").task_ids == ["checkpoint", "sync_group_offsets"]
    assert checkpoints.get_dag("mirrorflow_checkpoint__A-C").schedule is None


def beats(cfg, alias: str, source: str, target: str) -> list[Heartbeat]:
    from mirrorflow.clients import cluster_connection

    records = read_partition(cluster_connection(cfg.cluster(alias)), "heartbeats")
    return [h for r in records if ((h := Heartbeat.decode(r.key, r.value)).source, h.target) == (source, target)]


@pytest.mark.integration
def test_a_disabled_flows_heartbeat_dag_run_emits_both_records(airflow_db, tmp_path, monkeypatch, source, target):
    tag = uuid.uuid4().hex[:6]
    src, tgt = f"H{tag}", f"G{tag}"  # aliases of this test only: its heartbeats are told apart by key
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"enabled": False, "emit.heartbeats.interval.seconds": 60}})
    run = dagbag(cfg.path, monkeypatch, "mirrorflow_heartbeat.py").get_dag(f"mirrorflow_heartbeat__{src}-{tgt}").test()
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {"heartbeat": "success"}
    # MM2's two herders' records: (src, tgt) on the target, the reverse (tgt, src) on the source
    assert [(h.source, h.target) for h in beats(cfg, tgt, src, tgt)] == [(src, tgt)]
    assert [(h.source, h.target) for h in beats(cfg, src, tgt, src)] == [(tgt, src)]
    assert "heartbeats" in admin(source).list_topics(timeout=10).topics


@pytest.mark.integration
def test_a_manual_run_of_a_one_second_window_emits_once_and_ends(airflow_db, tmp_path, monkeypatch, source, target):
    """The `window_seconds` Param: MM2's 1 s interval makes a 60 s window; a manual run of 1 s emits one
    heartbeat and ends at once, with no wait on the triggerer."""
    tag = uuid.uuid4().hex[:6]
    src, tgt = f"H{tag}", f"G{tag}"
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target}, {f"{src}->{tgt}": {"enabled": False}})
    dag = dagbag(cfg.path, monkeypatch, "mirrorflow_heartbeat.py").get_dag(f"mirrorflow_heartbeat__{src}-{tgt}")
    assert dag.get_task("heartbeat").tick_s == 60 and dag.params.get_param("window_seconds").value is None
    began = datetime.now(UTC)
    run = dag.test(run_conf={"window_seconds": 1})
    (ti,) = run.get_task_instances()
    assert ti.state == "success" and ti.xcom_pull(task_ids="heartbeat")["emitted"] == 2  # one each way
    assert (datetime.now(UTC) - began).total_seconds() < 50  # not the 60 s window
    assert [(h.source, h.target) for h in beats(cfg, tgt, src, tgt)] == [(src, tgt)]


@pytest.mark.integration
def test_a_stopped_flows_scheduled_window_waits_on_the_triggerer_then_skips(
    airflow_db, tmp_path, monkeypatch, source, target
):
    """With `@continuous` a run that ended at once would be followed by the next at once: a scheduled
    run of a stopped flow defers for its window (a TimeDeltaTrigger, no worker slot) and only then
    ends skipped, saying why; a manual run ends skipped at once. No heartbeat is written."""
    from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger
    from airflow.sdk.exceptions import AirflowSkipException, TaskDeferred

    tag = uuid.uuid4().hex[:6]
    src, tgt = f"H{tag}", f"G{tag}"
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"state": "stopped"}})
    task = dagbag(cfg.path, monkeypatch, "mirrorflow_heartbeat.py").get_dag(
        f"mirrorflow_heartbeat__{src}-{tgt}").get_task("heartbeat")
    why = f"heartbeats: flow {src}->{tgt} is stopped (in the config (state property))"
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"dag_run": SimpleNamespace(run_type="scheduled")})
    assert isinstance(deferred.value.trigger, TimeDeltaTrigger) and deferred.value.method_name == "skip_after_wait"
    wait = (deferred.value.trigger.moment - datetime.now(UTC)).total_seconds()
    assert 50 < wait <= 60, wait  # the window (60 s), less the time the task took to get here
    with pytest.raises(AirflowSkipException) as exc:
        getattr(task, deferred.value.method_name)({}, None, **deferred.value.kwargs)
    assert str(exc.value).startswith(why) and "Next step: remove the flow's `state: stopped`" in str(exc.value)
    with pytest.raises(AirflowSkipException) as exc:  # a manual run: at once
        task.execute({"dag_run": SimpleNamespace(run_type="manual")})
    assert str(exc.value).startswith(why)
    assert "heartbeats" not in admin(target).list_topics(timeout=10).topics or not beats(cfg, tgt, src, tgt)
