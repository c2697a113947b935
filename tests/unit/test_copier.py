"""The copier's parts without brokers: ranges and gaps, the reader's stop rules and batch boundaries,
the writer's target offsets (fast and careful path), the crash-point seam."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace
from unittest.mock import patch

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from mirrorflow.errors import MirrorflowError, RecordTooLargeError, TransactionAbortedError
from mirrorflow.kafka.retry import Outage
from mirrorflow.replication.task import copy_transaction, faults
from mirrorflow.replication.task.copier import PartitionCopy, UnitResult, ranges_to_copy, retention_gap
from mirrorflow.replication.plan.run_plan import Unit
from mirrorflow.replication.task.reader import BatchLimits, RangeReader, Room, segments
from mirrorflow.replication.task.copy_transaction import Claim, CopyTransaction
from mirrorflow.replication.task.task_producer import SlotProducer
from mirrorflow.replication.task.transaction_writer import PartBatch, TransactionWriter, runs_at, runs_of
from mirrorflow.replication.task.write_failures import FatalError
from mirrorflow.state.offset_map import Run
from mirrorflow.state.records import Progress

NO_LIMITS = BatchLimits(1_000_000, 1 << 40, 1 << 40)


def msg(offset: int, value: bytes | None = b"v", ts: int = 1000) -> Message:
    return Message(
        topic="t", partition=0, offset=offset, key=b"k", value=value, headers=[("h", b"1")], timestamp=(1, ts)
    )


def eof(offset: int) -> Message:
    return Message(topic="t", partition=0, offset=offset, error=KafkaError(KafkaError._PARTITION_EOF))


class FakeConsumer:
    """Hands out `log` (messages and error events) `per_poll` at a time from the assigned offset."""

    def __init__(self, log: list[Message], per_poll: int = 10_000, end: int | None = None) -> None:
        self.log, self.per_poll, self.i = log, per_poll, 0
        self.end = end if end is not None else (log[-1].offset() + 1 if log else 0)
        self.polls = 0

    def assign(self, tps):
        self.i = next(i for i, m in enumerate([*self.log, None]) if m is None or m.offset() >= tps[0].offset)

    def consume(self, n, timeout):
        self.polls += 1
        out = self.log[self.i : self.i + min(n, self.per_poll)]
        self.i += len(out)
        return out

    def position(self, tps):
        return [SimpleNamespace(offset=self.end if self.i >= len(self.log) else self.log[self.i].offset())]


def read(reader: RangeReader, a: int, b: int) -> list[tuple[int, int, list[int], str]]:
    out = []
    for batch in reader.batches(a, b):
        offsets = [m.offset() for m in batch]
        out.append((batch.src_from, batch.src_to, offsets, batch.end))
    return out


# -- pure parts ------------------------------------------------------------------------------------
def test_segments_and_runs():
    assert segments([]) == []
    assert segments([3, 4, 5, 9, 10, 12]) == [(3, 3), (9, 2), (12, 1)]
    assert runs_at([(3, 3), (9, 2)], 100) == [Run(3, 100, 3), Run(9, 103, 2)]
    # careful path: a target gap splits a run even where the source is consecutive
    assert runs_of([(3, 100), (4, 101), (5, 103), (9, 104)]) == [Run(3, 100, 2), Run(5, 103, 1), Run(9, 104, 1)]


def test_ranges_to_copy_continue_after_the_committed_progress():
    u = Unit("t", 0, "A.t", 10, 100)
    assert ranges_to_copy(u, Progress.empty("t", 0)) == [(10, 100)]
    assert ranges_to_copy(u, Progress("t", 0, 40, ((0, 40), (60, 70)), 5)) == [(40, 60), (70, 100)]
    assert ranges_to_copy(u, Progress("t", 0, 100, ((0, 100),), 5)) == []
    # a fresh partition with nothing to copy anchors its progress at the initial position
    assert ranges_to_copy(Unit("t", 0, "A.t", 7, 7), Progress.empty("t", 0)) == [(7, 7)]


def test_a_partitions_units_never_plan_a_hole_below_the_progress_twice():
    """A failback seeds a ledger with holes (records written on B outside A->B) below the reverse
    flow's next; the planner cut two units of the partition. Every unit copies from the progress's
    next, so both would read the hole: the second leaves out what the first reads."""
    units = [Unit("t", 0, "t", 18, 31), Unit("t", 0, "t", 31, 54)]
    results = [UnitResult("t", 0, "t", "ok", u.start, u.end) for u in units]
    [pc] = PartitionCopy.of(units, results)
    progress = Progress("t", 0, 18, ((0, 18), (20, 31), (42, 47)), 30)
    assert pc.plan(progress, 0, follow=False)
    assert [(r.unit, r.a, r.b) for r in pc.ranges] == [(0, 18, 20), (1, 31, 42), (1, 47, 54)]
    # a backlog cut into units of max records: the second starts where the first ends, not at next
    units = [Unit("t", 0, "t", 40, 50), Unit("t", 0, "t", 50, 60)]
    [pc] = PartitionCopy.of(units, [UnitResult("t", 0, "t", "ok", u.start, u.end) for u in units])
    assert pc.plan(Progress("t", 0, 40, ((0, 40),), 40), 0, follow=False)
    assert [(r.unit, r.a, r.b) for r in pc.ranges] == [(0, 40, 50), (1, 50, 60)]
    # a fresh partition's anchor (an empty range) is kept
    anchor = [Unit("t", 1, "t", 7, 7)]
    [pa] = PartitionCopy.of(anchor, [UnitResult("t", 1, "t", "ok", 7, 7)])
    assert pa.plan(Progress.empty("t", 1), 0, follow=False) and [(r.a, r.b) for r in pa.ranges] == [(7, 7)]


def test_retention_gap():
    assert retention_gap(50, 100, 20) == (50, None)
    assert retention_gap(50, 100, 80) == (80, (50, 80))
    assert retention_gap(50, 100, 120) == (100, (50, 100))  # all of it gone: only a gap event


# -- the reader ------------------------------------------------------------------------------------
def test_batches_cover_the_range_with_gaps_and_keep_records_read_ahead():
    log = [msg(o) for o in (0, 1, 2, 5, 6, 7, 8, 11)] + [eof(13)]  # 3-4, 9-10: markers; 12: aborted
    reader = RangeReader(FakeConsumer(log, end=13), "t", 0, BatchLimits(3, 1 << 40, 1 << 40))
    assert read(reader, 0, 13) == [(0, 3, [0, 1, 2], "full"), (3, 8, [5, 6, 7], "full"), (8, 13, [8, 11], "range")]


def test_a_byte_limit_inside_one_poll_loses_no_record():
    log = [msg(o, b"x" * 10) for o in range(10)] + [eof(10)]  # 11 bytes per record, one poll
    reader = RangeReader(FakeConsumer(log), "t", 0, BatchLimits(100, 30, 1 << 40))
    batches = read(reader, 0, 10)
    assert [o for *_, offsets, _ in batches for o in offsets] == list(range(10))
    assert [(a, b) for a, b, *_ in batches] == [(0, 3), (3, 6), (6, 9), (9, 10)]


def test_range_end_wins_over_a_limit_reached_on_its_last_record():
    reader = RangeReader(FakeConsumer([msg(o) for o in range(4)]), "t", 0, BatchLimits(2, 1 << 40, 1 << 40))
    assert read(reader, 0, 4) == [(0, 2, [0, 1], "full"), (2, 4, [2, 3], "range")]


def test_an_error_event_inside_a_poll_keeps_the_records_on_both_sides_in_order():
    """A poll's records move as one run unless an error event sits among them: the records before it
    go first, the error is handled, the rest follow; a record past the range's end ends it."""
    transient = Message(topic="t", partition=0, offset=-1, error=KafkaError(KafkaError._TRANSPORT))
    log = [msg(0), msg(1), msg(2), transient, msg(3), msg(4), msg(5)]
    reader = RangeReader(FakeConsumer(log), "t", 0, BatchLimits(2, 1 << 40, 1 << 40))
    assert read(reader, 0, 5) == [(0, 2, [0, 1], "full"), (2, 4, [2, 3], "full"), (4, 5, [4], "range")]
    reader = RangeReader(FakeConsumer([msg(0), msg(1), transient, eof(2)]), "t", 0, NO_LIMITS)
    assert read(reader, 0, 2) == [(0, 2, [0, 1], "range")]


