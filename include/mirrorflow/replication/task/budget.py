"""A copy task's memory budget: the one place that sizes the copy's client buffers.

A copy task holds, per partition it reads at the same time (a lane of `copier.copy_units`): the
source consumer's prefetch (`queued.max.messages.kbytes` of queued records plus one fetch in flight,
`fetch.max.bytes`) and the batch of its open transaction twice (the reader keeps the records until
the commit, the producer's queue until the brokers acknowledge them). `task.memory.bytes` is what
the whole task may take: the process's own share (Python, librdkafka and the task's clients,
`PROCESS_BYTES`) comes off first, and the rest is split evenly over the lanes that read at once.
So one busy partition gets a deep prefetch and full-size transactions (the copy keeps up with a raw
pipe), and a task reading many partitions at once gets a shallower one each instead of growing
with their number (bench/bench_replicate.py measures both; docs/replicate.md, "Memory of a copy
task"). The flow's `consumer.*` / `producer.*` overrides still win over what this computes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mirrorflow.config import FlowConfig

MIB = 1 << 20
PROCESS_BYTES = 88 * MIB  # an idle copy task's resident memory (direct mode and a Spark Python worker)
# what a lane costs besides its buffers: its clients (the source consumer, the state reader, the
# unit's producer and their threads), one consume() call's records, and the allocator's slack
LANE_BYTES = 16 * MIB
MIN_LANE_BYTES = 8 * MIB  # below this a lane copies record by record; a task over many lanes may exceed its budget
MIN_FETCH_BYTES = 1_048_576  # librdkafka raises fetch.max.bytes to message.max.bytes (1,000,000) anyway
# A lane's share, in parts of the lane's bytes: the queued records, one fetch in flight, and the
# batch (transaction bytes), which is held twice and carries Python's per-record objects on the
# reader's side (about 1.3x the payload for 1 KiB records): 0.25 + 0.125 + 2.5 x 0.2 = 0.875, so
# that a task measured at its worst (a backlog on every lane, a loaded machine: the fetcher always
# ahead of the reader) stays under its budget with ~15 MiB to spare (bench/bench_replicate.py).
QUEUE_SHARE, FETCH_SHARE, BATCH_SHARE = 0.25, 0.125, 0.20
# A followed partition (continuous runs) reads what arrived since its last poll: its prefetch stays
# small whatever the budget (seconds of data), so a task's memory does not grow with a backlog, and
# its batches are bounded by continuous.poll.ms rather than by the budget.
FOLLOW_QUEUE_BYTES, FOLLOW_FETCH_BYTES = 8 * MIB, 8 * MIB


@dataclass(frozen=True)
class CopyBudget:
    """The client settings of one copy task, from its memory budget and the partitions it reads at once."""

    task_bytes: int  # task.memory.bytes
    lanes: int  # partitions the task reads at the same time
    transaction_bytes: int  # transaction.max.bytes: the batch never grows past it
    follow: bool = False  # continuous runs: a small prefetch per followed partition

    @classmethod
    def of(cls, flow: FlowConfig, lanes: int = 1, follow: bool = False) -> CopyBudget:
        p = flow.props
        return cls(int(p["task.memory.bytes"]), max(1, lanes), int(p["transaction.max.bytes"]), follow)

    @property
    def lane_bytes(self) -> int:
        """A lane's buffers: its share of the task's budget, less what a lane costs besides them."""
        return max(MIN_LANE_BYTES, (self.task_bytes - PROCESS_BYTES) // self.lanes - LANE_BYTES)

    @property
    def batch_bytes(self) -> int:
        """A transaction's bytes at most: transaction.max.bytes, or less when the lane's share is smaller."""
        if self.follow:
            return self.transaction_bytes
        return max(MIN_FETCH_BYTES, min(self.transaction_bytes, int(self.lane_bytes * BATCH_SHARE)))

    @property
    def queue_bytes(self) -> int:
        return FOLLOW_QUEUE_BYTES if self.follow else int(self.lane_bytes * QUEUE_SHARE)

    @property
    def fetch_bytes(self) -> int:
        return FOLLOW_FETCH_BYTES if self.follow else max(MIN_FETCH_BYTES, int(self.lane_bytes * FETCH_SHARE))

    def consumer(self) -> dict[str, Any]:
        """The source consumer's prefetch (a lane's consumer reads one partition at a time)."""
        return {
            "queued.max.messages.kbytes": max(1024, self.queue_bytes // 1024),
            "fetch.max.bytes": self.fetch_bytes,
            "max.partition.fetch.bytes": self.fetch_bytes // 2 if self.follow else self.fetch_bytes,
            # a lane's consumer moves from unit to unit: a long-polling empty fetch for the previous
            # partition delays the first fetch of the next one by up to this much
            "fetch.wait.max.ms": 10,
            "fetch.min.bytes": 1,
            # a full queue postpones the partition's next fetch by this much (librdkafka: 1000 ms): a
            # queue sized to the budget is full whenever the lane commits, and drains in far less
            # than a second, so the fetcher must come back as soon as the reader makes room
            "fetch.queue.backoff.ms": 10,
        }

    def producer(self) -> dict[str, Any]:
        """The target producer's batching. The writer flushes each batch before its commit, so the
        producer's queue holds at most one batch (`batch_bytes`): that is its bound, and
        queue.buffering.max.kbytes stays at librdkafka's record maximum so that any record the
        broker accepts fits (a smaller queue than one record would never take it)."""
        return {
            "linger.ms": 20,
            "batch.size": min(1_000_000, self.batch_bytes),
            "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
