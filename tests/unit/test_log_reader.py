"""LogReader's end rule without brokers: a read ends at the high watermark taken first, waits for
the transactions open below it, and never for those begun later (the real-broker case:
tests/integration/test_state_reads.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_INVALID, IsolationLevel, KafkaError, KafkaException, Message, TopicPartition

from mirrorflow.errors import ClusterError, TransientError, UnreachableError
from mirrorflow.kafka import log_reader
from mirrorflow.kafka.connection import ClusterConnection
from mirrorflow.kafka.log_reader import EARLIEST, LATEST, LogReader
from mirrorflow.kafka.retry import outage_failure
from mirrorflow_dev.processes import free_port
from tests.fake_time import fake_time

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


class Answered:
    def __init__(self, offset: int) -> None:
        self.offset = offset

    def result(self, timeout: float | None = None) -> Answered:
        return self


class Admin:
    """ListOffsets of a partition whose transaction stays open at `stable` (None: the cluster does not
    answer)."""

    def __init__(self, stable: int | None) -> None:
        self.stable = stable

    def list_offsets(self, req: dict, isolation_level, request_timeout: float) -> dict:
        if self.stable is None:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        committed = isolation_level == IsolationLevel.READ_COMMITTED
        return {tp: Answered(self.stable if committed else HIGH) for tp in req}


class Connection(ClusterConnection):
    def __init__(self, admin: Admin) -> None:
        super().__init__("B", {})
        self._admin = admin

    def admin(self, conf=None, check_timeout=10.0) -> Admin:  # type: ignore[override]
        return self._admin


def reader(stable: list[int], calls: list[str], admin: Admin | None = None) -> LogReader:
    ends = Ends(calls)
    conn = Connection(admin or Admin(None))
    return LogReader(conn, ReadCommitted(iter(stable), calls), lambda: ends)  # type: ignore[arg-type,return-value]


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
    """Where the partition stands says what holds the read: a transaction open since an offset (its
    last stable offset below the high watermark), or nothing open and where the reader stopped; a
    cluster that does not say leaves the question."""
    with pytest.raises(ClusterError) as caught:
        list(reader([5], [], Admin(5)).read("s", [0], timeout=0.3))
    assert str(caught.value) == (
        "cluster 'B': timed out reading topic 's' partitions [0] (partition 0: a transaction open since offset 5 "
        "(high watermark 9); a crashed writer's transaction is aborted after transaction.timeout.ms)"
    )
    with pytest.raises(ClusterError) as caught:
        list(reader([5], [], Admin(HIGH)).read("s", [0], timeout=0.3))
    assert str(caught.value) == (
        "cluster 'B': timed out reading topic 's' partitions [0] (partition 0: no transaction open (last stable "
        "offset = high watermark = 9), this reader at 5 of 9)"
    )
    with pytest.raises(ClusterError) as caught:
        list(reader([5], []).read("s", [0], timeout=0.3))
    assert str(caught.value) == (
        "cluster 'B': timed out reading topic 's' partitions [0] (an open transaction? a crashed writer's "
        "transaction is aborted after transaction.timeout.ms)"
    )


class CutAnswers(Ends):
    """An ends consumer whose first `cut` answers come back without an offset (-1001, OFFSET_INVALID,
    and no error): what librdkafka reports for partitions of an answer cut by a connection reset."""

    def __init__(self, calls: list[str], cut: int) -> None:
        super().__init__(calls)
        self.cut = cut

    def offsets_for_times(self, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        got = super().offsets_for_times(tps, timeout)
        if self.cut:
            self.cut -= 1
            return [TopicPartition(tp.topic, tp.partition, OFFSET_INVALID if tp.partition else tp.offset) for tp in got]
        return got


def test_a_partition_answered_without_an_offset_is_asked_again_never_taken_as_its_end(monkeypatch):
    """An unknown end taken as an offset: a read of (0, -1001) reads nothing and says it read it all."""
    fake_time(monkeypatch, log_reader)
    calls: list[str] = []
    ends = CutAnswers(calls, cut=2)
    r = LogReader(ClusterConnection("B", {}), ReadCommitted(iter([9]), calls), lambda: ends)  # type: ignore[arg-type,return-value]
    assert r.offsets("s", [0, 1], timeout=10) == {0: (0, HIGH), 1: (0, HIGH)}
    assert calls.count("high watermark") == 3  # two answers cut, the third whole


def test_offsets_never_answered_fail_naming_the_cluster_and_the_partitions(monkeypatch):
    fake_time(monkeypatch, log_reader)
    ends = CutAnswers([], cut=10**6)
    r = LogReader(ClusterConnection("B", {}), ReadCommitted(iter([9]), []), lambda: ends)  # type: ignore[arg-type,return-value]
    with pytest.raises(TransientError) as caught:
        r.offsets("s", [0, 1, 2], timeout=0.05)
    assert str(caught.value) == "cluster 'B': cannot list offsets of topic 's' partitions [1, 2]: no offset in the answers"


class AllBrokersDown(Ends):
    """An ends consumer whose cluster's connections are all down (librdkafka's _ALL_BROKERS_DOWN)."""

    def offsets_for_times(self, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        raise KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN, "Failed to get offsets: Local: All broker connections are down"))

    def list_topics(self, topic: str, timeout: float) -> None:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))


def test_a_read_that_cannot_reach_its_cluster_in_its_own_time_is_an_outage_not_final(monkeypatch):
    """Past one read's timeout "cannot reach" is an outage a copy task waits out up to the bound: as an
    UnreachableError (final) it ended a continuous run's task whose lease read timed out so just as
    the target came back from a 5-minute outage (bench_continuous_load.py --outage 300)."""
    fake_time(monkeypatch, log_reader)
    conn = ClusterConnection("B", {"bootstrap.servers": f"127.0.0.1:{free_port()}", "log_level": 0})
    r = LogReader(conn, ReadCommitted(iter([9]), []), lambda: AllBrokersDown([]))  # type: ignore[arg-type,return-value]
    with pytest.raises(TransientError) as caught:
        r.offsets("s", [0], timeout=0.05)
    assert not isinstance(caught.value, UnreachableError)
    assert str(caught.value) == f"cluster 'B': cannot reach {conn.where} (Failed to get offsets: Local: All broker connections are down)"
    assert outage_failure(caught.value)
