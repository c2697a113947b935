"""What went wrong writing a copy task's transaction, as the error to raise or report.

The writer (replication.task.transaction_writer) produces and commits; this module classifies what it
gets back: a transaction an outage made abortable (`Abortable`: the task goes on with a new
producer), the broker's timeout abort of a transaction open too long (`timed_out`), and a
partition's batch that the target refused for good (`batch_failure`): a record too large for the
target topic, named with its size and the topic's max.message.bytes (a batch the broker refused
although each of its records alone is accepted is said to be the batch, never blamed on a record),
a record whose timestamp the target refuses (Kafka 4.x: more than an hour ahead of its clock),
named with its timestamp and the limit, or the target partition missing.
The records behind a refused one in its partition wait until they time out ("Message timed out"):
that is the refusal's consequence, not an outage (`refused`: the writer asks before it waits one out).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from mirrorflow.config import FlowConfig
from mirrorflow.errors import MirrorflowError, RecordTooLargeError, TopicError, TransactionTimeoutError
from mirrorflow.kafka.connection import kafka_error
from mirrorflow.kafka.retry import describe, is_fenced
from mirrorflow.replication.task.reader import record_size

TOO_LARGE_CODES = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}
MISSING_CODES = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
PROBES = 8  # rejected records tried alone, largest first


class Abortable(Exception):
    """The transaction cannot commit, the producer is fine: abort it and write the round again."""

    def __init__(self, cause: BaseException | KafkaError | str) -> None:
        if isinstance(cause, KafkaError):
            cause = cause.str()
        super().__init__(cause if isinstance(cause, str) else describe(cause))


class FatalError:
    """The producer's error_cb: keeps its first fatal error. It holds nothing of the writer, so the
    producer (and its threads) go away with whoever drops it."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: KafkaError | None = None

    def __call__(self, err: KafkaError) -> None:
        if err.fatal() and self.error is None:
            self.error = err


def timed_out(
    exc: KafkaException, open_s: float, txn_timeout_s: float, eos: bool, what: str, flow: FlowConfig
) -> Exception:
    """A fatal error (fenced, or INVALID_TXN_STATE at the commit) on a transaction open longer than
    transaction.timeout.ms is the broker's timeout abort (it bumps the producer epoch, so the
    producer reads as fenced): say so; anything else stays as it is."""
    e = kafka_error(exc)
    fatal = is_fenced(exc) or (e is not None and e.fatal())
    if not (eos and open_s and fatal and open_s >= txn_timeout_s):
        return exc
    return TransactionTimeoutError(
        f"the transaction of {what} on cluster {flow.target!r} was open for {open_s:.0f} s, longer than "
        f"transaction.timeout.ms ({txn_timeout_s * 1000:.0f}), and the broker aborted it ({describe(exc)})"
    )


def purged(err: KafkaError | None) -> bool:
    """The producer purged the record before the broker answered (an epoch bump, an abort)."""
    return err is not None and err.code() in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)


def refused(err: KafkaError | None) -> bool:
    """The target refused a record for good: too large for its topic, or its partition missing."""
    return err is not None and err.code() in TOO_LARGE_CODES | MISSING_CODES


def batch_failure(writer: Any, part: Any, failed: list[Any]) -> MirrorflowError:
    """Why the target refused `part`'s batch for good (a transaction_writer.PartBatch, `failed` its
    records' failed delivery reports), as the partition's error (its transaction is aborted;
    nothing from the batch's first offset on is marked copied). `writer` probes records alone."""
    u, flow = part.unit, writer.flow
    rejected = [(r, r.error) for r in failed if r.error is not None and r.error.code() in TOO_LARGE_CODES]
    limit = writer.limits.get(u.target_topic)
    said = f"max.message.bytes {limit}" if limit else "its max.message.bytes"
    if rejected:
        found = _too_large(writer, part, rejected)
        if found is not None:
            m, err = found
            return RecordTooLargeError(
                f"record {part.where} offset {m.offset()} ({record_size(m)} bytes) is larger than target topic "
                f"{u.target_topic!r} on cluster {flow.target!r} accepts ({said}; {err.str()}): raise the target "
                f"topic's max.message.bytes (and the broker's); nothing from offset {part.batch.src_from} on was "
                "marked copied"
            )
        size = sum(record_size(m) for m in part.batch.records)
        return RecordTooLargeError(
            f"a batch of {len(part.batch.records)} records of {part.where} (offsets {part.batch.src_from}.."
            f"{part.batch.src_to}, {size} bytes) was larger than target topic {u.target_topic!r} on cluster "
            f"{flow.target!r} accepts ({said}; {rejected[0][1].str()}), although each record alone fits: "
            f"lower producer.batch.size below it; nothing from offset {part.batch.src_from} on was marked copied"
        )
    bad = failed[0] if failed else None
    if bad is not None and bad.error is not None and bad.error.code() in MISSING_CODES:
        return TopicError(
            f"target topic {u.target_topic!r} partition {u.partition} is missing on cluster {flow.target!r}: "
            "run `mirrorflow sync` first"
        )
    if bad is not None and bad.error is not None and bad.error.code() == KafkaError.INVALID_TIMESTAMP:
        m, err = _bad_timestamp(writer, part, failed) or (None, bad.error)
        which = (
            f"record {part.where} offset {m.offset()} (timestamp {m.timestamp()[1]})"
            if m
            else f"a record of {part.where}"
        )
        return MirrorflowError(
            f"{which} was refused by target topic {u.target_topic!r} on cluster {flow.target!r} ({err.str()}): "
            "its timestamp is further ahead of the target broker's clock than the topic's "
            "message.timestamp.after.max.ms (Kafka 4.x: one hour by default), or further behind than "
            "message.timestamp.before.max.ms; raise that limit on the target topic; nothing from offset "
            f"{part.batch.src_from} on was marked copied"
        )
    what = bad.error.str() if bad is not None and bad.error is not None else "not delivered"
    return MirrorflowError(
        f"{part.where}: writing offset {bad.src if bad else part.batch.src_from} to {u.target_topic!r} failed: {what}"
    )


def _bad_timestamp(writer: Any, part: Any, failed: list[Any]) -> tuple[Any, KafkaError] | None:
    """The record whose timestamp the target refuses (the furthest from now first), and its error."""
    now = time.time() * 1000
    return _refused_alone(
        writer, part, [r.src for r in failed], lambda m: -abs(m.timestamp()[1] - now), {KafkaError.INVALID_TIMESTAMP}
    )


def _too_large(writer: Any, part: Any, rejected: list[tuple[Any, KafkaError]]) -> Any:
    """The record the broker rejects as too large (largest first), and its error; None when each
    one alone fits."""
    return _refused_alone(
        writer, part, [r.src for r, _ in rejected], lambda m: (-record_size(m), m.offset()), TOO_LARGE_CODES
    )


def _refused_alone(
    writer: Any, part: Any, offsets: list[int], order: Callable[[Any], Any], codes: set[int]
) -> tuple[Any, KafkaError] | None:
    """The first of the batch's records at `offsets` (in `order`, at most PROBES) that the target
    refuses with one of `codes` when produced alone, and its error: a refused request fails every
    record batched with it, so the failed deliveries alone do not say which record it was."""
    by_offset = {m.offset(): m for m in part.batch.records}
    for m in sorted((by_offset[o] for o in offsets if o in by_offset), key=order)[:PROBES]:
        err = writer.probe(part.unit.target_topic, part.unit.partition, m)
        if err is not None and err.code() in codes:
            return m, err
    return None
