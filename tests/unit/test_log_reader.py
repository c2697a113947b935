"""LogReader's end rule without brokers: a read ends at the high watermark taken first, waits for
the transactions open below it, and never for those begun later (the real-broker case:
tests/integration/test_state_reads.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Message, TopicPartition

from mirrorflow.errors import ClusterError
from mirrorflow.kafka.connection import ClusterConnection
from mirrorflow.kafka.log_reader import EARLIEST, LATEST, LogReader

HIGH = 9  # 0-4 committed, 5-6 another unit's transaction, 7 committed after it, 8 its commit marker
LOG = {o: f"r{o}".encode() for o in (0, 1, 2, 3, 4, 5, 6, 7, 9, 10)}  # 9-10: a transaction begun later


class Ends:
    """The read_uncommitted consumer: ListOffsets answers the high watermark."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def offsets_for_times(self, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.calls.append("high watermark" if tps[0].offset == LATEST else "log start")
        assert tps[0].offset in (LATEST, EARLIEST)
        return [TopicPartition(tp.topic, tp.partition, HIGH if tp.offset == LATEST else 0) for tp in tps]


class ReadCommitted:
    """A read_committed consumer: hands out records below the last stable offset, which moves
    as `stable` says (one value per poll, the last one kept)."""

    def __init__(self, stable: Iterator[int], calls: list[str]) -> None:
        self.stable, self.lso, self.pos, self.calls = stable, 0, 0, calls

    def assign(self, tps: list[TopicPartition]) -> None:
        self.pos = max(tps[0].offset, 0)

    def unassign(self) -> None:
        pass

    def list_topics(self, topic: str, timeout: float) -> None:
        """The metadata request a read sends first (warm_metadata): no records move."""

    def consume(self, n: int, timeout: float) -> list[Message]:
        self.lso = next(self.stable, self.lso)
        self.calls.append(f"poll (stable {self.lso})")
        out = []
        while self.pos < self.lso and len(out) < n:
            if self.pos in LOG:
                out.append(Message(topic="s", partition=0, offset=self.pos, key=b"k", value=LOG[self.pos]))
            self.pos += 1
        if self.pos == self.lso:
            out.append(Message(topic="s", partition=0, offset=self.pos, error=KafkaError(KafkaError._PARTITION_EOF)))
        return out

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.pos) for tp in tps]


def reader(stable: list[int], calls: list[str]) -> LogReader:
    ends = Ends(calls)
    return LogReader(ClusterConnection("B", {}), ReadCommitted(iter(stable), calls), lambda: ends)  # type: ignore[arg-type,return-value]


def test_a_read_waits_for_the_transaction_open_below_the_high_watermark_and_not_for_later_ones():
    """A read_committed consumer's own end is the last stable offset: another unit's transaction
    open on a shared progress partition hid progress committed after its first record, and a copy
    unit resumed from stale progress (20,000 duplicates after a target SIGTERM)."""
    calls: list[str] = []
    got = [m.offset() for m in reader([5, 5, 9, 9, 9], calls).read("s", [0], timeout=10)]
    assert got == [0, 1, 2, 3, 4, 5, 6, 7]  # 7 was committed after the open transaction began
    # the high watermark once, first; the transaction begun later (9-10) is above it: not waited for
    assert calls == ["high watermark", "log start", "poll (stable 5)", "poll (stable 5)", "poll (stable 9)"]


def test_a_read_whose_open_transaction_does_not_end_fails_and_says_why():
    with pytest.raises(ClusterError) as caught:
        list(reader([5], []).read("s", [0], timeout=0.3))
    assert str(caught.value) == (
        "cluster 'B': timed out reading topic 's' partitions [0] (an open transaction? a crashed writer's "
        "transaction is aborted after transaction.timeout.ms)"
    )
