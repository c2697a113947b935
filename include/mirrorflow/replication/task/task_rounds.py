"""The rounds of a copy task: lanes reading partitions into one open transaction at a time.

A ROUND is one transaction of a task (replication.task.task_copier): the task opens it, its lanes fill
it, the task commits it. A LANE is one source consumer reading one partition at a time: in a
round it produces a batch of its partition into the transaction while reading it (the writer's
`send`), and goes on to its next range or partition while the round has room for it (`Round.room`:
transaction.max.records and transaction.max.bytes over the round, the lane's share of the task's
memory budget, the time the transaction may stay open). A batch that ended on a limit (more of its
partition to read) parks the lane until the next round; a lane whose partitions are all read
parks for good. A followed partition (continuous runs) has a lane of its own that reads until the
round's deadline (`continuous.poll.ms` after it opened).

Failures: a source that fails a partition (MirrorflowError while reading) fails that partition
alone (its batch is left out when the round is written, replication.task.transaction_writer); a failure
of the producer (fencing, an outage) fails the round, which the task handles.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.task.copier import PartitionCopy, Range
from mirrorflow.replication.task.reader import BatchLimits, Follow, RangeReader, Room
from mirrorflow.replication.task.task_producer import LANES
from mirrorflow.replication.task.transaction_writer import PartBatch, TransactionWriter, aborted_error
from mirrorflow.replication.task.write_failures import Abortable


class Round:
    """One transaction of a task: the batches its lanes add, and what is left of its room."""

    def __init__(
        self, writer: TransactionWriter, limits: BatchLimits, queue: list[PartitionCopy], batch_s: float = 0.0
    ) -> None:
        self.writer, self.limits, self.queue = writer, limits, queue
        self.follow = batch_s > 0
        self.deadline = time.monotonic() + (batch_s if self.follow else limits.open_s)
        self.parts: list[PartBatch] = []
        self.owner: dict[int, tuple[PartitionCopy, Range, bool]] = {}  # part -> partition, range, ends its unit
        self.records = self.bytes = 0
        self.failure: BaseException | None = None
        self._lock = threading.Lock()
        self.max_bytes = int(writer.flow.props["transaction.max.bytes"])

    def next_partition(self) -> PartitionCopy | None:
        with self._lock:
            return self.queue.pop(0) if self.queue and self.failure is None else None

    def room(self, lane_bytes: int, started: bool) -> Room | None:
        """What a lane's next batch may take (None: the round is full, failed or out of time). A
        lane that has added nothing to this round always gets room, so every round moves."""
        with self._lock:
            if self.failure is not None:
                return None
            records = self.limits.records - self.records
            nbytes = min(self.max_bytes - self.bytes, self.limits.bytes - lane_bytes)
            if started and (records <= 0 or nbytes <= 0 or time.monotonic() >= self.deadline):
                return None
            return Room(max(1, records), max(1, nbytes), self.deadline, self.follow)

    def add(self, part: PartBatch, pc: PartitionCopy, rng: Range, ends_unit: bool = False) -> None:
        with self._lock:
            self.parts.append(part)
            self.owner[id(part)] = (pc, rng, ends_unit)
            self.records += len(part.batch.records)
            self.bytes += part.batch.nbytes

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = exc

    def raise_failure(self) -> None:
        """The producer failed during the round (fencing, an outage): the task handles it."""
        exc = self.failure
        if exc is None:
            return
        self.writer.txn.give_up()
        if isinstance(exc, Abortable):
            raise aborted_error(self.parts, self.writer.flow.target, exc)
        raise exc


class Lane:
    """One source consumer of a task, reading its partitions one after another."""

    def __init__(
        self,
        consumer: Any,
        flow: FlowConfig,
        limits: BatchLimits,
        follow: Follow | None = None,
        key: str = "",
        renew: Callable[[Any], Any] | None = None,
    ) -> None:
        self.consumer, self.flow, self.limits, self.follow = consumer, flow, limits, follow
        self.key = key  # its ConsumerPool key (replication.task.task_producer.LANES)
        self._renew = renew  # a new consumer in place of a stalled one (RangeReader)
        self.failed = False  # the source failed one of its partitions: its consumer is not reused
        self.pc: PartitionCopy | None = None
        self.reader: RangeReader | None = None
        self._reader_unit = -1
        self._first_batch = True  # the next batch is its range's first (it carries the range's gap)

    @property
    def busy(self) -> bool:
        return self.pc is not None and not self.pc.read_all

    def reset(self) -> None:
        """Forget what it read (the task starts again from the committed progress)."""
        self.pc, self.reader, self._reader_unit = None, None, -1
        with contextlib.suppress(Exception):
            self.consumer.unassign()

    def fill(self, rnd: Round) -> None:
        """Add batches to the round while it has room (see the module doc)."""
        lane_bytes, started = 0, False
        try:
            while True:
                if self.pc is None or self.pc.read_all:
                    if self.follow is not None:
                        return  # a followed partition's lane reads only it
                    self.pc, self.reader = rnd.next_partition(), None
                    if self.pc is None:
                        return
                pc, rng = self.pc, self.pc.current
                assert rng is not None
                room = rnd.room(lane_bytes, started)
                if room is None:
                    return
                reader = self._reader_for(pc, rng)
                batch = reader.next_batch(room)
                if batch is None:
                    if reader.done:  # a followed range that was told to stop
                        pc.advance(False)
                        continue
                    return  # followed: nothing new before the round's deadline
                # the range's gap event goes with its first batch only
                part = PartBatch(pc.units[rng.unit], batch, rng.lost if self._first_batch else None)
                try:
                    rnd.writer.send(part)
                except MirrorflowError as exc:  # the source failed this partition: it fails alone,
                    part.error = exc  # named in its results now, whatever becomes of the round
                    self.failed = True
                    rnd.add(part, pc, rng)
                    pc.fail(exc)
                    return
                if batch.end == "wait":  # nothing came before the round's deadline: the round goes
                    return  # without it, and this lane goes on reading it in the next one
                self._first_batch = False
                reader.batch_done(batch)
                rnd.add(part, pc, rng, reader.done and (reader.unit_full or pc.last_of_unit()))
                started, lane_bytes = True, lane_bytes + batch.nbytes
                if reader.done:
                    pc.advance(reader.unit_full, batch.src_to)
                if batch.end in ("full", "time") or self.follow is not None:
                    return  # its partition goes on in the next round
        except BaseException as exc:  # noqa: BLE001 - the producer failed: the task decides
            rnd.fail(exc)

    def _reader_for(self, pc: PartitionCopy, rng: Range) -> RangeReader:
        """The reader of `rng` (a unit has one reader: unit.max.bytes counts over its ranges)."""
        if self.reader is None or self._reader_unit != rng.unit or self.reader.done:
            if self.reader is None or self._reader_unit != rng.unit:
                u = pc.units[rng.unit]
                self.reader = RangeReader(
                    self.consumer,
                    u.topic,
                    u.partition,
                    self.limits,
                    cluster=self.flow.source,
                    follow=self.follow,
                    renew=self.renewed if self._renew is not None else None,
                )
                self._reader_unit = rng.unit
            self.reader.open(rng.a, rng.b)
            self._first_batch = True
        return self.reader

    def renewed(self, old: Any) -> Any:
        """The lane's new consumer in place of `old` (its reader's reads stalled)."""
        assert self._renew is not None
        self.consumer = self._renew(old)
        return self.consumer

    def close(self, clients: FlowClients, reuse: bool = True) -> None:
        """Hand the consumer back to the process's pool (or close it: after a failure, the task's or
        a partition's: a consumer a source failure may have left stuck is never handed to a next run)."""
        if reuse and not self.failed:
            LANES.give_back(self.key, self.consumer)
        else:
            with contextlib.suppress(Exception):
                self.consumer.close()
