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

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

from mirrorflow.errors import (
    BrokerUnavailableError,
    ClusterError,
    TransactionAbortedError,
    TransientError,
    UnreachableError,
)
from mirrorflow.kafka.connection import ClusterConnection, kafka_error

log = logging.getLogger(__name__)

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
    # a leadership change or a broker coming back: its metadata is a step behind for a moment
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError.KAFKA_STORAGE_ERROR,
    KafkaError.NOT_CONTROLLER,
    # a request in flight on a broker connection librdkafka tore down (a connection reset, a broker
    # handle decommissioned): "Local: Broker handle destroyed without termination"
    KafkaError._DESTROY_BROKER,
}
# "the client's idea of who leads the partition is out of date". librdkafka keeps the leader epochs
# it cached before a broker restart: through the same AdminClient, ListOffsets kept failing with
# FENCED_LEADER_EPOCH for 150 s and more after a SIGTERM restart (reproduced in
# tests/integration/test_retry_gaps.py), until its metadata is asked for again (refresh_metadata).
# _NOENT is ListOffsets' "Failed to query partition leaders: No leaders found" (no partition has a
# known leader: a broker just back, or a topic that does not exist).
STALE_METADATA_CODES = {
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError._NOENT,
}
BACKOFF_S = 1.0  # the longest wait between two attempts
FIRST_BACKOFF_S = 0.1  # the first wait; doubled after each failure up to BACKOFF_S
OUTAGE_BOUND = "broker.outage.max.seconds"
MIN_CALL_S = 8.0  # the shortest a blocking call may wait however small the bound (a busy broker is no outage)


def is_fenced(exc: BaseException) -> bool:
    """A producer that a newer one of its transactional.id fenced (or whose epoch the broker bumped)."""
    e = kafka_error(exc)
    return e is not None and (e.code() in FENCING_CODES or (e.fatal() and "fenc" in e.str().lower()))


def call_timeout_s(bound_s: float, default_s: float) -> float:
    """How long one blocking producer call (a flush; a transaction's init, commit or abort) waits: its
    default, but not past the outage bound (at least MIN_CALL_S). A black-holed broker answers
    nothing, and calls that each waited their default one after the other (init 60 s, flush 60 s,
    abort 60 s) ended a copy 60-120 s past broker.outage.max.seconds; the bound is checked between
    calls, so a run now ends within it plus a call or two."""
    return min(default_s, max(MIN_CALL_S, bound_s))


def backoff_s(failures: int, first: float = FIRST_BACKOFF_S, cap: float = BACKOFF_S) -> float:
    """The wait after the `failures`-th failure in a row (1, 2, ...): doubling from `first`, at most
    `cap` (a blip costs a tenth of a second, a restart about one attempt a second). The exponent stops
    at 32: past it the cap holds anyway, and a float cannot take 2 ** 1024."""
    return min(cap, first * 2 ** min(32, max(0, failures - 1)))


def transient_error(err: KafkaError | None) -> bool:
    """A Kafka error that a broker coming back cures (never a fatal one: fencing, authorization)."""
    if err is None or err.fatal() or err.code() in FENCING_CODES:
        return False  # a fenced attempt stops: retrying would fence the attempt that fenced it
    return err.code() in TRANSIENT_CODES or err.retriable() or err.txn_requires_abort()


class UnacknowledgedError(TransientError):
    """A write the cluster did not acknowledge for a reason a broker coming back cures (no answer
    within the flush timeout, or a transient delivery error): the writer may write it again."""


def transient(exc: BaseException) -> bool:
    """An exception that means "retry after the outage", not "give up": a transient Kafka error, a
    transaction lost to an outage, a cluster none of whose brokers answered, a call that failed
    transiently past its own retries (TransientError, e.g. a write not acknowledged), a call past
    its own timeout. (A BrokerUnavailableError past broker.outage.max.seconds is final.)"""
    if isinstance(exc, (TransactionAbortedError, UnreachableError, TransientError)):
        return True
    if isinstance(exc, BrokerUnavailableError):
        return not exc.final
    return isinstance(exc, KafkaException) and transient_error(kafka_error(exc))


def outage_failure(exc: BaseException) -> bool:
    """A failure a copy task waits out: transient, and not a cluster that stayed away through a
    call's own wait for it (an UnreachableError after the bound: final)."""
    return transient(exc) and not isinstance(exc, UnreachableError)


def failure(conn: ClusterConnection, exc: BaseException) -> ClusterError:
    """`conn.describe_failure(exc)`, a TransientError when a broker coming back may cure it (the
    caller's own retries ran out; a caller that rides out outages tries again). "Cannot reach"
    included: past one call's own timeout that is not a cluster gone for good. (A copy task took
    an UnreachableError as final: a continuous run lost a task whose lease read timed out with
    "All broker connections are down" just as the target came back from a 5-minute outage.)"""
    described = conn.describe_failure(exc)
    err = kafka_error(exc)
    if (
        err is not None
        and transient_error(err)
        and (type(described) is ClusterError or isinstance(described, UnreachableError))
    ):
        return TransientError(conn.alias, described.detail)
    return described


