"""An admin client that gets its brokers back after librdkafka dropped every one of them.

mirrorflow's admin clients run with `metadata.recovery.strategy=none` (connection.ADMIN_DEFAULTS: under
`rebootstrap` their group requests went unanswered for a minute and more under connection resets).
librdkafka (2.16) drops every broker a metadata answer does not name, and a broker in its controlled
shutdown answers with no broker at all: it is fenced, its listener still open. Any cluster whose last
broker stops cleanly (a single-broker cluster's restart, a whole cluster's) can give that answer. A client
under `none` then has no broker left and never asks bootstrap.servers again: every call fails ("No leaders
found", "Broker transport failure") long after the cluster is back. Seen here as a run's plan failing
after its whole outage bound (120 s) with the source back and serving (two full runs, 2026-12-01), and
reproduced: a client asking every 20 ms lost its brokers in 2 of 3 to 8 clean restarts; Kafka's Java
client ignores such an answer.

`RecoveringAdmin` stands in for the AdminClient and sees every answer. Once no call has been answered for
LOST_AFTER_S, the next call starts asking a new client (with the same settings) for the cluster's brokers, in
a thread of its own, and goes on to the old client; once the new one is answered, it takes the old one's place
for the calls after that. In a real outage the new client is not answered either and the old one is kept
(tried again after LOST_AFTER_S): a try never delays a call.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

LOST_AFTER_S = 5.0  # unanswered this long (and no sooner since the last try), a new client is tried
PROBE_S = 2.0  # how long the new client's first metadata request may take
RETIRED_S = 300.0  # how long a replaced client is kept for the calls made on it before (their timeouts are shorter)
# a call's failures that say "no broker answered" (errors with a code >= 0 are the cluster's answers, the other
# local ones neither). Not _NOENT: ListOffsets gives it for a lost client ("No leaders found") but also for a topic
# that does not exist, and the callers' retries ask for the topics' metadata then (kafka.retry.refresh_metadata),
# which a lost client fails with _TRANSPORT
UNANSWERED = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._DESTROY_BROKER,
}


class RecoveringAdmin:
    """An AdminClient (every method passes through) that replaces its librdkafka client when that one has
    lost its brokers (module docstring). `make` builds a client with the connection's settings."""

    def __init__(
        self,
        make: Callable[[], AdminClient],
        client: AdminClient,
        background: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self._make, self._client = make, client
        self._background = background or _in_a_thread  # where a new client is tried (tests: at once)
        self._unanswered_since: float | None = None
        self._tried = 0.0
        self._trying = threading.Lock()
        self._retired: list[tuple[float, AdminClient]] = []  # replaced clients, kept for RETIRED_S
        self.replaced = 0  # how many times a new client took the place of one that had lost its brokers

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not the client's (copy and pickle ask before __init__ ran)
            raise AttributeError(name)
        attr = getattr(self._current(), name)
        if name == "poll" or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                out = attr(*args, **kwargs)
            except KafkaException as exc:
                self._failed(exc)
                raise
            self._watch(out)
            return out

        return call

    def _watch(self, out: Any) -> None:
        if isinstance(out, concurrent.futures.Future):
            futures = [out]
        elif isinstance(out, dict):  # most calls: a future per topic, partition or group
            futures = [f for f in out.values() if isinstance(f, concurrent.futures.Future)]
        else:
            futures = []
        if not futures:
            self._unanswered_since = None  # a synchronous call answered
        # a weak reference: librdkafka answers a future on the client's own background thread and lets go of
        # it there; a callback holding the stand-in (and so the client) could make that thread the last holder,
        # and a client destroyed from its own thread crashes the process (a DR chaos run under load died of
        # SIGSEGV, which this fits; not proven)
        report = functools.partial(_report, weakref.ref(self))
        for fut in futures:
            fut.add_done_callback(report)

    def _done(self, fut: concurrent.futures.Future) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is None:
            self._unanswered_since = None
        else:
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if isinstance(err, KafkaError) and err.code() in UNANSWERED:
            if self._unanswered_since is None:
                self._unanswered_since = time.monotonic()
        elif not isinstance(err, KafkaError) or err.code() >= 0:
            self._unanswered_since = None  # the cluster answered, with an error of its own
        # else the client's own verdict (a negative code, "No leaders found" among them): no answer either way.
        # Taken as an answer, a lost client's ListOffsets ("No leaders found") reset the wait that its metadata
        # requests' "transport failure" had started, and the client was never replaced: a copy retried its
        # open-transaction check for its whole outage bound against a cluster back for minutes (the regression
        # guard, after a controller stall of 2 minutes had fenced the target's only broker, 2026-12-02)

    def _current(self) -> AdminClient:
        since, now = self._unanswered_since, time.monotonic()
        if since is None or now - since < LOST_AFTER_S or now - self._tried < LOST_AFTER_S:
            return self._client
        if self._trying.acquire(blocking=False):  # else another call started a try already
            self._tried = now
            self._background(self._try_new)
        return self._client  # this call goes to the old client: a try never delays a call

    def _try_new(self) -> None:
        try:
            fresh = self._make()
            answered = bool(fresh.list_topics(timeout=PROBE_S).brokers)
        except KafkaException:
            answered = False
        finally:
            self._trying.release()
        if answered:
            # the old client stays referenced a while: destroying it would fail the calls still in flight on it
            # ("Handle is terminating"), which may yet be answered if its brokers came back on their own
            now = time.monotonic()
            self._retired = [(at, c) for at, c in self._retired if now - at < RETIRED_S] + [(now, self._client)]
            self._client, self._unanswered_since = fresh, None
            self.replaced += 1


def _report(me: weakref.ref[RecoveringAdmin], fut: concurrent.futures.Future) -> None:
    """A future's answer to the stand-in, if it is still alive (else nobody is waiting for a new client)."""
    admin = me()
    if admin is not None:
        admin._done(fut)


def _in_a_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, name="mirrorflow-admin-recovery", daemon=True).start()