def test_unit_bytes_stop_the_unit_after_the_batch():
    log = [msg(o, b"x" * 9) for o in range(10)]  # 10 bytes per record
    reader = RangeReader(FakeConsumer(log), "t", 0, BatchLimits(3, 1 << 40, 45))
    assert read(reader, 0, 10) == [(0, 3, [0, 1, 2], "full"), (3, 5, [3, 4], "unit")]
    assert reader.unit_full and reader.unit_bytes == 50


def test_stop_rules_record_past_the_end_position_and_empty_range():
    reader = RangeReader(FakeConsumer([msg(o) for o in range(10)]), "t", 0, NO_LIMITS)
    assert read(reader, 2, 5) == [(2, 5, [2, 3, 4], "range")]
    # trailing markers: no message, the position passes the end
    consumer = FakeConsumer([msg(0), msg(1)], end=4)
    assert read(RangeReader(consumer, "t", 0, NO_LIMITS), 0, 4) == [(0, 4, [0, 1], "range")]
    # a >= b: one empty batch (a gap event), the consumer is not used
    consumer = FakeConsumer([])
    assert read(RangeReader(consumer, "t", 0, NO_LIMITS), 7, 7) == [(7, 7, [], "range")]
    assert consumer.polls == 0


def test_offset_reset_and_silence_are_errors():
    reset = Message(topic="t", partition=0, offset=1, error=KafkaError(KafkaError._AUTO_OFFSET_RESET))
    reader = RangeReader(FakeConsumer([msg(0), reset]), "t", 0, NO_LIMITS)
    with pytest.raises(MirrorflowError, match=r"t\[0\]: offset 1 is no longer on the source"):
        read(reader, 0, 5)
    reader = RangeReader(FakeConsumer([msg(0)], end=1), "t", 0, NO_LIMITS, idle_timeout=0.0)
    with pytest.raises(MirrorflowError, match=r"no progress reading offsets 1\.\.5"):
        read(reader, 0, 5)