def stale_metadata(err: KafkaError | None) -> bool:
    """An answer that asking for the topics' metadata again may cure (STALE_METADATA_CODES)."""
    return err is not None and err.code() in STALE_METADATA_CODES


def refresh_metadata(client: Any, topics: Iterable[str], timeout: float = 5.0) -> set[str] | None:
    """Ask the cluster for `topics`' metadata again through `client` (an AdminClient, a consumer or a
    producer): that updates the client's cached leaders and leader epochs (retrying through the same
    client does not: see STALE_METADATA_CODES). Returns the topics the cluster says do not exist;
    None when it did not answer (the caller's next attempt reports that)."""
    names = sorted(set(topics))
    try:
        if len(names) <= 10:  # one small request per topic; beyond that one request for all topics
            found = {n: client.list_topics(n, timeout=timeout).topics.get(n) for n in names}
        else:
            listed = client.list_topics(timeout=timeout).topics
            found = {n: listed.get(n) for n in names}
    except KafkaException:
        return None
    return {n for n, md in found.items() if md is None or not md.partitions}


def describe(exc: BaseException) -> str:
    err = kafka_error(exc)
    return err.str() if err is not None else str(exc)


@dataclass
class Outage:
    """The wait for an unavailable broker: starts at the first failure (or at `started`, where the
    caller counts from earlier), ends at the next progress (`over()`); `wait()` sleeps a little
    (`backoff_s`), or raises once the wait is past `bound_s`. `bound_name` is what the final
    message calls the bound."""

    bound_s: float
    started: float | None = None
    backoff_s: float = BACKOFF_S
    bound_name: str = OUTAGE_BOUND
    failures: int = 0

    @property
    def waited_s(self) -> float:
        return 0.0 if self.started is None else time.monotonic() - self.started

    def over(self) -> None:
        self.started, self.failures = None, 0

    def wait(self, alias: str, what: str, exc: BaseException) -> None:
        """`what` failed on cluster `alias` with the transient `exc`: back off, or raise past the bound."""
        if self.failures == 0:
            if self.started is None:
                self.started = time.monotonic()
            # said at once, so an address that is simply wrong does not look like a hang
            log.warning(
                "cluster %r: %s failed (%s); retrying for up to %.0f s (%s)",
                alias,
                what,
                describe(exc),
                self.bound_s,
                self.bound_name,
            )
        self.failures += 1
        waited = self.waited_s
        if waited >= self.bound_s:
            message = final_message(what, waited, self.bound_s, self.bound_name, exc)
            raise BrokerUnavailableError(alias, message, final=self.bound_name == OUTAGE_BOUND) from None
        time.sleep(min(backoff_s(self.failures, cap=self.backoff_s), self.bound_s - waited))


def final_message(what: str, waited_s: float, bound_s: float, bound_name: str, exc: BaseException) -> str:
    """The one message of a call that kept failing transiently past its bound."""
    bound = f"{bound_name} ({bound_s:.0f})" if bound_name == OUTAGE_BOUND else f"{bound_name} ({bound_s:.0f} s)"
    return f"{what}: no success for {waited_s:.0f} s, longer than {bound}; last error: {describe(exc)}"


def retrying(call: Callable[[], T], outage: Outage, alias: str, what: str) -> T:
    """`call()`, again after each transient failure, until it succeeds or the outage is too long."""
    while True:
        try:
            result = call()
        except (KafkaException, ClusterError) as exc:  # no broker answered: a restart, maybe
            if not transient(exc):
                raise
            outage.wait(alias, what, exc)
            continue
        return result


def retry_call(call: Callable[[], T], alias: str, what: str, bound_s: float, bound_name: str = OUTAGE_BOUND) -> T:
    """`call()` retried through transient failures (a leadership change, a just-created topic, a
    broker restart) with a doubling backoff, for up to `bound_s`; then one BrokerUnavailableError
    naming the cluster, what was tried and the last error. Other failures are raised at once."""
    return retrying(call, Outage(bound_s, bound_name=bound_name), alias, what)


@dataclass(frozen=True)
class StepRetry:
    """The steps of one operation over a flow's clusters (a checkpoint pass, a group offset sync),
    each tried again after a transient failure until `bound_s` passes without success; then one
    BrokerUnavailableError naming the cluster, the operation and the step. `bound_s` 0: no retry
    (a dry run, which someone waits for, reports the first failure as it is)."""

    operation: str  # e.g. "checkpoint pass of flow A->B"
    bound_s: float

    def run(self, alias: str, step: str, call: Callable[[], T]) -> T:
        if self.bound_s <= 0:
            return call()
        # the bound counts from the step's start: a first attempt that hangs until its own timeout
        # (a black-holed broker) is part of the wait
        return retrying(call, Outage(self.bound_s, started=time.monotonic()), alias, f"{self.operation}: {step}")
