"""Riding through broker outages: which failures mean "the broker is away, wait and retry", and
the bounded wait itself.

librdkafka reconnects and retries requests on its own. What reaches us during a broker restart,
a leadership move or maintenance is a call of ours that ran out of its own deadline, or a
"not available / not leader / coordinator loading" answer. `transient(exc)` says whether an
exception is one of those; `Outage` is the clock that runs from the first such failure until the
next progress, and past the bound (`broker.outage.max.seconds`) fails with one message naming the
cluster, what was waited for and the last error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from mirrorflow.errors import BrokerUnavailableError, TransactionAbortedError
from mirrorflow.kafka.connection import kafka_error

T = TypeVar("T")

# another attempt at the same transactional.id owns the partition now: never an outage, even when
# librdkafka reports it as abortable (INVALID_PRODUCER_EPOCH). Re-initialising would fence the
# attempt that fenced this one, and the two would alternate. (The broker's own abort of a
# transaction open longer than transaction.timeout.ms also bumps the epoch; the writer tells that
# case apart by the transaction's age and reports it as a TransactionTimeoutError, which is ridden
# through.)
FENCING_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
TRANSIENT_CODES = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TIMED_OUT_QUEUE,
    KafkaError._WAIT_COORD,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.CONCURRENT_TRANSACTIONS,
    KafkaError.BROKER_NOT_AVAILABLE,
}
BACKOFF_S = 1.0


def transient_error(err: KafkaError | None) -> bool:
    """A Kafka error that a broker coming back cures (never a fatal one: fencing, authorization)."""
    if err is None or err.fatal() or err.code() in FENCING_CODES:
        return False  # a fenced attempt stops: retrying would fence the attempt that fenced it
    return err.code() in TRANSIENT_CODES or err.retriable() or err.txn_requires_abort()


def transient(exc: BaseException) -> bool:
    """An exception that means "retry after the outage", not "give up". (A BrokerUnavailableError
    is raised past the bound only: it is final.)"""
    if isinstance(exc, TransactionAbortedError):
        return True
    return isinstance(exc, KafkaException) and transient_error(kafka_error(exc))


def describe(exc: BaseException) -> str:
    err = kafka_error(exc)
    return err.str() if err is not None else str(exc)


@dataclass
class Outage:
    """The wait for an unavailable broker: starts at the first failure, ends at the next progress
    (`over()`); `wait()` sleeps a little, or raises once the wait is past `bound_s`."""

    bound_s: float
    started: float | None = None
    backoff_s: float = BACKOFF_S

    @property
    def waited_s(self) -> float:
        return 0.0 if self.started is None else time.monotonic() - self.started

    def over(self) -> None:
        self.started = None

    def wait(self, alias: str, what: str, exc: BaseException) -> None:
        """`what` failed on cluster `alias` with the transient `exc`: back off, or raise past the bound."""
        if self.started is None:
            self.started = time.monotonic()
        waited = self.waited_s
        if waited >= self.bound_s:
            raise BrokerUnavailableError(
                alias,
                f"{what}: no success for {waited:.0f} s, longer than broker.outage.max.seconds "
                f"({self.bound_s:.0f}); last error: {describe(exc)}",
            ) from None
        time.sleep(min(self.backoff_s, self.bound_s - waited))


def retrying(call: Callable[[], T], outage: Outage, alias: str, what: str) -> T:
    """`call()`, again after each transient failure, until it succeeds or the outage is too long."""
    while True:
        try:
            result = call()
        except KafkaException as exc:
            if not transient(exc):
                raise
            outage.wait(alias, what, exc)
            continue
        return result