# -- the writer ------------------------------------------------------------------------------------
class FakeProducer:
    """Appends to one target partition; `skip_after` leaves a target gap after that many records,
    values longer than `max_bytes` are rejected as too large."""

    def __init__(self, skip_after: int | None = None, max_bytes: int = 1 << 30) -> None:
        self.skip_after, self.max_bytes = skip_after, max_bytes
        self.next, self.pending, self.log, self.calls = 100, [], [], []

    def produce(self, topic, value=None, key=None, partition=-1, on_delivery=None, timestamp=0, headers=None):
        self.pending.append((topic, value, key, partition, on_delivery, timestamp, headers))

    def flush(self, timeout=None):
        for topic, value, _key, _partition, cb, ts, headers in self.pending:
            if topic != "A.t":  # a state record
                self.calls.append(("state", topic))
                continue
            if value is not None and len(value) > self.max_bytes:
                err = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
                cb and cb(err, None)
                continue
            self.log.append((self.next, value, ts, headers))
            cb and cb(None, SimpleNamespace(offset=lambda o=self.next: o))
            self.next += 1
            if self.skip_after is not None and len(self.log) == self.skip_after:
                self.next += 1
        self.pending.clear()
        return 0

    def poll(self, timeout=0):
        return 0

    def list_topics(self, topic=None, timeout=None):  # the writer connects before init_transactions
        return SimpleNamespace(topics={})

    def __getattr__(self, name):  # init/begin/commit/abort_transaction
        return lambda *a: self.calls.append((name,))


