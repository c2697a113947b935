"""State reads end at the high watermark taken before reading, not at the last stable offset.

A read_committed consumer's own watermark query answers the LAST STABLE OFFSET: while any
transaction is open on a state partition (another copy unit's, a crashed run's, until the broker
aborts it after transaction.timeout.ms), a read ending there silently misses everything committed
after that transaction's first record. These tests open such a transaction on a real progress
partition, land a committed progress record after it, and read through the real StateStore API:
the read returns the record once the open transaction ends, or fails naming the open transaction,
never returns without it.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer

from mirrorflow.clients import FlowClients
from mirrorflow.errors import ClusterError
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import flow_state, set_flow_state
from mirrorflow.state.names import offset_map_topic, progress_topic, transactional_id
from mirrorflow.state.offset_map import MapEntry, Run
from mirrorflow.state.records import Progress, encode_entry
from mirrorflow.state.state_topics import ensure_state_topics, state_key
from mirrorflow.state.store import StateStore
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.integration


def state_flow(tmp_path, source, target, topic: str):
    """A flow of its own (own source alias: own state topics on B, one partition each)."""
    alias = f"R{uuid.uuid4().hex[:6]}"
    props = {"topics": topic, "state.topic.partitions": 1}
    cfg = write_config(tmp_path / f"{alias}.yaml", {alias: source, "B": target}, {f"{alias}->B": props})
    flow = cfg.flow(f"{alias}->B")
    with FlowClients(cfg, flow) as clients:
        ensure_state_topics(clients)
    return cfg, flow


def open_transaction(target, topic: str, tag: str) -> Producer:
    """A transactional producer with one record on `topic`[0], neither committed nor aborted."""
    p = Producer({**target.client_config(), "transactional.id": f"open-{tag}", "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"not-state", b"unrelated-key", 0)
    assert p.flush(30) == 0
    return p


def committed(target, topic: str, key: bytes, value: bytes) -> None:
    """A state record written WITHOUT a transaction: committed at once, above the open one."""
    p = Producer({**target.client_config(), "enable.idempotence": True, "acks": "all"})
    p.produce(topic, value, key, 0)
    assert p.flush(30) == 0


def committed_progress(target, topic: str, progress: Progress) -> None:
    committed(target, topic, state_key(progress.topic, progress.partition), progress.to_json())


def later(seconds: float, action) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(seconds), action()), daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("ending", ["commit", "abort"])
def test_a_state_read_waits_for_the_transaction_open_below_committed_progress(tmp_path, source, target, topic_name,
                                                                              ending):
    cfg, flow = state_flow(tmp_path, source, target, topic_name)
    topic = progress_topic(flow)
    opened = open_transaction(target, topic, f"{topic_name}-{ending}")
    mine = Progress(topic_name, 0, 42, ((0, 42),), 44, records=42)
    committed_progress(target, topic, mine)
    end = getattr(opened, f"{ending}_transaction")
    ended = later(1.0, lambda: end(30))
    with FlowClients(cfg, flow) as clients:
        got = StateStore(clients).progress(timeout=60)
    ended.join()
    assert got == {(topic_name, 0): mine}


def test_an_offset_map_read_waits_for_the_transaction_open_below_a_committed_entry(tmp_path, source, target,
                                                                                  topic_name):
    """The offset map (snapshots, then the tail up to the watermarks taken first) the same way:
    translation must see the entry committed after another unit's open transaction."""
    cfg, flow = state_flow(tmp_path, source, target, topic_name)
    topic = offset_map_topic(flow)
    opened = open_transaction(target, topic, topic_name)
    entry = MapEntry(topic_name, 0, 0, 10, (Run(0, 2, 10),), 12)
    committed(target, topic, state_key(topic_name, 0), encode_entry(entry))
    ended = later(1.0, lambda: opened.commit_transaction(30))
    with FlowClients(cfg, flow) as clients:
        got = StateStore(clients).offset_map([(topic_name, 0)], timeout=60)
    ended.join()
    assert [(t.target_offset, t.status) for t in map(got[(topic_name, 0)].translate, (3, 10))] == [
        (5, "exact"), (12, "end")]


def test_a_state_read_past_its_timeout_names_the_open_transaction(tmp_path, source, target, topic_name):
    cfg, flow = state_flow(tmp_path, source, target, topic_name)
    topic = progress_topic(flow)
    opened = open_transaction(target, topic, topic_name)
    committed_progress(target, topic, Progress(topic_name, 0, 7, ((0, 7),), 7))
    try:
        with FlowClients(cfg, flow) as clients, pytest.raises(ClusterError) as caught:
            StateStore(clients).progress(timeout=3)
    finally:
        opened.abort_transaction(30)
    assert str(caught.value) == (
        f"cluster 'B': timed out reading topic {topic!r} partitions [0] (partition 0: a transaction open since "
        "offset 0 (high watermark 2); a crashed writer's transaction is aborted after transaction.timeout.ms)"
    )



def test_a_run_after_a_crashed_copy_reads_its_flow_state_and_fences_the_open_transaction(tmp_path, source, target,
                                                                                          topic_name):
    """A copy that died mid-transaction leaves it open on the progress partition, here for ten
    minutes (its transaction.timeout.ms). The flow-state record that every run reads BEFORE it takes
    the lease shares that partition: that read must not wait for the broker's abort (CI's chaos run
    timed out there; the planner's clean-up, which ends the transaction, comes after it). The run
    then fences the crashed copy's transactional.id and copies everything exactly once."""
    cfg, flow = state_flow(tmp_path, source, target, topic_name)
    remote = f"{flow.source}.{topic_name}"
    create_topic(source, topic_name)
    create_topic(target, remote)
    produce(source, topic_name, [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(30)])
    crashed = Producer({**target.client_config(), "transactional.id": transactional_id(flow, topic_name, 0),
                        "transaction.timeout.ms": 600000})
    crashed.init_transactions(30)
    crashed.begin_transaction()
    crashed.produce(progress_topic(flow), b"half-written", state_key(topic_name, 0), 0)
    crashed.produce(remote, b"half-written", b"k", 0)
    assert crashed.flush(30) == 0
    with FlowClients(cfg, flow) as clients:
        set_flow_state(clients, "paused", "checking the read", "test")  # committed above the open transaction
        assert flow_state(clients).state == "paused"
        set_flow_state(clients, "running", "", "test")
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 30, rep.render()
    assert [(r.key, r.value) for r in consume_all(target, remote)] == [
        (f"k{i}".encode(), f"v{i}".encode()) for i in range(30)
    ]
    with pytest.raises(KafkaException):  # the crashed copy was fenced: it can commit nothing now
        crashed.commit_transaction(30)
