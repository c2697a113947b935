"""RecoveringAdmin: a client that has lost its brokers is replaced once a new one is answered, and only then
(the real-broker case is tests/integration/test_broker_restart.py)."""
import concurrent.futures
import gc
import weakref
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorflow.kafka import lost_brokers
from mirrorflow.kafka.lost_brokers import LOST_AFTER_S, RecoveringAdmin
from tests.fake_time import fake_time


class Client:
    """An AdminClient's shape: `answers` says whether its calls are answered (else "transport failure")."""

    def __init__(self, name: str, answers: bool, brokers: int = 1) -> None:
        self.name, self.answers, self.brokers, self.calls = name, answers, brokers, 0

    def list_topics(self, topic=None, timeout=-1):
        self.calls += 1
        if not self.answers:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))
        return SimpleNamespace(brokers={i: i for i in range(self.brokers)}, topics={})

    def list_offsets(self, req, **kwargs):
        self.calls += 1
        fut: concurrent.futures.Future = concurrent.futures.Future()
        if self.answers:
            fut.set_result(0)
        else:
            fut.set_exception(KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure")))
        return {tp: fut for tp in req}


def at_once(work):
    """Where the stand-in tries a new client: here, before the call goes on (in use: a thread of its own)."""
    work()


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    fake_time(monkeypatch, lost_brokers, monotonic=lambda: now[0])
    return now


def test_a_client_unanswered_past_the_bound_is_replaced_by_one_that_is_answered(clock):
    lost, fresh = Client("lost", answers=False), Client("fresh", answers=True)
    admin = RecoveringAdmin(lambda: fresh, lost, at_once)
    futs = admin.list_offsets({("t", 0): None})
    assert isinstance(futs[("t", 0)].exception(), KafkaException)
    clock[0] += LOST_AFTER_S - 0.1
    with pytest.raises(KafkaException):
        admin.list_topics()
    assert admin.replaced == 0 and fresh.calls == 0  # not yet: a broker may be restarting
    clock[0] += 0.2
    assert admin.list_topics().brokers  # the new client was tried (at once here), then this call went to it
    assert admin.replaced == 1 and lost.calls == 2 and fresh.calls == 2
    # the old client is kept a while: destroying it would fail the calls still in flight on it
    assert [c for _, c in admin._retired] == [lost]


def test_in_a_real_outage_the_client_is_kept_and_a_new_one_tried_no_more_than_once_per_bound(clock):
    lost = Client("lost", answers=False)
    made = []

    def make():
        made.append(Client(f"new{len(made)}", answers=False))
        return made[-1]

    admin = RecoveringAdmin(make, lost, at_once)
    for _ in range(3):
        with pytest.raises(KafkaException):
            admin.list_topics()
        clock[0] += LOST_AFTER_S / 2
    # unanswered since the first call: tried once at LOST_AFTER_S, then not before another LOST_AFTER_S
    assert len(made) == 1 and admin.replaced == 0 and lost.calls == 3
    for _ in range(2):
        with pytest.raises(KafkaException):
            admin.list_topics()
        clock[0] += LOST_AFTER_S / 2
    assert len(made) == 2 and admin.replaced == 0


def test_an_answer_even_an_error_of_the_cluster_resets_the_wait(clock):
    lost, fresh = Client("lost", answers=False), Client("fresh", answers=True)
    admin = RecoveringAdmin(lambda: fresh, lost, at_once)
    with pytest.raises(KafkaException):
        admin.list_topics()
    clock[0] += LOST_AFTER_S - 1
    admin._failed(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))  # the cluster said no
    clock[0] += 2
    with pytest.raises(KafkaException):
        admin.list_topics()
    assert admin.replaced == 0 and fresh.calls == 0


def test_a_new_client_whose_answer_names_no_broker_does_not_take_the_place(clock):
    lost, empty = Client("lost", answers=False), Client("empty", answers=True, brokers=0)
    admin = RecoveringAdmin(lambda: empty, lost, at_once)
    with pytest.raises(KafkaException):
        admin.list_topics()
    clock[0] += LOST_AFTER_S
    with pytest.raises(KafkaException):
        admin.list_topics()
    assert admin.replaced == 0 and empty.calls == 1


def test_a_try_runs_beside_the_call_that_started_it_and_the_calls_after_it_go_to_the_new_client(clock):
    lost, fresh = Client("lost", answers=False), Client("fresh", answers=True)
    started = []
    admin = RecoveringAdmin(lambda: fresh, lost, started.append)
    with pytest.raises(KafkaException):
        admin.list_topics()
    clock[0] += LOST_AFTER_S
    with pytest.raises(KafkaException):  # went on to the old client: the try has not run yet
        admin.list_topics()
    assert len(started) == 1 and fresh.calls == 0
    with pytest.raises(KafkaException):  # one try at a time
        admin.list_topics()
    assert len(started) == 1
    started[0]()
    assert admin.list_topics().brokers and admin.replaced == 1 and lost.calls == 3


def test_a_call_in_flight_does_not_keep_the_stand_in_and_its_client_alive(clock):
    """librdkafka answers a future on the client's own background thread and lets go of it there: were the
    stand-in (and so the client) held by the future's callback, that thread could be the last holder and
    destroy the client from inside it, which crashes the process. The caller holds them, the future must not."""
    class Pending(Client):
        def list_offsets(self, req, **kwargs):
            self.pending = concurrent.futures.Future()  # never answered while the stand-in lives
            return {tp: self.pending for tp in req}

    client = Pending("pending", answers=True)
    admin = RecoveringAdmin(lambda: client, client, at_once)
    admin.list_offsets({("t", 0): None})
    held, pending = weakref.ref(admin), client.pending
    del admin
    gc.collect()
    assert held() is None  # gone with its caller's reference, in the caller's thread
    pending.set_result(0)  # answered later: the callback finds nobody and does nothing


def test_no_leaders_found_from_a_lost_client_does_not_reset_the_wait(clock):
    """A lost client's ListOffsets fails with _NOENT ("No leaders found"), a verdict of its own and no answer of the
    cluster's; the caller's metadata request after it fails with _TRANSPORT. Taken as an answer, _NOENT reset the
    wait each round and the client was never replaced (a copy's open-transaction check retried for 5 minutes)."""
    lost, fresh = Client("lost", answers=False), Client("fresh", answers=True)
    admin = RecoveringAdmin(lambda: fresh, lost, at_once)
    no_leaders = KafkaException(KafkaError(KafkaError._NOENT, "No leaders found"))
    for _ in range(2):  # list_offsets, then refresh_metadata's list_topics, as topic_admin.list_offsets retries
        admin._failed(no_leaders)
        with pytest.raises(KafkaException):
            admin.list_topics()
        clock[0] += LOST_AFTER_S / 2
    admin._failed(no_leaders)
    assert admin.replaced == 0
    # LOST_AFTER_S after the first transport failure: a new client is tried (at once here), and this call goes to it
    assert admin.list_topics().brokers
    assert admin.replaced == 1 and fresh.calls == 2 and lost.calls == 2