class FakeState:
    progress_partitions = map_partitions = 1

    def __init__(self):
        self.written = []

    def write(self, producer, progress, entry):
        self.written.append((progress, entry))


def writer_for(producer: FakeProducer) -> tuple[TransactionWriter, FakeState]:
    flow = SimpleNamespace(exactly_once=True, id="a-b", client_name="a-b", state_name="a-b", target="B",
                           name="A->B", props={"task.memory.bytes": 256 << 20, "transaction.max.bytes": 32 << 20},
                           client_overrides=lambda side, kind: {})
    clients = SimpleNamespace(flow=flow, partitions=lambda side, topic, refresh=False: 1)
    slot = SlotProducer("mirrorflow-a-b-task/g1/0", producer, FatalError(), "key")
    parts = [("A.t", 0), ("mirrorflow.a-b.progress.internal", 0), ("mirrorflow.a-b.offset-map.internal", 0)]
    # the brokers' answer (last stable offset below the high watermark) taken as: the map's and the
    # progress partition hold a transaction open, the target partition does not
    pending = patch.object(copy_transaction, "open_transactions", lambda _clients, tps: [k for k in tps if k != parts[0]])
    txn = CopyTransaction(flow, slot)
    with pending:
        txn.establish(clients, 0, parts, Claim("", 0), Outage(300), lambda: None)
    state = FakeState()
    # a task first writes one aborted transaction over those of its target, progress and map
    # partitions that hold a transaction open (it ends what an earlier attempt of the
    # transactional.id left pending), then commits its claim, before its first batch
    assert producer.calls == [("init_transactions",), ("begin_transaction",),
                              ("state", "mirrorflow.a-b.progress.internal"),
                              ("state", "mirrorflow.a-b.offset-map.internal"), ("abort_transaction",),
                              ("begin_transaction",), ("commit_transaction",)]
    assert producer.log == []  # no aborted record on the target partition: nothing was pending there
    producer.next, producer.calls = 100, []
    w = TransactionWriter(txn, state, lambda unit: 100)
    return w, state


def write_all(w: TransactionWriter, log: list[Message], limits: BatchLimits = NO_LIMITS) -> Progress:
    """The task's rounds, one partition: each batch one round (begin, send while read, commit)."""
    unit = Unit("t", 0, "A.t", 0, 100)
    progress = {("t", 0): Progress("t", 0, 0, (), 100)}
    for batch in RangeReader(FakeConsumer(log), "t", 0, limits).batches(0, log[-1].offset() + 1):
        w.begin()
        part = PartBatch(unit, batch)
        w.send(part)
        w.commit([part], progress)
        if part.error is not None:
            raise part.error
    return progress[("t", 0)]


def test_fast_path_maps_source_segments_onto_target_offsets():
    p = FakeProducer()
    w, state = writer_for(p)
    log = [msg(0, ts=0), msg(1), msg(2), msg(5), msg(6, value=None)]
    progress = write_all(w, log)
    assert [(off, value, ts) for off, value, ts, _ in p.log] == [
        (100, b"v", 0),
        (101, b"v", 1000),
        (102, b"v", 1000),
        (103, b"v", 1000),
        (104, None, 1000),
    ]
    assert all(h == [("h", b"1")] for *_, h in p.log)
    ((_, entry),) = state.written
    assert entry.runs == (Run(0, 100, 3), Run(5, 103, 2)) and (entry.src_from, entry.src_to) == (0, 7)
    assert progress.next == 7 and progress.tgt_end == 105 and progress.records == 5
    assert [c for c in p.calls if c[0] != "state"] == [("begin_transaction",), ("commit_transaction",)]  # after start


def test_a_target_gap_takes_the_careful_path_and_stays_exact():
    p = FakeProducer(skip_after=2)
    w, state = writer_for(p)
    write_all(w, [msg(o) for o in range(4)])
    ((_, entry),) = state.written
    # the first attempt (100, 101, gap, 103, 104) was aborted; the careful one follows it
    assert ("abort_transaction",) in p.calls
    assert entry.runs == (Run(0, 105, 4),) and entry.tgt_end == 109


