"""Writing one batch as one target transaction: its records, its offset-map entry, the new progress.

Exactly-once (the default): a transactional producer with transactional.id
`mirrorflow-<flow.id>-<topic>-<partition>`. `start()` runs init_transactions, which fences zombies
(older attempts at the same source partition) and aborts their open transaction. Then each batch
is one transaction holding its records, the offset-map entry of the batch and the new progress
(state.state_writer.StateWriter): state never describes records that are not there, and a retried,
duplicated or zombie task never writes a record twice.

Exactly-once off: an idempotent producer; the state records follow each flushed batch
(at-least-once: a crash between the data and the state copies the batch again).

Exact target offsets: the fast path asks for the delivery reports of a batch's first and last
record only. When last - first + 1 equals the number of records, the batch landed without a gap
and its source segments map onto consecutive target offsets. Otherwise (an error, a gap) the
careful path produces the batch again with a report per record (exactly-once: the first attempt
is aborted first, never visible): the exact offsets, or the exact record that failed.

Every copied record goes through `_produce`: same partition, key, value and headers, the source
timestamp as CreateTime (none, <= 0, becomes 0: the producer's clock). `message.max.bytes` is
librdkafka's maximum, so the broker decides what is too large; such a record is named (topic,
partition, offset, size) and nothing from its batch on is marked copied. Fencing surfaces as a
KafkaException the unit loop reports as `fenced`.

Broker outages (a restart, a leadership move) are ridden through up to `broker.outage.max.seconds`
(one `kafka.retry.Outage` per unit), the way librdkafka documents each transactional call:
init_transactions and commit_transaction that fail retriably are called again (a commit whose
outcome is unknown is committed again, never aborted). A transaction that needs an abort (records
that timed out in the outage, an abortable commit) is a `TransactionAbortedError`: the unit loop
drops this producer and goes on from the committed progress with a new one, whose
init_transactions aborts the transaction and fences the old epoch (redoing the batch with the same
producer let its retried requests land in the next transaction: duplicates, seen on a SIGKILLed
broker). A fatal error on a transaction open longer than transaction.timeout.ms is the broker's
timeout abort (it bumps the epoch, so the producer reads as fenced), not another attempt: a
`TransactionTimeoutError`, handled the same way. Any other fatal error fails the unit.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import (
    MirrorflowError,
    RecordTooLargeError,
    TopicError,
    TransactionAbortedError,
    TransactionTimeoutError,
)
from mirrorflow.kafka.connection import kafka_error
from mirrorflow.kafka.retry import FENCING_CODES, Outage, describe, retrying, transient_error
from mirrorflow.replication.budget import CopyBudget
from mirrorflow.replication.faults import NO_FAULTS, Faults
from mirrorflow.replication.planner import Unit
from mirrorflow.replication.reader import TRANSACTION_TIMEOUT_MS, Batch, outage_bound_s, record_size
from mirrorflow.state.fencing import abort_pending
from mirrorflow.state.offset_map import MapEntry, Run
from mirrorflow.state.records import Progress
from mirrorflow.state.state_topics import offset_map_topic, progress_topic, state_partition, transactional_id
from mirrorflow.state.state_writer import StateWriter

FENCED_CODES = FENCING_CODES
TOO_LARGE_CODES = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}
MISSING_CODES = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
MAX_MESSAGE_BYTES = 1_000_000_000  # librdkafka's maximum: let the BROKER decide what is too large

# The producer's settings a user may override (`producer.*`); its batching comes from the task's
# memory budget (replication.budget.CopyBudget.producer), `producer_required` is applied on top.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "message.max.bytes": MAX_MESSAGE_BYTES,
    "compression.type": "none",
    "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
}

DeliveryReport = Callable[[Any, Any], None]


def producer_required(flow: FlowConfig, unit: Unit) -> dict[str, Any]:
    conf: dict[str, Any] = {"enable.idempotence": True, "acks": "all"}
    if flow.exactly_once:
        conf["transactional.id"] = transactional_id(flow, unit.topic, unit.partition)
    return conf


def is_fenced(exc: BaseException) -> bool:
    e = kafka_error(exc)
    return e is not None and (e.code() in FENCED_CODES or (e.fatal() and "fenc" in e.str().lower()))


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


class _Report:
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


class _Edges:
    """Delivery reports of a batch's first and last record (the fast path)."""

    __slots__ = ("first", "last")

    def __init__(self) -> None:
        self.first, self.last = _Report(), _Report()

    def only(self, err: KafkaError | None, msg: Any) -> None:
        self.first(err, msg)
        self.last(err, msg)

    def consecutive(self, records: int) -> bool:
        """The batch's records landed on consecutive target offsets."""
        first, last = self.first, self.last
        return not first.failed and not last.failed and last.offset - first.offset + 1 == records


