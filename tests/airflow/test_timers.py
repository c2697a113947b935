"""MM2's *.interval.seconds run as timers on the DAG schedules: each job runs
once per interval in scheduled runs, every job on a manual trigger, and heartbeats every
emit.heartbeats.interval.seconds during the heartbeat DAG's task."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import TopicPartition

from mirrorflow_airflow.dag_builders.timers import RunTimes, is_due
from tests.support import write_config

pytestmark = pytest.mark.airflow
DAGS = Path(__file__).resolve().parents[2] / "dags"
SCHEDULED = SimpleNamespace(run_type="scheduled")


def at(hh: int, mm: int, ss: int = 0) -> datetime:
    return datetime(2026, 3, 1, hh, mm, ss, tzinfo=UTC)


def test_a_job_is_due_once_per_interval_window_after_the_last_successful_run():
    assert is_due(3600, at(10, 0), at(9, 50)) is True  # 10:00 crossed
    assert is_due(3600, at(10, 50), at(10, 0)) is False
    assert is_due(3600, at(11, 0), at(10, 50)) is True
    assert is_due(600, at(10, 10), at(10, 0)) is True
    assert is_due(600, at(10, 9, 59), at(10, 0)) is False
    assert is_due(3600, at(12, 5), at(9, 10)) is True  # failed runs in between: due at once
    assert is_due(3600, at(10, 0), None) is True  # no successful run yet
    times = RunTimes.of(SCHEDULED, at(10, 50), at(10, 0))
    assert (times.manual, times.due(3600), times.due(600)) == (False, False, True)
    assert RunTimes.of(SimpleNamespace(run_type="manual"), at(10, 50), at(10, 0)).due(3600) is True
    assert RunTimes.of().due(3600) is True  # outside Airflow (a direct call): always due


def bag(path: Path, monkeypatch, dag_file: str):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(path))
    b = DagBag(dag_folder=str(DAGS / dag_file))
    assert b.import_errors == {}
    return b


def test_sync_dag_ticks_at_the_shortest_interval_and_skips_concerns_not_due(airflow_db, tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowSkipException

    cfg = tmp_path / "mf.yaml"
    cfg.write_text(
        "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
        "  C: {bootstrap.servers: '127.0.0.1:3'}\n"
        "flows:\n  A->B: {refresh.topics.interval.seconds: 900, sync.topic.configs.interval.seconds: 3600,"
        " sync.topic.acls.interval.seconds: 300}\n"
        "  A->C: {refresh.topics.enabled: false, sync.topic.configs.enabled: false,"
        " sync.topic.acls.enabled: false}\n"
    )
    b = bag(cfg, monkeypatch, "mirrorflow_sync.py")
    dag = b.get_dag("mirrorflow_sync__A-B")
    assert dag.timetable.delta == timedelta(seconds=300)
    assert b.get_dag("mirrorflow_sync__A-C").schedule is None  # nothing runs on a timer
    # a scheduled run at 10:05 after a successful one at 10:00: only the 300 s ACL timer is due;
    # the others skip before touching a cluster (these bootstrap addresses lead nowhere)
    for task_id, why in (
        ("topics_and_partitions", "topics: not due: refresh.topics.interval.seconds=900"),
        ("configs", "configs: not due: sync.topic.configs.interval.seconds=3600"),
    ):
        with pytest.raises(AirflowSkipException) as exc:
            dag.get_task(task_id).python_callable(
                params={}, dag_run=SCHEDULED, logical_date=at(10, 5), prev_data_interval_end_success=at(10, 0)
            )
        assert str(exc.value) == (
            f"A->B: {why} and the last successful run (2026-03-01T10:00:00+00:00) was in the same interval"
        )


def test_sync_dag_without_topic_refresh_still_syncs_configs_on_schedule(airflow_db, tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowSkipException

    cfg = tmp_path / "mf.yaml"
    cfg.write_text(
        "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
        "flows:\n  A->B: {refresh.topics.enabled: false, sync.topic.configs.interval.seconds: 1200}\n"
    )
    dag = bag(cfg, monkeypatch, "mirrorflow_sync.py").get_dag("mirrorflow_sync__A-B")
    assert dag.timetable.delta == timedelta(seconds=600)  # the ACL timer
    with pytest.raises(AirflowSkipException) as exc:
        dag.get_task("topics_and_partitions").python_callable(
            params={}, dag_run=SCHEDULED, logical_date=at(11, 0), prev_data_interval_end_success=at(10, 0)
        )
    assert str(exc.value) == "A->B: topics: refresh.topics.enabled=false (a manual trigger still syncs topics)"


def test_checkpoint_dag_ticks_at_the_shortest_job_and_group_sync_survives_a_skipped_checkpoint(
    airflow_db, tmp_path, monkeypatch
):
    from airflow.sdk.exceptions import AirflowSkipException

    cfg = tmp_path / "mf.yaml"
    cfg.write_text(
        "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
        "flows:\n  A->B: {emit.checkpoints.interval.seconds: 120, sync.group.offsets.enabled: true,"
        " sync.group.offsets.interval.seconds: 30, emit.heartbeats.interval.seconds: 90}\n"
        "  B->A: {emit.checkpoints.interval.seconds: 120, sync.group.offsets.interval.seconds: 30}\n"
    )
    b = bag(cfg, monkeypatch, "mirrorflow_checkpoint.py")
    dag = b.get_dag("mirrorflow_checkpoint__A-B")
    assert dag.timetable.delta == timedelta(seconds=30)
    assert b.get_dag("mirrorflow_checkpoint__B-A").timetable.delta == timedelta(seconds=120)  # group sync off
    assert dag.get_task("sync_group_offsets").trigger_rule == "none_failed"
    ctx = {"dag_run": SCHEDULED, "logical_date": at(10, 0, 30), "prev_data_interval_end_success": at(10, 0)}
    with pytest.raises(AirflowSkipException) as exc:
        dag.get_task("checkpoint").python_callable(**ctx)
    assert str(exc.value) == (
        "A->B: checkpoints: not due: emit.checkpoints.interval.seconds=120 and the last "
        "successful run (2026-03-01T10:00:00+00:00) was in the same interval"
    )
    # heartbeats: a DAG of their own; an interval of 90 s (not below its 60 s window) is its schedule,
    # one emission per run, once per 90 s window as the other timers
    beats = bag(cfg, monkeypatch, "mirrorflow_heartbeat.py").get_dag("mirrorflow_heartbeat__A-B")
    assert beats.timetable.delta == timedelta(seconds=90) and "heartbeat" not in dag.task_ids
    with pytest.raises(AirflowSkipException) as exc:
        beats.get_task("heartbeat").execute(ctx)
    assert str(exc.value).startswith("A->B: heartbeats: not due: emit.heartbeats.interval.seconds=90 ")


def test_group_sync_is_skipped_without_checkpoints(airflow_db, tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowSkipException

    cfg = tmp_path / "mf.yaml"
    cfg.write_text(
        "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
        "flows:\n  A->B: {emit.checkpoints.enabled: false, sync.group.offsets.enabled: true}\n"
    )
    dag = bag(cfg, monkeypatch, "mirrorflow_checkpoint.py").get_dag("mirrorflow_checkpoint__A-B")
    with pytest.raises(AirflowSkipException) as exc:
        dag.get_task("sync_group_offsets").python_callable()
    assert str(exc.value) == "A->B: group offset sync: emit.checkpoints.enabled=false"


def _beats(cluster, since: int, src: str, tgt: str) -> int:
    """Heartbeats (src, tgt) in `heartbeats` at or after offset `since`."""
    from mirrorflow.mm2.formats import Heartbeat
    from tests.support import consume_all

    return sum(
        1
        for r in consume_all(cluster, "heartbeats")
        if r.offset >= since and (h := Heartbeat.decode(r.key, r.value)).source == src and h.target == tgt
    )


def _ends(cluster, topic: str) -> int:
    from confluent_kafka import Consumer

    c = Consumer({**cluster.client_config(), "group.id": "probe", "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


@pytest.mark.integration
def test_heartbeats_are_emitted_every_interval_for_one_tick(tmp_path, source, target, unique):
    from mirrorflow.groups.heartbeat import emit_heartbeats_for

    cfg = write_config(
        tmp_path / "mf.yaml",
        {"A": source, "B": target},
        {"A->B": {"topics": f"{unique('hb')}\\..*", "emit.heartbeats.interval.seconds": 20}},
    )
    flow = cfg.flow("A->B")
    before = (_ends(target, "heartbeats"), _ends(source, "heartbeats"))
    clock = [1000.0]
    slept: list[float] = []

    def sleep(s: float) -> None:  # a clock that moves only when the loop sleeps: no waiting
        slept.append(s)
        clock[0] += s

    emitted = emit_heartbeats_for(cfg, flow, 60, sleep=sleep, clock=lambda: clock[0])
    assert [(e.cluster, e.source, e.target) for e in emitted] == [("B", "A", "B"), ("A", "B", "A")] * 3
    assert slept == [20.0, 20.0]  # emissions at 0, 20 and 40 s of a 60 s tick
    # counted by key after `before`: another flow's heartbeats (a scheduler test's leftovers) may land too
    assert (_beats(target, before[0], "A", "B"), _beats(source, before[1], "B", "A")) == (3, 3)
    off = write_config(tmp_path / "off.yaml", {"A": source, "B": target}, {"A->B": {"emit.heartbeats.enabled": False}})
    assert emit_heartbeats_for(off, off.flow("A->B"), 60, sleep=sleep, clock=lambda: clock[0]) == []
    assert slept == [20.0, 20.0]


@pytest.mark.integration
def test_the_heartbeat_task_defers_the_ticks_later_heartbeats_to_the_triggerer(
    airflow_db, tmp_path, monkeypatch, source, target, unique
):
    """The heartbeat DAG's 60 s window with a 20 s interval: the task emits the first heartbeat and
    defers (no worker slot while it waits); the trigger, run here as the triggerer runs it, sends
    the other two; the task resumes only to report. Every heartbeat is on the clusters, each once."""
    import asyncio

    from airflow.sdk.exceptions import TaskDeferred

    cfg = write_config(
        tmp_path / "mf.yaml",
        {"A": source, "B": target},
        {"A->B": {"topics": f"{unique('hb')}\\..*", "emit.heartbeats.interval.seconds": 20}},
    )
    task = bag(cfg.path, monkeypatch, "mirrorflow_heartbeat.py").get_dag("mirrorflow_heartbeat__A-B").get_task(
        "heartbeat")
    before = (_ends(target, "heartbeats"), _ends(source, "heartbeats"))
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({})
    assert deferred.value.method_name == "execute_complete"
    trigger = deferred.value.trigger
    classpath, kwargs = trigger.serialize()
    assert classpath == "mirrorflow_airflow.triggers.heartbeat.HeartbeatTrigger" and kwargs["count"] == 3
    assert (_beats(target, before[0], "A", "B"), _beats(source, before[1], "B", "A")) == (1, 1)
    trigger = type(trigger)(**{**kwargs, "start": kwargs["start"] - 40})  # as if 40 s had passed: no waiting

    async def first_event():
        async for event in trigger.run():
            return event

    event = asyncio.run(first_event())
    assert event.payload["error"] is None and len(event.payload["emitted"]) == 6
    summary = task.execute_complete({}, event.payload)
    assert summary["emitted"] == 6 and summary["worker_s"] > 0
    assert (_beats(target, before[0], "A", "B"), _beats(source, before[1], "B", "A")) == (3, 3)


@pytest.mark.integration
def test_checkpoints_topic_is_created_with_its_replication_factor(tmp_path, source, target, unique):
    """The dev clusters have one broker: a replication factor of 2 must reach the broker, which
    refuses it naming the topic (before, the topic was created with the broker's default)."""
    from confluent_kafka import Consumer

    from mirrorflow.errors import ClusterError
    from mirrorflow.groups.checkpoint import emit_checkpoints
    from tests.support import create_topic

    prefix = unique("rf")
    alias = "S" + prefix.replace("-", "").replace("_", "").replace(".", "")[-30:]
    topic = f"{prefix}.orders"
    create_topic(source, topic)
    group = f"g-{prefix}"
    c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()
    exact = SimpleNamespace(translate=lambda o: SimpleNamespace(target_offset=o, status="exact", missing=0))
    for rf in (2, 1):
        cfg = write_config(
            tmp_path / f"mf{rf}.yaml",
            {alias: source, "B": target},
            {f"{alias}->B": {"topics": f"{prefix}\\..*", "checkpoints.topic.replication.factor": rf}},
        )
        flow = cfg.flow(f"{alias}->B")
        if rf == 2:
            with pytest.raises(ClusterError) as exc:
                emit_checkpoints(cfg, flow, groups=[group], maps={(topic, 0): exact})
            assert f"cannot create topic '{alias}.checkpoints.internal'" in str(exc.value)
            assert "replication factor" in str(exc.value).lower()
        else:
            run = emit_checkpoints(cfg, flow, groups=[group], maps={(topic, 0): exact})
            assert run.created_topic is True and [c.topic for c in run.emitted] == [f"{alias}.{topic}"]