class CutShort(FakeProducer):
    """An outage: once `delivered` is set, a flush delivers that many copied records and the rest
    time out (their reports fail with _MSG_TIMED_OUT; the first ones are on the target)."""

    delivered: int | None = None

    def flush(self, timeout=None):
        if self.delivered is None:
            return super().flush(timeout)
        data = [x for x in self.pending if x[0] == "A.t"]
        self.pending = [x for x in self.pending if x[0] != "A.t"] + data[: self.delivered]
        super().flush(timeout)
        for *_, cb, _ts, _headers in data[self.delivered :]:
            cb and cb(KafkaError(KafkaError._MSG_TIMED_OUT), None)
        return 0


def test_a_batch_an_outage_cut_short_is_mapped_where_the_new_producer_wrote_it():
    """The loaded broker-restart failure asked whether a batch redone by a NEW producer can be
    mapped onto the first attempt's offsets: no. The cut-short attempt commits nothing (no state,
    no commit); the next writer's entry holds its own delivery reports' offsets only."""
    first = CutShort()
    w, state = writer_for(first)
    first.delivered = 2  # 100, 101 land (later aborted); 102, 103 time out
    log = [msg(o) for o in range(4)]
    with pytest.raises(TransactionAbortedError, match=r"t\[0\]: the transaction of offsets 0\.\. on cluster 'B'"):
        write_all(w, log)
    assert state.written == [] and ("commit_transaction",) not in first.calls
    second = FakeProducer()
    w, state = writer_for(second)
    second.next = 103  # after the aborted 100-101 and their abort marker (102)
    write_all(w, log)
    ((_, entry),) = state.written
    assert entry.runs == (Run(0, 103, 4),) and entry.tgt_end == 107
    assert [off for off, *_ in second.log] == [103, 104, 105, 106]


def test_a_record_too_large_is_named_and_nothing_is_committed():
    p = FakeProducer(max_bytes=100)
    w, state = writer_for(p)
    with pytest.raises(
        RecordTooLargeError,
        match=r"record t\[0\] offset 2 \(201 bytes\) is larger than target "
        r"topic 'A\.t' on cluster 'B' accepts",
    ):
        write_all(w, [msg(0), msg(1), msg(2, b"x" * 200), msg(3)])
    assert state.written == [] and ("commit_transaction",) not in p.calls


# -- crash points ----------------------------------------------------------------------------------
def test_crash_spec_and_environment():
    assert faults.from_env({}) is faults.NO_FAULTS
    point = faults.from_env({faults.CRASH_ENV: "before_commit:100", faults.CRASH_ONCE_ENV: "/tmp/m"})
    assert point == faults.CrashPoint("before_commit", 100, "/tmp/m")
    assert point.triggers("before_commit", 100) and not point.triggers("before_commit", 99)
    assert not point.triggers("after_commit", 500)
    with pytest.raises(ValueError, match="unknown crash point 'before_comit'"):
        faults.parse_crash_spec("before_comit")
    hang = faults.from_env({faults.HANG_ENV: "after_commit", faults.CRASH_ONCE_ENV: "/tmp/m"})
    assert hang == faults.CrashPoint("after_commit", 0, "/tmp/m", hang=True)
    with pytest.raises(ValueError, match="MIRRORFLOW_TEST_HANG='after_comit': unknown crash point"):
        faults.from_env({faults.HANG_ENV: "after_comit"})


def test_a_crash_point_kills_the_process_once_per_marker(tmp_path):
    marker = tmp_path / "crashed"
    code = (
        "from mirrorflow.replication.task.faults import CrashPoint; "
        f"CrashPoint('after_flush', 5, {str(marker)!r}).reached('after_flush', 5)"
    )
    run = lambda: subprocess.run([sys.executable, "-c", code], capture_output=True).returncode  # noqa: E731
    assert run() == -9 and marker.exists()
    assert run() == 0  # the marker exists: the rerun passes


