"""A copy task's memory budget: the arithmetic that sizes the copy's clients."""

from __future__ import annotations

import pytest

from mirrorflow.config import parse
from mirrorflow.replication.task.budget import (
    BATCH_SHARE,
    FETCH_SHARE,
    LANE_BYTES,
    MIB,
    MIN_LANE_BYTES,
    PROCESS_BYTES,
    QUEUE_SHARE,
    CopyBudget,
)
from mirrorflow.replication.task.copier import reading_at_once
from mirrorflow.replication.plan.run_plan import Unit
from mirrorflow.replication.task.reader import BatchLimits

CLUSTERS = {"A": {"bootstrap.servers": "a:9092"}, "B": {"bootstrap.servers": "b:9092"}}


def flow(**props):
    return parse({"clusters": CLUSTERS, "flows": {"A->B": props}}).flow("A->B")


def test_one_busy_partition_gets_a_deep_prefetch_and_full_transactions():
    b = CopyBudget.of(flow(), lanes=1)
    assert (b.task_bytes, b.lanes, b.transaction_bytes) == (256 * MIB, 1, 32 * MIB)
    assert b.lane_bytes == 256 * MIB - 88 * MIB - 16 * MIB == 152 * MIB
    assert b.batch_bytes == int(152 * MIB * 0.2)  # 30.4 MiB: a little under transaction.max.bytes
    assert b.consumer() == {
        "queued.max.messages.kbytes": 38 * 1024,  # a quarter of the lane
        "fetch.max.bytes": 19 * MIB,
        "max.partition.fetch.bytes": 19 * MIB,
        "fetch.wait.max.ms": 10,
        "fetch.min.bytes": 1,
        "fetch.queue.backoff.ms": 10,
    }
    assert b.producer()["batch.size"] == 1_000_000


def test_four_busy_partitions_share_the_budget():
    b = CopyBudget.of(flow(), lanes=4)
    assert b.lane_bytes == (168 * MIB) // 4 - 16 * MIB == 26 * MIB
    assert b.batch_bytes == int(26 * MIB * 0.2)  # 5.2 MiB: smaller transactions than transaction.max.bytes
    assert b.consumer()["queued.max.messages.kbytes"] == int(26 * MIB * 0.25) // 1024
    assert b.consumer()["fetch.max.bytes"] == int(26 * MIB * 0.125)


@pytest.mark.parametrize("lanes", [1, 2, 3, 4, 5, 6, 7])
def test_the_lanes_buffers_fit_the_task_budget(lanes):
    """process + lanes x (lane cost + queue + fetch + the batch held twice, with Python's objects)."""
    b = CopyBudget(256 * MIB, lanes, 32 * MIB)
    lane = LANE_BYTES + b.queue_bytes + b.fetch_bytes + 2.5 * b.batch_bytes
    assert PROCESS_BYTES + lanes * lane <= 256 * MIB
    assert QUEUE_SHARE + FETCH_SHARE + 2.5 * BATCH_SHARE <= 1.0


def test_floors_and_the_follow_cap():
    assert CopyBudget(256 * MIB, 6, 32 * MIB).lane_bytes == 12 * MIB
    assert CopyBudget(256 * MIB, 8, 32 * MIB).lane_bytes == MIN_LANE_BYTES
    many = CopyBudget(256 * MIB, 64, 32 * MIB)
    assert many.lane_bytes == MIN_LANE_BYTES  # a task over many lanes may exceed its budget (documented)
    assert many.fetch_bytes >= 1_000_000  # librdkafka's message.max.bytes
    # continuous runs: the small prefetch they always had, batches bounded by time, whatever the lanes
    for lanes in (1, 64):
        follow = CopyBudget(256 * MIB, lanes, 32 * MIB, follow=True)
        assert (follow.queue_bytes, follow.fetch_bytes, follow.batch_bytes) == (8 * MIB, 8 * MIB, 32 * MIB)
        assert follow.consumer()["max.partition.fetch.bytes"] == 4 * MIB


def test_the_budget_is_a_flow_property_and_lowers_the_batch_limit():
    f = flow(**{"task.memory.bytes": 512 * MIB, "transaction.max.bytes": 64 * MIB})
    b = CopyBudget.of(f, lanes=2)
    assert b.lane_bytes == (424 * MIB) // 2 - 16 * MIB
    assert b.batch_bytes == int(b.lane_bytes * 0.2)
    assert BatchLimits.of(f, b.batch_bytes).bytes == b.batch_bytes
    assert BatchLimits.of(f).bytes == 64 * MIB
    assert BatchLimits.of(f, 10**12).bytes == 64 * MIB  # never above transaction.max.bytes


def test_reading_at_once_counts_busy_partitions_up_to_the_lanes():
    units = [
        Unit("t", 0, "A.t", 0, 10),
        Unit("t", 0, "A.t", 10, 20),
        Unit("t", 1, "A.t", 5, 5),
        Unit("u", 0, "A.u", 0, 1),
    ]
    assert reading_at_once(units, 16) == 2  # t[0] (two units) and u[0]; t[1] has nothing to copy
    assert reading_at_once(units, 1) == 1
    assert reading_at_once([Unit("t", 1, "A.t", 5, 5)], 16) == 1
