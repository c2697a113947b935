"""Writing one round of a copy task as one target transaction: the batches of many partitions, each
with its offset-map entry and its new progress.

Exactly-once (the default): the attempt's transaction (replication.task.copy_transaction, which owns
every begin, flush, commit and abort and decides what their failures mean) is already established
(its epoch confirmed, older attempts fenced). A round opens a transaction
(`begin`); the task's lanes produce their batches' records into it while they read them (`send`,
thread-safe); `commit` then places every batch (its target offsets), adds each batch's offset-map
entry and the partition's progress after it (state.state_writer.StateWriter), and commits: state
never describes records that are not there, and a retried, duplicated or zombie task never writes a
record twice. Exactly-once off: an idempotent producer; the state records follow each flushed round
(at-least-once: a crash between the data and the state copies the round again).

Exact target offsets: the fast path asks for the delivery reports of each batch's first and last
record only. When last - first + 1 equals the batch's records, it landed without a gap and its
source segments map onto consecutive target offsets. Otherwise (an error, a gap) the careful path
produces the round again with a report per record (exactly-once: the first attempt is aborted
first, never visible): the exact offsets, or the exact records that failed. A partition whose batch
fails for good (a record too large for the target, its target partition missing) is left out: the
round is produced once more without it, so the other partitions' batches are neither lost nor
doubled, and that partition is marked failed (`PartBatch.error`), nothing of it marked done.

Every copied record goes through `_produce` (`send` makes its first attempt inline, per record; a refused
attempt goes on in `_produce`, and `_refused` decides what a refusal means): same partition, key, value and
headers, the source timestamp as CreateTime (none, <= 0, becomes 0: the producer's clock). A partition the
producer does not know ("Unknown partition": a producer kept from an earlier run knows a topic's partitions as
they were then, and the sync may have added some since) makes it ask for the topic's metadata again, for up to
METADATA_WAIT_S, before the record is refused (`_knows`). `message.max.bytes` is librdkafka's maximum, so the
broker decides what is too large; producer batches stay below the smallest max.message.bytes of the task's
target topics (task_producer), so a record the broker rejects is one too large itself
(replication.task.write_failures names it and the limit).

Broker outages: a transaction that an outage made abortable is a `TransactionAbortedError` (and a
fatal error on a transaction open longer than transaction.timeout.ms a `TransactionTimeoutError`):
the task drops this producer and goes on from every partition's committed progress with a new one
(replication.task.task_copier). A commit whose outcome is unknown is committed again, never aborted
(copy_transaction). Fencing surfaces as a KafkaException the task decides about (task_copier).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from mirrorflow.errors import MirrorflowError, TransactionAbortedError
from mirrorflow.kafka.connection import kafka_error
from mirrorflow.kafka.log_reader import missing_partitions
from mirrorflow.kafka.retry import transient_error
from mirrorflow.replication.plan.run_plan import Unit
from mirrorflow.replication.task.copy_transaction import CopyTransaction
from mirrorflow.replication.task.faults import NO_FAULTS, Faults
from mirrorflow.replication.task.reader import Batch
from mirrorflow.replication.task.write_failures import (
    Abortable,
    batch_failure,
    purged,
    refused,
    timed_out,
)
from mirrorflow.state.offset_map import MapEntry, Run
from mirrorflow.state.records import Progress
from mirrorflow.state.state_writer import StateWriter

DeliveryReport = Callable[[Any, Any], None]
# what librdkafka says at once of a partition or topic its metadata does not hold (yet)
NOT_IN_METADATA = (KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC)
METADATA_WAIT_S = 10.0  # how long a producer asks again for a topic's metadata until it holds the partition


def runs_at(segments: Iterable[tuple[int, int]], first_target: int) -> list[Run]:
    """Source segments (start, count) written one after another from target offset `first_target`."""
    runs, t = [], first_target
    for s, n in segments:
        runs.append(Run(s, t, n))
        t += n
    return runs


def runs_of(pairs: Iterable[tuple[int, int]]) -> list[Run]:
    """(source, target) offsets, in order, as runs where both are consecutive."""
    runs: list[Run] = []
    for s, t in pairs:
        last = runs[-1] if runs else None
        if last is not None and last.src + last.count == s and last.tgt + last.count == t:
            runs[-1] = Run(last.src, last.tgt, last.count + 1)
        else:
            runs.append(Run(s, t, 1))
    return runs


class Report:
    """Delivery report of one record."""

    __slots__ = ("src", "offset", "error")

    def __init__(self, src: int = -1) -> None:
        self.src, self.offset = src, -1
        self.error: KafkaError | None = None

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.error = err
        else:
            self.offset = msg.offset()

    @property
    def failed(self) -> bool:
        return self.error is not None or self.offset < 0


class Edges:
    """Delivery reports of a batch's first and last record (the fast path)."""

    __slots__ = ("first", "last")

    def __init__(self) -> None:
        self.first, self.last = Report(), Report()

    def only(self, err: KafkaError | None, msg: Any) -> None:
        self.first(err, msg)
        self.last(err, msg)

    def consecutive(self, records: int) -> bool:
        """The batch's records landed on consecutive target offsets."""
        first, last = self.first, self.last
        return not first.failed and not last.failed and last.offset - first.offset + 1 == records


