"""Reading a source range for the copier: the stop rules of [a, b) and where a batch ends.

The source is read with isolation.level=read_committed, so a range has offsets without a record:
transaction markers, aborted records, compaction holes. A `Batch` therefore covers a source range
[src_from, src_to) that includes such gaps, and holds the committed records in it; the batches of
a range cover it without holes or overlaps, the last one ends at b.

Stop rules: the range is done when a record at or past b arrives, when the consumer reports
end-of-partition at or past b, or when its position passes b without a message (trailing
markers, aborted records). auto.offset.reset=error, so a reset means source retention deleted the
position while it was being copied (the next run records the gap). A source that does not answer
(a broker restart, a leadership move: consumer errors librdkafka recovers from) is waited for up
to `broker.outage.max.seconds`; past it the read fails, naming the source cluster. While it waits,
the reader goes on with a new consumer every `STALL_S` (a third of the bound at most): librdkafka's
fetcher can stay stopped after a single-broker source restarts, the client alive and silent, until the
client is made again (confluentinc/librdkafka#5153; a full-suite run of
tests/integration/test_broker_restart.py read nothing for 120 s after the restart, twice).
(kafka.log_reader reads whole partitions to an end taken up front, for state; this loop reads
one range as fast as the raw pipe and hands every record on at once.)

Pipelining: a batch is filled while it is iterated, so each poll's records reach the writer as soon
as they are read, inside the open transaction; the batch's range, records and size are final once its
iteration has ended. Records move a poll's run at a time (a list, not a generator step per record:
the copy's Python cost per record is what decides its CPU against a raw pipe's, bench/bench_vs_raw.py).
Where a batch ends is decided in one place, `RangeReader._fill`: the range's
end first, then `unit.max.bytes` (the unit stops early: `unit_full`), then
`transaction.max.records` / `transaction.max.bytes`, then time: a batch with records ends once its
transaction has been open for half of `transaction.timeout.ms`, also while the source is slow or
away (idle polls reach `_fill` as `None`). The transaction opens on the broker with its first
record, so a slow source can no longer keep it open until the broker aborts it.

Following (continuous runs, `Follow`): a range that ends at `OPEN_END` has no end; a batch starts
only with its first record (a quiet partition opens no transaction), ends once it has been open for
`continuous.poll.ms` or the source has nothing more right now, and the range ends when `stop()` says
so (between polls: the batch read so far is committed, ending "stop"). A quiet source is not an
outage there; the run's deadline bounds the wait.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

from confluent_kafka import KafkaError, Message, TopicPartition

from mirrorflow.config import FlowConfig
from mirrorflow.errors import BrokerUnavailableError, MirrorflowError
from mirrorflow.kafka.retry import transient_error
from mirrorflow.state.names import COPIER, reader_group

log = logging.getLogger(__name__)

# The source consumer's prefetch and the batch size come from the task's memory budget
# (replication.task.budget.CopyBudget: `task.memory.bytes` over the partitions the task reads at once);
# a user's `consumer.*` overrides win over it, `consumer_required` is applied on top of them.
# records per consume() call: a lane holds one call's records at a time, and a batch reads the clock
# (its time limit) after each call's records (a followed batch: after each record once its time is up)
FETCH_RECORDS = 1_000
POLL_TIMEOUT_S = 0.05  # markers take offsets without a message: then the position tells
TRANSACTION_TIMEOUT_MS = 30_000  # the producer's transaction.timeout.ms unless the flow overrides it
OUTAGE_S = 300.0  # broker.outage.max.seconds
OPEN_END = 2**63 - 1  # the end of a followed range (continuous runs): there is none
STALL_S = 20.0  # a one-shot read that gets no record this long goes on with a new consumer


@dataclass(frozen=True)
class Follow:
    """How a continuous run follows a partition: `stop()` is polled between source polls (cheap:
    the run's deadline, a flow pause, SIGTERM, see replication.task.follow); `batch_s` bounds how long a
    batch's transaction collects records before it commits."""

    stop: Callable[[], bool]
    batch_s: float
    why_stopped: Callable[[], str | None] = lambda: None  # why it stopped before the run's deadline


def transaction_timeout_s(flow: FlowConfig) -> float:
    """The copy producer's transaction.timeout.ms (the flow's `target.producer.` override), in s."""
    ms = flow.client_overrides("target", "producer").get("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
    return int(ms) / 1000.0


def outage_bound_s(flow: FlowConfig) -> float:
    return float(flow.props.get("broker.outage.max.seconds", OUTAGE_S))


def consumer_required(flow: FlowConfig) -> dict[str, Any]:
    """The settings the stop rules rely on (read_committed, end-of-partition events, reset = error)."""
    return {
        "group.id": reader_group(flow, COPIER),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    }


@dataclass(frozen=True)
class BatchLimits:
    records: int  # transaction.max.records
    bytes: int  # transaction.max.bytes
    unit_bytes: int  # unit.max.bytes
    open_s: float = TRANSACTION_TIMEOUT_MS / 2000  # how long a batch's transaction may stay open while reading
    idle_s: float = OUTAGE_S  # broker.outage.max.seconds: how long the source may give nothing

    @classmethod
    def of(cls, flow: FlowConfig, batch_bytes: int | None = None) -> BatchLimits:
        """The flow's limits; `batch_bytes` (the task's memory budget) may lower transaction.max.bytes."""
        p = flow.props
        open_s = transaction_timeout_s(flow) / 2
        if p.get("transaction.boundary") == "interval":  # MM2's interval boundary: a time bound
            open_s = min(open_s, int(p["transaction.boundary.interval.ms"]) / 1000)
        return cls(
            int(p["transaction.max.records"]),
            min(int(p["transaction.max.bytes"]), batch_bytes or int(p["transaction.max.bytes"])),
            int(p["unit.max.bytes"]),
            open_s,
            outage_bound_s(flow),
        )


BatchEnd = Literal["open", "range", "unit", "full", "time", "stop", "wait"]


@dataclass(frozen=True)
class Room:
    """What a round of a copy task (one transaction) leaves a batch: records, bytes, and when it
    must end (time.monotonic()); `until_deadline`: a followed batch keeps reading until then (it
    does not end when the source is quiet for a moment: the round commits at its deadline)."""

    records: int
    bytes: int
    deadline: float
    until_deadline: bool = False


class Batch:
    """The source records of one transaction: [src_from, src_to), gaps included. Iterate it once,
    to the end; what it holds is final then."""

    __slots__ = ("src_from", "src_to", "records", "nbytes", "end", "_filler")

    def __init__(self, src_from: int) -> None:
        self.src_from = self.src_to = src_from
        self.records: list[Any] = []
        self.nbytes = 0  # keys and values
        self.end: BatchEnd = "open"  # why it ended: b reached, unit.max.bytes, a transaction limit, time
        self._filler: Iterator[list[Any]] = iter(())  # its records in runs; set by the RangeReader that made it

    def __iter__(self) -> Iterator[Any]:
        return itertools.chain.from_iterable(self._filler)

    @property
    def first_timestamp(self) -> int:
        return self.records[0].timestamp()[1] if self.records else -1

    @property
    def last_timestamp(self) -> int:
        return self.records[-1].timestamp()[1] if self.records else -1

    def segments(self) -> list[tuple[int, int]]:
        return segments(m.offset() for m in self.records)


def segments(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """(start, count) of each stretch of consecutive offsets, in order."""
    out: list[tuple[int, int]] = []
    start = nxt = -1
    for off in offsets:
        if off != nxt:
            if nxt >= 0:
                out.append((start, nxt - start))
            start = off
        nxt = off + 1
    if nxt >= 0:
        out.append((start, nxt - start))
    return out


def record_size(m: Any) -> int:
    v, k = m.value(), m.key()
    return (len(v) if v else 0) + (len(k) if k else 0)


def _pieces(msgs: list[Any]) -> list[tuple[list[Any], Any, KafkaError | None]]:
    """A poll's messages as runs of records, each with the error event that follows it (None, None at the
    end): one run, the whole poll, unless an error event sits among them."""
    errors = list(map(Message.error, msgs))
    if not any(errors):  # any(): a KafkaError is true, and compares badly with None
        return [(msgs, None, None)]
    out: list[tuple[list[Any], Any, KafkaError | None]] = []
    run: list[Any] = []
    for m, err in zip(msgs, errors, strict=True):
        if err is None:
            run.append(m)
        else:
            out.append((run, m, err))
            run = []
    if run:
        out.append((run, None, None))
    return out


def _before(run: list[Any], b: int) -> tuple[list[Any], bool]:
    """The records of `run` (in offset order) before offset b, and whether one at or past b came."""
    if run[-1].offset() < b:
        return run, False
    k = len(run)
    while k and run[k - 1].offset() >= b:
        k -= 1
    return run[:k], True


def _taken(run: list[Any], most: int, room: int) -> tuple[int, int]:
    """How many records of `run` a batch takes (`most` at most, up to the one that fills `room` bytes or
    passes it), and their bytes."""
    take = min(len(run), most)
    size = run_bytes(run) if take == len(run) else run_bytes(run[:take])
    if size < room:
        return take, size
    size = 0  # the byte limit is reached inside the run: at which record
    for i in range(take):
        size += record_size(run[i])
        if size >= room:
            return i + 1, size
    return take, size


def run_bytes(run: list[Any]) -> int:
    """The keys' and values' bytes of `run` (record_size over it, with the loops in C)."""
    return sum(map(len, filter(None, map(Message.value, run)))) + sum(map(len, filter(None, map(Message.key, run))))


class RangeReader:
    """Reads ranges of one source partition with the unit's consumer, in batches."""

    def __init__(
        self,
        consumer: Any,
        topic: str,
        partition: int,
        limits: BatchLimits,
        idle_timeout: float | None = None,
        cluster: str = "source",
        follow: Follow | None = None,
        renew: Callable[[Any], Any] | None = None,
    ) -> None:
        self.consumer, self.topic, self.partition = consumer, topic, partition
        self.renew = renew  # a new consumer in place of the one given (which it closes); None: never
        self._renewed_at = 0.0
        self.follow = follow
        if follow is not None:  # a run bounded in time: batches of batch_s, no unit.max.bytes
            limits = replace(limits, open_s=min(limits.open_s, follow.batch_s), unit_bytes=OPEN_END)
        self.limits = limits
        self.idle_timeout = limits.idle_s if idle_timeout is None else idle_timeout
        self.cluster = cluster  # the source's alias, for messages
        self.unit_bytes = 0  # read by this unit so far, all ranges
        self.unit_full = False  # unit.max.bytes reached: the unit stops after the current batch
        self.done = True  # nothing open to read (see `open`)

    def batches(self, a: int, b: int) -> Iterator[Batch]:
        """The batches covering [a, b), in order (one empty batch when a >= b, e.g. a gap event).
        Iterate each batch to its end before taking the next one."""
        self.open(a, b)
        while True:
            batch = self.next_batch()
            if batch is None:
                return
            yield batch
            self.batch_done(batch)

    def open(self, a: int, b: int) -> None:
        """Start reading [a, b): `next_batch` then hands out its batches, one per transaction."""
        self._records_of = self._records(a, b)
        self._rest: list[Any] = []  # read, and past the end of the batch a limit ended: the next batch's
        self._pos, self._b, self.done = a, b, False
        self._following = self.follow is not None and b >= OPEN_END

    def next_batch(self, room: Room | None = None) -> Batch | None:
        """The next batch of the open range, bounded by `room` too (a round's share of its task's
        transaction: records, bytes, when it must end); None when the range is done, or (a followed
        range) when no record came before the room's deadline."""
        if self.done:
            return None
        if self._following and not self._rest:  # the transaction starts with a record: wait for one (or the stop)
            for run in self._records_of:
                if run is not None:
                    self._rest = run
                    break
                if room is not None and time.monotonic() >= room.deadline:
                    return None
            else:
                self.done = True
                return None
        batch = Batch(self._pos)
        batch._filler = self._fill(batch, self._records_of, self._b, room)
        return batch

    def batch_done(self, batch: Batch) -> None:
        """`batch` was iterated to its end: account for it, and whether the range goes on."""
        self.unit_bytes += batch.nbytes
        self._pos = batch.src_to
        if batch.end not in ("full", "time"):
            self.unit_full = batch.end == "unit"
            self.done = True

    def _fill(
        self, batch: Batch, records: Iterator[list[Any] | None], b: int, room: Room | None = None
    ) -> Iterator[list[Any]]:
        """Moves records into `batch`, a run at a time, while the caller iterates it; the one place a
        batch ends. A limit reached inside a run ends the batch at that record (the rest of the run
        starts the next batch: `_rest`)."""
        following = self.follow is not None and b >= OPEN_END
        in_round = room is not None and room.until_deadline  # a followed round: read until its deadline
        source: Iterator[list[Any] | None] = records
        if self._rest:
            source, self._rest = itertools.chain((self._rest,), records), []
        max_records = self.limits.records if room is None else min(self.limits.records, room.records)
        unit_room = self.limits.unit_bytes - self.unit_bytes
        byte_room = min(self.limits.bytes, unit_room, room.bytes if room is not None else unit_room)
        add = batch.records.extend
        n = nbytes = 0
        end: BatchEnd = "range"
        deadline = float("inf")  # the first record opens the transaction on the broker
        for run in source:
            if run is None:  # an idle poll: a batch with records must not stay open too long
                if time.monotonic() >= deadline or (following and n and not in_round):  # commit what is there
                    end = "time"
                    break
                if not n and room is not None and time.monotonic() >= room.deadline:
                    # nothing yet, and the round's transaction (other partitions' records) must
                    # commit: the batch ends empty, the range is read on in the next round
                    end = "wait"
                    break
                continue
            if not n:
                deadline = time.monotonic() + self.limits.open_s
                if room is not None:
                    deadline = min(deadline, room.deadline)
            # a followed batch whose time is up takes one more record
            most = 1 if following and time.monotonic() >= deadline else max_records - n
            take, size = _taken(run, most, byte_room - nbytes)
            if take < len(run):
                run, self._rest = run[:take], run[take:]
            add(run)
            n += take
            nbytes += size
            yield run
            # the range's last record ends the records (`_records`); on a limit, its end wins over the limit
            if n >= max_records or nbytes >= byte_room:
                if run[-1].offset() + 1 < b:
                    end = "unit" if nbytes >= unit_room else "full"
                break
            if time.monotonic() >= deadline:  # a slow source that still trickles (read every FETCH_RECORDS)
                if run[-1].offset() + 1 < b:
                    end = "time"
                break
        else:
            if following:  # a followed range ends only when told to stop
                end = "stop"
        batch.nbytes, batch.end = nbytes, end
        if end == "range":
            batch.src_to = b
        elif batch.records:
            batch.src_to = batch.records[-1].offset() + 1

    def _records(self, a: int, b: int) -> Iterator[list[Any] | None]:
        """The committed records of [a, b), in offset order and in runs (a poll's records), until a stop
        rule says the range is done; `None` after each poll that brought no record (so `_fill` can end
        a batch in time)."""
        if a >= b:
            return
        c = self.consumer
        c.assign([TopicPartition(self.topic, self.partition, a)])
        pos = a  # every offset < pos was read (or holds no committed record)
        idle_since = time.monotonic()
        stop = self.follow.stop if self.follow is not None and b >= OPEN_END else None
        while True:
            if stop is not None and stop():
                return
            # consume() waits until it has `num_messages` or the timeout passed: never ask for more
            # than the range can still hold, or a short range waits the whole timeout
            msgs = c.consume(min(FETCH_RECORDS, b - pos), POLL_TIMEOUT_S)
            if not msgs:
                if stop is not None:  # following: a quiet source is not an outage
                    idle_since = time.monotonic()
                    yield None
                    continue
                if self._position() >= b:  # trailing markers / aborted records: no message tells
                    return
                self._check_idle(idle_since, pos, b, None)
                c = self._unstick(c, idle_since, pos)
                yield None
                continue
            got = False
            for run, m, err in _pieces(msgs):
                if run:
                    got = True
                    run, ended = _before(run, b)
                    if run:
                        pos = run[-1].offset() + 1
                        yield run
                    if ended or pos >= b:
                        return
                if err is None:
                    continue
                if err.code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= b:
                        return
                    continue
                if not transient_error(err):
                    raise self._failure(err, pos)
                self._check_idle(idle_since, pos, b, err)  # the source is away: librdkafka reconnects
            if got:
                idle_since = time.monotonic()  # the time the caller spent on the records is not idle
            else:  # errors only (a record of the old consumer after a renewal would come twice)
                c = self._unstick(c, idle_since, pos)
                yield None

    def _check_idle(self, idle_since: float, pos: int, b: int, err: KafkaError | None) -> None:
        """Fail once the source gave nothing for longer than the outage bound."""
        idle = time.monotonic() - idle_since
        if idle > self.idle_timeout:
            why = f"; last error: {err.str()}" if err is not None else " (source unavailable?)"
            raise BrokerUnavailableError(
                self.cluster,
                f"{self._where}: no progress reading offsets {pos}..{b} for {idle:.0f} s, longer than "
                f"broker.outage.max.seconds ({self.idle_timeout:.0f}){why}",
            )

    def _unstick(self, c: Any, idle_since: float, pos: int) -> Any:
        """The consumer to read on with: a new one, assigned at `pos`, once no record came for
        `STALL_S` (a third of the outage bound at most) since the last record or the last renewal."""
        now = time.monotonic()
        if self.renew is None or now - max(idle_since, self._renewed_at) < min(STALL_S, self.idle_timeout / 3):
            return c
        log.warning(
            "%s: no record from cluster '%s' for %.0f s; reading on from offset %d with a new consumer",
            self._where,
            self.cluster,
            now - idle_since,
            pos,
        )
        self._renewed_at = now
        c = self.consumer = self.renew(c)
        c.assign([TopicPartition(self.topic, self.partition, pos)])
        return c

    def _position(self) -> int:
        return int(self.consumer.position([TopicPartition(self.topic, self.partition)])[0].offset)

    def _failure(self, err: KafkaError, pos: int) -> MirrorflowError:
        if err.code() == KafkaError._AUTO_OFFSET_RESET:
            return MirrorflowError(
                f"{self._where}: offset {pos} is no longer on the source (retention ran during "
                "the copy); the next run records the gap"
            )
        return MirrorflowError(f"{self._where}: consuming the source failed: {err.str()}")

    @property
    def _where(self) -> str:
        return f"{self.topic}[{self.partition}]"