def test_a_batch_counted_before_an_outage_but_not_kept_by_the_broker_is_not_counted_twice():
    from types import SimpleNamespace

    from mirrorflow.replication.task.copier import UnitResult
    from mirrorflow.state.records import Progress

    def batch(a, b):
        return SimpleNamespace(src_from=a, src_to=b, records=[object()] * (b - a), nbytes=10 * (b - a),
                               last_timestamp=5, first_timestamp=0)

    r = UnitResult("t", 0, "A.t", "ok", 0, 300)
    kept = Progress("t", 0, 100, ((0, 100),), 101)
    r.committed(batch(0, 100), kept)
    r.committed(batch(100, 200), kept)  # reported committed, then the outage: the broker did not keep it
    r.recount(kept)
    assert (r.records, r.bytes, r.transactions) == (100, 1000, 1)
    r.committed(batch(100, 200), kept)  # copied again after the resume
    r.recount(Progress("t", 0, 200, ((0, 200),), 202))
    assert (r.records, r.transactions) == (200, 2)
    assert "_batches" not in r.to_dict()


# -- no holes --------------------------------------------------------------------------------------
def test_a_unit_cut_short_defers_the_partitions_later_units_to_the_next_run():
    """A unit that reaches unit.max.bytes leaves its rest AND the partition's later units to the next
    run: copying a later unit now would put the rest behind a copied range, a hole."""
    units = [Unit("t", 0, "t", 0, 1000), Unit("t", 0, "t", 1000, 2000), Unit("t", 0, "t", 2000, 2500)]
    results = [UnitResult("t", 0, "t", "ok", u.start, u.end) for u in units]
    [pc] = PartitionCopy.of(units, results)
    assert pc.plan(Progress.empty("t", 0), 0, follow=False)
    assert [(r.unit, r.a, r.b) for r in pc.ranges] == [(0, 0, 1000), (1, 1000, 2000), (2, 2000, 2500)]
    pc.done_units.add(0)  # its last batch (the one that reached the bound) committed
    pc.advance(True, 98)
    assert pc.read_all and pc.finished
    assert [r.status for r in results] == ["partial", "partial", "partial"]
    assert results[0].note == "unit.max.bytes reached at source offset 98: the next run continues there"
    assert results[2].note == "deferred to the next run (unit.max.bytes reached at offset 98)"
    # the next attempt (after an outage) plans them again from the committed progress
    assert pc.plan(Progress.empty("t", 0).advanced(0, 98, 98, 98, 1), 0, follow=False)
    assert [(r.unit, r.a, r.b) for r in pc.ranges] == [(0, 98, 1000), (1, 1000, 2000), (2, 2000, 2500)]
    assert [r.status for r in results] == ["ok", "ok", "ok"] and results[2].note is None


def test_a_range_that_gives_nothing_before_the_rounds_deadline_ends_empty_and_reads_on():
    """A round's transaction holds other partitions' records: a partition with no record yet must not
    keep it open until the broker aborts it (up to the outage bound); it ends empty ("wait") and
    reads on in the next round."""
    consumer = FakeConsumer([], end=0)  # position 0 < 5: the source has nothing for us right now
    reader = RangeReader(consumer, "t", 0, NO_LIMITS)
    reader.open(0, 5)
    batch = reader.next_batch(Room(100, 1 << 20, time.monotonic() - 1))
    assert list(batch) == [] and batch.end == "wait" and (batch.src_from, batch.src_to) == (0, 0)
    assert not reader.done  # the range goes on
    consumer.log, consumer.end = [msg(o) for o in range(5)], 5
    batch = reader.next_batch(Room(100, 1 << 20, time.monotonic() + 30))
    assert [m.offset() for m in batch] == [0, 1, 2, 3, 4] and batch.end == "range" and batch.src_to == 5


class FailingWriter:
    """A writer whose send() fails the source read of its partition (as RangeReader does)."""

    flow = SimpleNamespace(props={"transaction.max.bytes": 1 << 30}, source="A", target="B")

    def send(self, part):
        raise MirrorflowError("t[0]: consuming the source failed: Broker: Topic authorization failed")