class _Abortable(Exception):
    """The transaction cannot commit, the producer is fine: abort it and write the batch again."""

    def __init__(self, cause: BaseException | KafkaError | str) -> None:
        if isinstance(cause, KafkaError):
            cause = cause.str()
        super().__init__(cause if isinstance(cause, str) else describe(cause))


class _FatalError:
    """The producer's error_cb: keeps its first fatal error. It holds nothing of the writer, so the
    producer (and its threads) go away with the writer, not at some later garbage collection."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: KafkaError | None = None

    def __call__(self, err: KafkaError) -> None:
        if err.fatal() and self.error is None:
            self.error = err


class TransactionWriter:
    """The target side of one unit: its producer, one transaction per batch."""

    def __init__(
        self,
        clients: FlowClients,
        unit: Unit,
        faults: Faults = NO_FAULTS,
        outage: Outage | None = None,
        budget: CopyBudget | None = None,
    ) -> None:
        self.clients, self.flow, self.unit, self.faults = clients, clients.flow, unit, faults
        self.outage = outage or Outage(outage_bound_s(self.flow))
        self.eos = bool(self.flow.exactly_once)
        self._fatal = _FatalError()
        defaults = {**(budget or CopyBudget.of(self.flow)).producer(), **PRODUCER_DEFAULTS}
        if not self.eos:
            defaults.pop("transaction.timeout.ms")
        required = {**producer_required(self.flow, unit), "error_cb": self._fatal}
        self.producer = clients.producer("target", defaults, required)
        self.txn_timeout_s = (
            int({**defaults, **self.flow.client_overrides("target", "producer")}.get("transaction.timeout.ms", 0))
            / 1000
        )
        self._began = 0.0  # monotonic time the current batch's first transaction began
        self._to_target, self._topic, self._partition = self.producer.produce, unit.target_topic, unit.partition
        self.state: StateWriter | None = None
        self._where = f"{unit.topic}[{unit.partition}]"
        self.first_target = -1  # target offset of the first record of the last committed transaction

    def start(self, state: StateWriter) -> None:
        """Exactly-once: fence older attempts, abort their open transaction and end what they left
        pending (`_close_pending`), before this producer's first commit."""
        self.state = state
        if self.eos:
            # connect first (one metadata request): init_transactions on a cold producer waits for
            # its retry timer when the broker connection is not up yet (~0.3 s per unit)
            target, topic = self.flow.target, self.unit.target_topic
            retrying(
                lambda: self.producer.list_topics(topic, timeout=30), self.outage, target, f"metadata of {topic!r}"
            )
            retrying(
                lambda: self.producer.init_transactions(60), self.outage, target, f"init_transactions ({self._where})"
            )
            self._close_pending()
        self.faults.reached("after_init")

    def _close_pending(self) -> None:
        """One aborted transaction over the unit's partitions (its target partition, its progress
        and offset-map partitions), written by every unit, not only a resumed one: records an
        earlier attempt of this transactional.id left pending (a target broker SIGKILLed while its
        transaction was open, down longer than transaction.timeout.ms; Kafka 4.3) would otherwise
        become visible with this producer's first commit, whether that earlier attempt was this
        unit before an outage, a fenced attempt that stopped, or a crashed run."""
        assert self.state is not None
        u, st = self.unit, self.state
        parts = [
            (self._topic, self._partition),
            (progress_topic(self.flow), state_partition(u.topic, u.partition, st.progress_partitions)),
            (offset_map_topic(self.flow), state_partition(u.topic, u.partition, st.map_partitions)),
        ]
        target = self.flow.target
        abort = lambda: retrying(  # noqa: E731
            lambda: self.producer.abort_transaction(60), self.outage, target, f"aborting ({self._where})"
        )
        abort_pending(self.producer, parts, abort, self._where, target)

    def write(self, batch: Batch, progress: Progress, lost_range: tuple[int, int] | None = None) -> Progress:
        """One transaction: the batch's records (produced while the batch is read), its offset-map
        entry and the progress after it. Returns that progress, committed. A transaction an outage
        made abortable is a TransactionAbortedError: the unit goes on with a new producer (never
        this one: its retried requests could land in its next transaction)."""
        self._began = time.monotonic()
        try:
            new = self._transaction(batch, progress, lost_range)
        except _Abortable as exc:
            raise TransactionAbortedError(
                f"{self._where}: the transaction of offsets {batch.src_from}.. on cluster {self.flow.target!r} "
                f"failed while the cluster was unavailable and was not committed ({exc})"
            ) from None
        except KafkaException as exc:
            raise self._timed_out(exc, batch) from None
        self.outage.over()
        return new

    def _transaction(self, batch: Batch, progress: Progress, lost_range: tuple[int, int] | None) -> Progress:
        """One attempt at the batch's transaction; `_Abortable` when an outage made it abortable."""
        assert self.state is not None, "start() first"
        if self.eos:
            self.producer.begin_transaction()
        edges = self._send(batch)
        n = len(batch.records)
        runs = self._place(batch, edges) if n else []
        tgt_end = runs[-1].tgt + runs[-1].count if runs else self._target_end(progress)
        self.faults.reached("after_flush", n)
        lost = lost_range[1] - lost_range[0] if lost_range else 0
        u = self.unit
        entry = MapEntry(u.topic, u.partition, batch.src_from, batch.src_to, tuple(runs), tgt_end, lost, progress.epoch)
        new = progress.advanced(batch.src_from, batch.src_to, tgt_end, n, batch.last_timestamp, lost_range)
        try:
            self.state.write(self.producer, new, entry)
        except KafkaException as exc:
            if self.eos and transient_error(kafka_error(exc)):
                raise _Abortable(exc) from None
            raise
        self.faults.reached("before_commit", n)
        self._commit(batch)
        self.faults.reached("after_commit", n)
        self.first_target = runs[0].tgt if runs else -1
        return new

    def close(self) -> None:
        """Flush (at-least-once) and let the producer go now: a task's units must not keep one
        live producer each (their threads and broker connections slow every later unit)."""
        if not self.eos:
            self.producer.flush(30)
        self.clients.release(self.producer)

    # -- records ------------------------------------------------------------------------------------
    def _produce(self, m: Any, on_delivery: DeliveryReport | None) -> None:
        """The one produce of a copied record (see the module docstring)."""
        ts = m.timestamp()[1]
        while True:
            try:
                self._to_target(
                    self._topic,
                    m.value(),
                    m.key(),
                    self._partition,
                    on_delivery=on_delivery,
                    timestamp=ts if ts > 0 else 0,
                    headers=m.headers(),
                )
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.1)
            except KafkaException as exc:  # the transaction already failed (an outage): redo it
                e = kafka_error(exc)
                # _STATE: the transaction is in an abortable error state (a fatal one fails the abort)
                if self.eos and e is not None and transient_error(e):
                    raise _Abortable(exc) from None
                if self.eos and e is not None and e.code() == KafkaError._STATE:
                    raise self._abortable_unless_fenced(exc) from None
                if e is not None and e.code() == KafkaError._FATAL:
                    raise self._fatal_cause(exc) from None
                raise

    def _fatal_cause(self, exc: KafkaException) -> KafkaException:
        """produce() says only "Fatal error" (_FATAL); the cause (e.g. _FENCED when another attempt
        fenced this one) reaches error_cb on the next poll, or is what the transactional API raises."""
        with contextlib.suppress(Exception):
            self.producer.poll(0)
        if self._fatal.error is not None:
            return KafkaException(self._fatal.error)
        if self.eos:
            try:
                self.producer.abort_transaction(10)
            except KafkaException as abort_exc:
                if is_fenced(abort_exc):
                    return abort_exc
        return exc

    def _abortable_unless_fenced(self, exc: KafkaException) -> Exception:
        """The transaction is in an abortable error state whose cause produce() does not say: an
        outage, or another attempt fencing this one (INVALID_PRODUCER_EPOCH is abortable in
        librdkafka). Aborting tells them apart: a fenced producer's abort fails with the fencing
        error, which stops the unit (it never re-initialises: that would fence its fencer back)."""
        try:
            self.producer.abort_transaction(10)
        except KafkaException as abort_exc:
            if is_fenced(abort_exc):
                return abort_exc
        return _Abortable(exc)

    def _send(self, batch: Batch) -> _Edges:
        """Produce the batch's records as they are read. Only the first and the last get a delivery
        report; which one is last is known when the batch ends, so each goes out one record late."""
        edges = _Edges()
        produce = self._produce
        report: DeliveryReport | None = edges.first
        held = None
        for m in batch:
            if held is not None:
                produce(held, report)
                report = None
            held = m
        if held is not None:
            produce(held, edges.last if report is None else edges.only)
        return edges

    def _place(self, batch: Batch, edges: _Edges) -> list[Run]:
        """Flush the batch; where its records landed (the fast path, else the careful path)."""
        n = len(batch.records)
        self.faults.reached("before_flush", n)
        left = self._flush()
        self._raise_if_fenced()
        if self._fatal.error is None and edges.consecutive(n):
            return runs_at(batch.segments(), edges.first.offset)
        if self.eos and self._fatal.error is None:
            errors = [e.error for e in (edges.first, edges.last) if e.error is not None]
            if left or any(transient_error(e) for e in errors):  # the target was away: redo the batch
                raise _Abortable(errors[0] if errors else f"{left} records not delivered in time")
        return self._careful(batch)

    def _flush(self) -> int:
        """Flush; the number of records still undelivered."""
        try:
            return int(self.producer.flush(120))
        except (SystemError, KafkaException) as exc:
            # a fenced producer fails flush() (confluent-kafka may surface it as a SystemError)
            with contextlib.suppress(Exception):
                self.producer.poll(0)
            if self._fatal.error is not None:
                raise KafkaException(self._fatal.error) from None
            if isinstance(exc, KafkaException):
                raise
            if self.eos:
                self.producer.abort_transaction(30)  # raises the fencing error when that is the cause
            raise MirrorflowError(f"{self._where}: flushing the batch failed: {exc}") from None

    def _careful(self, batch: Batch) -> list[Run]:
        """Produce the batch again with a delivery report per record: the exact target offsets, or
        the exact record that failed. Exactly-once: the first attempt is aborted first."""
        if self.eos:
            try:
                self.producer.abort_transaction(60)
            except KafkaException as exc:
                if is_fenced(exc):
                    raise
            self.producer.begin_transaction()
        reports = [_Report(m.offset()) for m in batch.records]
        for m, report in zip(batch.records, reports, strict=True):
            self._produce(m, report)
        left = self.producer.flush(120)
        failed = [r for r in reports if r.failed]
        if self.eos and self._fatal.error is None and failed:
            errors = [r.error for r in failed if r.error is not None]
            if left or (errors and all(transient_error(e) for e in errors)):
                raise _Abortable(errors[0] if errors else f"{left} records not delivered in time")
        if failed or self._fatal.error is not None:
            raise self._failure(batch, failed)
        return runs_of((r.src, r.offset) for r in reports)

    # -- failures -----------------------------------------------------------------------------------
    def _failure(self, batch: Batch, failed: list[_Report]) -> MirrorflowError:
        """What went wrong with the batch, as the error to raise (its transaction is aborted)."""
        self._raise_if_fenced()
        if self.eos:
            self._abort_quietly()
        u = self.unit
        rejected = [(r, r.error) for r in failed if r.error is not None and r.error.code() in TOO_LARGE_CODES]
        if rejected:
            m, err = self._too_large(batch, rejected)
            return RecordTooLargeError(
                f"record {self._where} offset {m.offset()} ({record_size(m)} bytes) is larger than target topic "
                f"{u.target_topic!r} on cluster {self.flow.target!r} accepts ({err.str()}): raise the target "
                f"topic's max.message.bytes (and the broker's); nothing from offset {batch.src_from} on was "
                "marked copied"
            )
        bad = failed[0] if failed else None
        if bad is not None and bad.error is not None and bad.error.code() in MISSING_CODES:
            return TopicError(
                f"target topic {u.target_topic!r} partition {u.partition} is missing on cluster "
                f"{self.flow.target!r}: run `mirrorflow sync` first"
            )
        err = bad.error if bad is not None and bad.error is not None else self._fatal.error
        what = err.str() if err is not None else "not delivered"
        return MirrorflowError(
            f"{self._where}: writing offset {bad.src if bad else batch.src_from} to {u.target_topic!r} failed: {what}"
        )

    def _too_large(self, batch: Batch, rejected: list[tuple[_Report, KafkaError]]) -> tuple[Any, KafkaError]:
        """The record the broker rejects as too large, and its error: the rejected records are tried
        alone, largest first (a rejected request also fails the small records batched with it)."""
        by_offset = {m.offset(): m for m in batch.records}
        candidates = sorted((by_offset[r.src] for r, _ in rejected), key=lambda m: (-record_size(m), m.offset()))
        for m in candidates[:8]:
            err = self._probe(m)
            if err is not None and err.code() in TOO_LARGE_CODES:
                return m, err
        return candidates[0], rejected[0][1]

    def _probe(self, m: Any) -> KafkaError | None:
        """Produce one record alone (exactly-once: in a transaction that is aborted); its error."""
        if self.eos:
            self.producer.begin_transaction()
        report = _Report(m.offset())
        self._produce(m, report)
        self.producer.flush(60)
        if self.eos:
            self._abort_quietly()
        return report.error

    def _raise_if_fenced(self) -> None:
        err = self._fatal.error
        if err is not None and is_fenced(KafkaException(err)):
            raise KafkaException(err)

    def _abort_quietly(self) -> None:
        with contextlib.suppress(KafkaException):
            self.producer.abort_transaction(60)

    def _timed_out(self, exc: KafkaException, batch: Batch) -> Exception:
        """A fatal error (fenced, or INVALID_TXN_STATE at the commit) on a transaction open longer
        than transaction.timeout.ms is the broker's timeout abort (it bumps the producer epoch, so
        the producer reads as fenced): say so; anything else stays as it is."""
        open_s = time.monotonic() - self._began
        e = kafka_error(exc)
        fatal = is_fenced(exc) or (e is not None and e.fatal())
        if not (self.eos and self._began and fatal and open_s >= self.txn_timeout_s):
            return exc
        return TransactionTimeoutError(
            f"{self._where}: the transaction of offsets {batch.src_from}..{batch.src_to} on cluster "
            f"{self.flow.target!r} was open for {open_s:.0f} s, longer than transaction.timeout.ms "
            f"({self.txn_timeout_s * 1000:.0f}), and the broker aborted it ({describe(exc)})"
        )

    # -- commit -------------------------------------------------------------------------------------
    def _commit(self, batch: Batch) -> None:
        """Commit the transaction (exactly-once), or wait until the state records are written."""
        span = f"{batch.src_from}..{batch.src_to}"
        if not self.eos:
            if self.producer.flush(120) != 0:
                raise MirrorflowError(f"{self._where}: state records of {span} were not delivered")
            return
        while True:
            try:
                self.producer.commit_transaction(120)
                return
            except KafkaException as exc:
                if is_fenced(exc):
                    raise
                e = kafka_error(exc)
                if e is not None and e.txn_requires_abort():
                    raise _Abortable(exc) from None
                if e is not None and e.retriable():  # the outcome is not known yet: commit again
                    self.outage.wait(self.flow.target, f"committing offsets {span} of {self._where}", exc)
                    continue
                raise MirrorflowError(
                    f"{self._where}: committing offsets {span} failed: {e.str() if e else exc}"
                ) from None

    def _target_end(self, progress: Progress) -> int:
        """Target end for a batch without records: the progress's, or (nothing copied yet) the
        target partition's high watermark."""
        if progress.tgt_end >= 0:
            return progress.tgt_end
        reader = self.clients.reader("target", group=f"mirrorflow-{self.flow.client_name}-copier")
        try:
            return reader.watermarks(self.unit.target_topic, self.unit.partition)[1]
        finally:
            self.clients.release(reader.consumer)