@dataclass(eq=False)
class PartBatch:
    """One partition's batch in a round: what was read (and produced), and what its commit gives."""

    unit: Unit
    batch: Batch
    lost_range: tuple[int, int] | None = None
    opened_ms: int = 0  # when the batch's first record was produced (record age)
    edges: Edges = field(default_factory=Edges)
    runs: list[Run] = field(default_factory=list)
    progress: Progress | None = None  # the partition's progress after this batch (set by commit)
    error: MirrorflowError | None = None  # the partition failed in this round: nothing of it committed

    @property
    def key(self) -> tuple[str, int]:
        return (self.unit.topic, self.unit.partition)

    @property
    def where(self) -> str:
        return f"{self.unit.topic}[{self.unit.partition}]"


class TransactionWriter:
    """The target side of one copy task: its rounds, each one transaction (exactly-once)."""

    def __init__(
        self,
        txn: CopyTransaction,
        state: StateWriter,
        target_ends: Callable[[list[Unit]], dict[tuple[str, int], int]],
        faults: Faults = NO_FAULTS,
        txn_timeout_s: float = 30.0,
        limits: dict[str, int] | None = None,
    ) -> None:
        self.txn, self.flow, self.producer = txn, txn.flow, txn.producer
        self.state, self.faults = state, faults
        self.eos = txn.eos
        # the target high watermarks of partitions (target topic, partition) whose first batch is empty
        self._target_ends = target_ends
        self.txn_timeout_s = txn_timeout_s
        self.limits = limits or {}  # target topic -> max.message.bytes (for messages)
        self._missing: set[tuple[str, int]] = set()  # partitions its metadata did not hold, asked again (`_knows`)

    # -- the round --------------------------------------------------------------------------------
    def begin(self) -> None:
        self.txn.begin()

    def send(self, part: PartBatch) -> None:
        """Produce the batch's records as they are read (a lane thread). Only the first and the last
        get a delivery report; which one is last is known when the batch ends, so each goes out one
        record late."""
        edges, topic, partition = part.edges, part.unit.target_topic, part.unit.partition
        report: DeliveryReport | None = edges.first
        held = None
        produce = self.producer.produce
        for m in part.batch:
            if held is not None:
                # `_produce`'s first attempt, inlined: this loop runs per record
                ts = held.timestamp()[1]
                try:
                    produce(
                        topic,
                        held.value(),
                        held.key(),
                        partition,
                        on_delivery=report,
                        timestamp=ts if ts > 0 else 0,
                        headers=held.headers(),
                    )
                except BufferError:  # nothing was queued: `_produce` waits for room
                    self._produce(topic, partition, held, report)
                except KafkaException as exc:
                    self._refused(exc, topic, partition, asked=False)
                    self._produce(topic, partition, held, report, asked=True)
                report = None
            elif not part.opened_ms:
                part.opened_ms = int(time.time() * 1000)
            held = m
        if held is not None:
            self._produce(topic, partition, held, edges.last if report is None else edges.only)

    def commit(self, parts: list[PartBatch], progress: dict[tuple[str, int], Progress]) -> list[PartBatch]:
        """Place, write the state of and commit the round's batches (in order; `progress`: each
        partition's progress before the round, advanced here for the committed ones). Returns the
        batches committed; a partition that failed for good has `error` set and nothing committed."""
        try:
            return self._commit(parts, progress)
        except Abortable as exc:
            raise aborted_error(parts, self.flow.target, exc) from None
        except KafkaException as exc:
            what = describe_parts(parts)
            raise timed_out(exc, self.txn.open_s, self.txn_timeout_s, self.eos, what, self.flow) from None

    def _commit(self, parts: list[PartBatch], progress: dict[tuple[str, int], Progress]) -> list[PartBatch]:
        n = sum(len(p.batch.records) for p in parts)
        if n:
            self.faults.reached("before_flush", n)
        left = self.txn.flush()
        self.txn.raise_if_fenced()
        errored = any(p.error is not None for p in parts)  # a partition the source failed mid-batch
        busy = [p for p in parts if p.batch.records and p.error is None]
        fatal = self.txn.fatal.error is not None
        if not errored and not fatal and all(p.edges.consecutive(len(p.batch.records)) for p in busy):
            for p in busy:
                p.runs = runs_at(p.batch.segments(), p.edges.first.offset)
        else:
            if self.eos and not fatal and not errored:
                errors = [e.error for p in busy for e in (p.edges.first, p.edges.last) if e.error is not None]
                # a batch whose first record landed and whose last did not may hold a record the target
                # refused, the records behind it timed out: the careful path tells that from an outage
                midway = any(not p.edges.first.failed and p.edges.last.failed for p in busy)
                if left or (any(transient_error(e) for e in errors) and not midway and not any(map(refused, errors))):
                    raise Abortable(errors[0] if errors else f"{left} records not delivered in time")  # redo the round
            self._careful(parts)
        kept = [p for p in parts if p.error is None]
        if not kept:  # every partition of the round failed: nothing to commit
            self.txn.give_up()
            return []
        self.faults.reached("after_flush", n)
        # a fresh partition's empty batch (its start anchored at its initial position) records where the
        # flow's copies will begin on the target: its high watermark, asked for all of them at once
        fresh = [p.unit for p in kept if not p.runs and (progress.get(p.key) or Progress.empty(*p.key)).tgt_end < 0]
        ends = self._target_ends(fresh) if fresh else {}
        for p in kept:
            before = progress.get(p.key) or Progress.empty(*p.key)
            p.progress = self._write_state(p, before, ends)
            progress[p.key] = p.progress
        self.faults.reached("before_commit", n)
        self.txn.commit(describe_parts(parts))
        self.faults.reached("after_commit", n)
        return kept

    def _write_state(self, p: PartBatch, before: Progress, ends: dict[tuple[str, int], int]) -> Progress:
        """The batch's offset-map entry and the partition's progress after it, into the transaction
        (`ends`: the target high watermark of each fresh partition whose batch is empty)."""
        b, u = p.batch, p.unit
        runs = p.runs
        tgt_end = (
            runs[-1].tgt + runs[-1].count
            if runs
            else (before.tgt_end if before.tgt_end >= 0 else ends[(u.target_topic, u.partition)])
        )
        lost = p.lost_range[1] - p.lost_range[0] if p.lost_range else 0
        entry = MapEntry(u.topic, u.partition, b.src_from, b.src_to, tuple(runs), tgt_end, lost, before.epoch)
        new = before.advanced(b.src_from, b.src_to, tgt_end, len(b.records), b.last_timestamp, p.lost_range)
        try:
            self.state.write(self.producer, new, entry)
        except KafkaException as exc:
            if self.eos and transient_error(kafka_error(exc)):
                raise Abortable(exc) from None
            raise
        return new

    # -- records ------------------------------------------------------------------------------------
    def _produce(
        self, topic: str, partition: int, m: Any, on_delivery: DeliveryReport | None, asked: bool = False
    ) -> None:
        """The one produce of a copied record (see the module docstring); `asked`: for the topic's
        metadata again already (`_knows`)."""
        ts = m.timestamp()[1]
        while True:
            try:
                self.producer.produce(
                    topic,
                    m.value(),
                    m.key(),
                    partition,
                    on_delivery=on_delivery,
                    timestamp=ts if ts > 0 else 0,
                    headers=m.headers(),
                )
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.1)
            except KafkaException as exc:
                self._refused(exc, topic, partition, asked)
                asked = True

    def _refused(self, exc: KafkaException, topic: str, partition: int, asked: bool) -> None:
        """A produce refused with `exc` (`asked`: for the topic's metadata already). Returns only when it
        may be tried again (the producer asked for the metadata again and now knows the partition); else
        the error the task acts on is raised."""
        e = kafka_error(exc)
        where = (topic, partition)
        if e is not None and e.code() in NOT_IN_METADATA and not asked and where not in self._missing:
            if self._knows(topic, partition):
                return
            self._missing.add(where)  # the batch's next records are refused at once
        # the transaction already failed (an outage): redo it. _STATE: the transaction is in an
        # abortable error state (a fatal one fails the abort)
        if self.eos and e is not None and transient_error(e):
            raise Abortable(exc) from None
        if self.eos and e is not None and e.code() == KafkaError._STATE:
            raise self.txn.fenced_or(Abortable(exc)) from None
        if e is not None and e.code() == KafkaError._FATAL:
            raise self.txn.fatal_cause(exc) from None
        raise exc

    def _knows(self, topic: str, partition: int) -> bool:
        """Whether the producer holds `partition` of `topic` once it asked for the topic's metadata again
        (for up to METADATA_WAIT_S). Its view of a topic is refreshed every topic.metadata.refresh.interval.ms
        (5 minutes), and a run after the sync added partitions used to fail them with the producer kept
        from the run before ("Local: Unknown partition"); the task checked the partition is on the
        target before it copies (`TaskCopier`), so this is the producer's view catching up."""
        deadline = time.monotonic() + METADATA_WAIT_S
        while True:
            timeout = max(0.1, min(2.0, deadline - time.monotonic()))
            if missing_partitions(self.producer, topic, [partition], timeout) == []:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def _careful(self, parts: list[PartBatch]) -> None:
        """Produce the round again with a delivery report per record: the exact target offsets, or
        the exact records that failed. Exactly-once: the first attempt is aborted first. A partition
        that fails for good is left out and the round produced once more without it."""
        live = [p for p in parts if p.error is None]
        while True:
            if self.eos:
                self.txn.abort_to_redo()
                self.begin()
            reports = {id(p): [Report(m.offset()) for m in p.batch.records] for p in live}
            for p in live:
                for m, report in zip(p.batch.records, reports[id(p)], strict=True):
                    self._produce(p.unit.target_topic, p.unit.partition, m, report)
            left = self.producer.flush(self.txn.wait_s("flush"))
            self.txn.raise_if_fenced()
            failed = {id(p): [r for r in reports[id(p)] if r.failed] for p in live}
            if self.eos and self.txn.fatal.error is None:
                # a partition the target refused a record of fails (below), whatever its later records say
                others = [fs for fs in failed.values() if not any(refused(r.error) for r in fs)]
                errors = [r.error for fs in others for r in fs if r.error is not None]
                # a record the producer purged (its epoch bumped after a time-out: the target was away)
                # was never refused: the round is redone like any other outage
                if left or any(transient_error(e) or purged(e) for e in errors) or (any(others) and not errors):
                    raise Abortable(errors[0] if errors else f"{left} records not delivered in time")
            if self.txn.fatal.error is not None:
                raise KafkaException(self.txn.fatal.error)
            bad = [p for p in live if failed[id(p)]]
            if not bad:
                for p in live:
                    p.runs = runs_of((r.src, r.offset) for r in reports[id(p)])
                return
            for p in bad:
                p.error = batch_failure(self, p, failed[id(p)])
            live = [p for p in live if p.error is None]
            if not self.eos:  # at-least-once: what was delivered stays; the rest is placed above
                for p in live:
                    p.runs = runs_of((r.src, r.offset) for r in reports[id(p)])
                return

    def probe(self, topic: str, partition: int, m: Any) -> KafkaError | None:
        """Produce one record alone (exactly-once: in a transaction that is aborted); its error."""
        if self.eos:
            self.txn.abort_to_redo(quiet=True)
            self.producer.begin_transaction()
        report = Report(m.offset())
        self._produce(topic, partition, m, report)
        self.producer.flush(self.txn.wait_s("flush"))
        self.txn.abort_to_redo(quiet=True)
        return report.error


def aborted_error(parts: list[PartBatch], target: str, cause: BaseException) -> TransactionAbortedError:
    """A round's transaction that an outage made abortable (the task goes on with a new producer)."""
    first = parts[0] if parts else None
    where = f"{first.where}: the transaction of offsets {first.batch.src_from}.." if first else "a transaction"
    more = f" (with the batches of {len(parts) - 1} more partitions)" if len(parts) > 1 else ""
    return TransactionAbortedError(
        f"{where} on cluster {target!r}{more} failed while the cluster was unavailable and was not committed ({cause})"
    )


def describe_parts(parts: list[PartBatch]) -> str:
    """The partitions and offsets of a round, for messages (the first few)."""
    named = ", ".join(f"{p.where} offsets {p.batch.src_from}..{p.batch.src_to}" for p in parts[:3])
    more = f" and {len(parts) - 3} more partitions" if len(parts) > 3 else ""
    return (named + more) if parts else "an empty round"