def test_a_partition_whose_source_read_failed_is_failed_whatever_becomes_of_its_round():
    """Marked failed with the error at once: the round may then fail (an outage) and be redone
    without it; its results never say ok with 0 records."""
    from mirrorflow.replication.task.task_rounds import Lane, Round

    units = [Unit("t", 0, "A.t", 0, 10)]
    results = [UnitResult("t", 0, "A.t", "ok", 0, 10)]
    [pc] = PartitionCopy.of(units, results)
    assert pc.plan(Progress.empty("t", 0), 0, follow=False)
    rnd = Round(FailingWriter(), NO_LIMITS, [pc])
    lane = Lane(FakeConsumer([msg(o) for o in range(10)]), FailingWriter.flow, NO_LIMITS)
    lane.fill(rnd)
    assert pc.failed and rnd.failure is None
    assert results[0].status == "failed" and "Topic authorization failed" in (results[0].error or "")
    assert len(rnd.parts) == 1 and rnd.parts[0].error is not None  # the writer leaves it out of the commit


def test_a_round_begun_after_an_abort_the_target_never_answered_names_the_outage():
    """librdkafka refuses the next begin_transaction with "Conflicting abort_transaction API call is
    already in progress" when the last abort timed out in an outage: the ride-out names the outage."""
    producer = FakeProducer()
    w, _ = writer_for(producer)

    def no_answer(*a):
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Transactional API operation (abort_transaction) timed out"))

    def conflict(*a):
        raise KafkaException(KafkaError(KafkaError._CONFLICT, "Conflicting abort_transaction API call is already in progress"))

    producer.abort_transaction, producer.begin_transaction = no_answer, conflict
    w.txn.give_up()
    with pytest.raises(TransactionAbortedError, match=r"cluster 'B' did not answer the abort of the last transaction "
                       r"\(Transactional API operation \(abort_transaction\) timed out\): it is unavailable"):
        w.begin()


class StaleMetadataProducer(FakeProducer):
    """A producer kept from an earlier run: it refuses a partition its metadata lacks ("Unknown
    partition", at once, as librdkafka does) until a metadata request brings it (`appears`: after how
    many requests, None: never)."""

    def __init__(self, appears: int | None) -> None:
        super().__init__()
        self.known, self.appears, self.asked = {0}, appears, 0

    def produce(self, topic, value=None, key=None, partition=-1, **kw):
        if topic == "A.t" and partition not in self.known:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        super().produce(topic, value, key, partition, **kw)

    def list_topics(self, topic=None, timeout=None):
        if topic == "A.t":
            self.asked += 1
            if self.appears is not None and self.asked >= self.appears:
                self.known.add(1)
        parts = {p: None for p in self.known} if topic == "A.t" else {}
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions=parts)})


def test_a_partition_the_producers_metadata_lacks_is_asked_for_again_before_the_record_is_refused():
    p = StaleMetadataProducer(appears=2)  # the second request holds it (a broker's metadata catching up)
    w, _ = writer_for(p)
    w._produce("A.t", 1, msg(0), None)
    assert p.asked == 2 and [(x[0], x[3]) for x in p.pending if x[0] == "A.t"] == [("A.t", 1)]


def test_a_partition_that_never_appears_is_refused_and_not_asked_for_again_for_each_record(monkeypatch):
    from mirrorflow.replication.task import transaction_writer

    monkeypatch.setattr(transaction_writer, "METADATA_WAIT_S", 2.0)  # the wait the next record must not repeat
    p = StaleMetadataProducer(appears=None)
    w, _ = writer_for(p)
    with pytest.raises(KafkaException, match="Unknown partition"):
        w._produce("A.t", 1, msg(0), None)
    asked = p.asked
    assert asked >= 1
    started = time.monotonic()
    with pytest.raises(KafkaException, match="Unknown partition"):
        w._produce("A.t", 1, msg(1), None)  # the batch's next record: refused at once
    assert p.asked == asked and time.monotonic() - started < 1.0
