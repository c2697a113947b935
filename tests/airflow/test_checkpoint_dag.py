"""The checkpoint DAG per flow: shape, schedule, and a dag.test() run that writes checkpoints."""
from __future__ import annotations

import os
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import CheckpointStore
from mirrorflow.replication.run.runner import run_once
from mirrorflow.metadata.sync import sync_flow
from tests.integration.replicate_helpers import target_offset_of
from tests.support import create_topic, produce, write_config

pytestmark = pytest.mark.airflow


@pytest.fixture
def dagbag(tmp_path, source, target, airflow_db, unique, monkeypatch):
    prefix = unique("dag")
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": f"{prefix}\\..*", "sync.group.offsets.enabled": True,
                                 "emit.checkpoints.interval.seconds": 30, "state.topic.partitions": 1},
                        "B->A": {"enabled": False, "topics": f"{prefix}\\..*", "emit.checkpoints.interval.seconds": 5}})
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_checkpoint.py"))
    assert bag.import_errors == {}
    return cfg, prefix, bag


def test_one_checkpoint_dag_per_flow(dagbag):
    cfg, _, bag = dagbag
    assert {"mirrorflow_checkpoint__A-B", "mirrorflow_checkpoint__B-A"} <= set(bag.dag_ids)
    dag = bag.get_dag("mirrorflow_checkpoint__A-B")
    assert dag.max_active_runs == 1 and dag.catchup is False
    assert type(dag.timetable).__name__ == "DeltaTriggerTimetable" and dag.timetable.delta == timedelta(seconds=30)
    assert set(dag.task_ids) == {"checkpoint", "sync_group_offsets"}  # heartbeats: a DAG of their own
    assert dag.get_task("sync_group_offsets").upstream_task_ids == {"checkpoint"}
    assert dag.default_args["retries"] >= 2 and "mirrorflow" in dag.tags


def test_dag_run_writes_checkpoints_and_syncs_the_group(dagbag, source, target):
    cfg, prefix, bag = dagbag
    topic = f"{prefix}.orders"
    create_topic(source, topic)
    produce(source, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(10)])
    group = f"g-{prefix}"
    c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    c.close()
    flow = cfg.flow("A->B")
    assert sync_flow(cfg, flow, "topics").ok
    assert run_once(cfg, flow, mode="direct").ok

    run = bag.get_dag("mirrorflow_checkpoint__A-B").test()
    assert run.state == "success"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"checkpoint": "success", "sync_group_offsets": "success"}
    with FlowClients(cfg, flow) as clients:
        store = CheckpointStore.load(clients)
    cp = store.for_group(group)[(f"A.{topic}", 0)]
    # the copy of source offset 4 on the target (each copy unit's aborted transaction comes first there)
    want = target_offset_of(source, target, topic, f"A.{topic}", 0, 4)
    assert cp.upstream_offset == 4 and cp.downstream_offset == want
    t = Consumer({**target.client_config(), "group.id": group, "enable.auto.commit": False})
    assert t.committed([TopicPartition(f"A.{topic}", 0)], timeout=10)[0].offset == want
    t.close()


def test_disabled_flow_skips_checkpoints(dagbag):
    _, _, bag = dagbag
    run = bag.get_dag("mirrorflow_checkpoint__B-A").test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"checkpoint": "skipped", "sync_group_offsets": "skipped"}
