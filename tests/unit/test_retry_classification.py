"""Which Kafka failures are waited out and which are final (kafka/retry.py), and the bounded wait.

Pure: errors are built as librdkafka reports them (code, fatal, retriable, txn_requires_abort).
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorflow.errors import (
    AuthenticationError,
    BrokerUnavailableError,
    ClusterError,
    TransactionAbortedError,
    TransactionTimeoutError,
    UnreachableError,
)
from mirrorflow.kafka import retry
from mirrorflow.kafka.retry import Outage, backoff_s, retry_call, transient, transient_error
from mirrorflow.kafka.retry import is_fenced
from tests.fake_time import fake_time


def err(code: int, fatal: bool = False, retriable: bool = False, abortable: bool = False) -> KafkaError:
    return KafkaError(code, "as the broker said", fatal=fatal, retriable=retriable, txn_requires_abort=abortable)


@pytest.mark.parametrize("code", [
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
    KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_CONTROLLER,
    KafkaError.CONCURRENT_TRANSACTIONS, KafkaError.OFFSET_NOT_AVAILABLE,
])
def test_leadership_changes_and_restarts_are_waited_out(code):
    assert transient_error(err(code))
    assert transient(KafkaException(err(code)))


def test_an_error_librdkafka_marks_retriable_or_abortable_is_waited_out():
    assert transient_error(err(KafkaError.UNKNOWN, retriable=True))
    assert transient_error(err(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, abortable=True))  # an outage lost a batch


@pytest.mark.parametrize("code", [KafkaError.PRODUCER_FENCED, KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH])
@pytest.mark.parametrize("abortable", [False, True])
def test_fencing_is_never_waited_out(code, abortable):
    """librdkafka reports INVALID_PRODUCER_EPOCH as abortable: re-initialising would fence the
    attempt that fenced this one, and the two would alternate."""
    e = err(code, abortable=abortable)
    assert not transient_error(e)
    assert not transient(KafkaException(e))
    assert is_fenced(KafkaException(e))


@pytest.mark.parametrize("e", [
    err(KafkaError._TRANSPORT, fatal=True),  # any fatal error: the producer is unusable
    err(KafkaError.TOPIC_AUTHORIZATION_FAILED),
    err(KafkaError.SASL_AUTHENTICATION_FAILED),
    err(KafkaError.MSG_SIZE_TOO_LARGE),
    err(KafkaError.INVALID_CONFIG),
    None,
])
def test_fatal_refused_and_invalid_are_final(e):
    assert not transient_error(e)


def test_exceptions_of_ours():
    assert transient(TransactionAbortedError("lost to an outage"))
    assert transient(TransactionTimeoutError("the broker aborted it after transaction.timeout.ms"))
    assert transient(UnreachableError("A", "cannot reach 127.0.0.1:9092"))  # no broker answered: a restart?
    assert not transient(BrokerUnavailableError("B", "past the bound"))  # final
    assert not transient(AuthenticationError("A", "authentication failed"))
    assert not transient(ClusterError("A", "not authorized"))
    assert not transient(ValueError("x"))


def test_the_backoff_doubles_up_to_its_cap():
    assert [backoff_s(n) for n in range(1, 7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff_s(3, first=1.0, cap=5.0) == 4.0


def test_retry_call_retries_transient_failures_and_returns(monkeypatch):
    slept: list[float] = []
    fake_time(monkeypatch, retry, sleep=slept.append)
    failures = [KafkaException(err(KafkaError.UNKNOWN_LEADER_EPOCH)), UnreachableError("A", "cannot reach it")]

    def call() -> str:
        if failures:
            raise failures.pop(0)
        return "offsets"

    assert retry_call(call, "B", "listing offsets", 60) == "offsets"
    assert slept == [0.1, 0.2]


def test_retry_call_raises_other_failures_at_once(monkeypatch):
    fake_time(monkeypatch, retry, sleep=lambda s: pytest.fail("no wait for a final error"))
    calls = []

    def call() -> None:
        calls.append(1)
        raise KafkaException(err(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    with pytest.raises(KafkaException):
        retry_call(call, "B", "listing offsets", 60)
    assert calls == [1]


def test_past_the_bound_one_message_names_cluster_call_bound_and_last_error(monkeypatch):
    ticks = iter([100.0, 100.0, 131.0, 131.0])
    fake_time(monkeypatch, retry, monotonic=lambda: next(ticks))

    def call() -> None:
        raise KafkaException(err(KafkaError._ALL_BROKERS_DOWN))

    with pytest.raises(BrokerUnavailableError) as exc:
        retry_call(call, "B", "describing topic 'A.orders'", 30, bound_name="the timeout")
    assert str(exc.value) == (
        "cluster 'B': describing topic 'A.orders': no success for 31 s, longer than the timeout (30 s); "
        "last error: as the broker said"
    )


def test_the_outage_message_names_the_setting(monkeypatch):
    fake_time(monkeypatch, retry, monotonic=lambda: 500.0)
    o = Outage(0.0)
    with pytest.raises(BrokerUnavailableError) as exc:
        o.wait("B", "copying t[0]", KafkaException(err(KafkaError._TRANSPORT)))
    assert str(exc.value) == (
        "cluster 'B': copying t[0]: no success for 0 s, longer than broker.outage.max.seconds (0); "
        "last error: as the broker said"
    )
    o.over()
    assert o.started is None and o.failures == 0
