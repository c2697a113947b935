"""Connecting to one Kafka cluster, with every failure turned into one clear ClusterError.

`ClusterConnection` is the only place a librdkafka client is constructed: an unreachable cluster
or a wrong password reads the same everywhere ("cluster 'A': cannot reach 127.0.0.1:19092 ...",
"cluster 'A': authentication failed ...", an untrusted certificate "cluster 'A': TLS handshake
failed ..."; `AuthenticationError` for every way of being refused). It takes settings that are already resolved (secrets
included): it never logs them, and its repr shows none.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Mapping
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from mirrorflow.errors import AuthenticationError, ClusterError, UnreachableError
from mirrorflow.kafka.lost_brokers import RecoveringAdmin

AUTH_CODES = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
AUTHZ_CODES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
DIAGNOSE_TIMEOUT_S = 3.0  # how long describe_failure looks for a refused login behind a transport failure
UNREACHABLE_CODES = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}
# librdkafka settings of every admin client, under the cluster's own (which may set them otherwise).
# metadata.recovery.strategy: librdkafka's default, `rebootstrap`, starts over from bootstrap.servers
# whenever every broker connection is down at once (a reset network path, a single-broker cluster's
# restart): it decommissions the broker handles, but the group coordinators an admin client had found
# stay cached on the old handles, which never send again, so every group request (offset fetches and
# commits) times out until those entries expire: 60 s and more under connection resets every 4 s,
# where `none` fails only the request in flight at each reset
# (tests/chaos/test_network_faults.py::test_group_requests_are_answered_between_connection_resets).
# Admin clients only: consumers and producers with `none` did not recover from a target restart
# (tests/integration/test_broker_restart.py), and their reads and transactions ride resets out.
# `none` leaves a client with no broker after a metadata answer that names none (a cluster's last broker
# in its controlled shutdown): `admin()` hands out a RecoveringAdmin (kafka.lost_brokers) for that.
ADMIN_DEFAULTS: dict[str, Any] = {"metadata.recovery.strategy": "none"}
# librdkafka settings of every client, under the cluster's own. reconnect.backoff.ms: librdkafka holds a
# new client's first connection for half of it (its "sparse connections" interval, at least 11 ms), so with
# its default, 100 ms, a new client's first request waited 50 ms in most cases (14 ms with 20): a run makes
# a client per state read and per task. The backoff still doubles per failed attempt up to
# reconnect.backoff.max.ms (10 s), so an outage costs a few more early attempts, no more.
CLIENT_DEFAULTS: dict[str, Any] = {"reconnect.backoff.ms": 20}
# librdkafka reports TLS handshake failures as transport errors; their text tells them apart
# (OpenSSL's reason strings): the broker's certificate is not trusted, or it rejects ours
TLS_UNTRUSTED_TEXT = ("certificate verify failed", "self-signed certificate", "unable to get local issuer")
TLS_REJECTED_TEXT = (
    "alert bad certificate",
    "alert certificate required",
    "alert unknown ca",
    "alert handshake failure",
)


def tls_failure(err: KafkaError) -> str | None:
    """'untrusted' / 'rejected' for a TLS handshake failure, None for anything else."""
    if err.code() not in (KafkaError._SSL, KafkaError._TRANSPORT):
        return None
    text = err.str().lower()
    if any(t in text for t in TLS_UNTRUSTED_TEXT):
        return "untrusted"
    if any(t in text for t in TLS_REJECTED_TEXT):
        return "rejected"
    return "untrusted" if err.code() == KafkaError._SSL else None


class ErrorWatch:
    """error_cb that remembers the first fatal-looking error (authentication, a TLS handshake
    failure) so callers can report it instead of "transport failure"."""

    def __init__(self) -> None:
        self.error: KafkaError | None = None
        self._lock = threading.Lock()

    def __call__(self, err: KafkaError) -> None:
        with self._lock:
            if self.error is None and (err.code() in AUTH_CODES or err.fatal() or tls_failure(err)):
                self.error = err


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError inside a KafkaException, if any."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


@functools.cache
def setting_problem(key: str) -> str | None:
    """Why librdkafka would refuse a client setting's name (None: it knows it), asked of a client
    that connects nowhere (no bootstrap.servers) with a dummy value, so nothing is loaded."""
    if key in ("bootstrap.servers", "plugin.library.paths"):  # known; and never load a plugin here
        return None
    try:
        Producer({key: "x", "log_level": 0})
    except KafkaException as exc:
        err = kafka_error(exc)
        msg = err.str() if err is not None else str(exc)
        if "No such configuration property" in msg:
            return "unknown client setting (not a librdkafka property)"
        if "Java" in msg:
            return f"a Java client setting librdkafka does not support: {msg.split(' See ')[0]}"
    except (TypeError, ValueError):
        return None
    return None


class ClusterConnection:
    """Builds admin clients, consumers and producers for one cluster (alias + resolved settings)."""

    def __init__(self, alias: str, settings: Mapping[str, Any], where: str | None = None) -> None:
        self.alias = alias
        self._settings = dict(settings)
        # how a message names the cluster's address (never a secret)
        self.where = where or str(self._settings.get("bootstrap.servers", "")) or alias

    def __repr__(self) -> str:
        return f"ClusterConnection({self.alias!r}, {self.where!r})"

    def settings(self, conf: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The cluster's settings with `conf` on top. Never log the result."""
        return {**self._settings, **(conf or {})}

    def describe_failure(self, exc: BaseException, watch: ErrorWatch | None = None) -> ClusterError:
        """A ClusterError for a failed call: authentication, authorization or reachability. A
        transport failure seen without an ErrorWatch (a consumer's watermarks, a producer's flush)
        is diagnosed first: a refused login or TLS handshake is reported as that, not "cannot reach"."""
        err = watch.error if watch and watch.error else kafka_error(exc)
        code = err.code() if err is not None else None
        if watch is None and code in UNREACHABLE_CODES:
            refused = self._diagnose()
            if refused is not None:
                return refused
        text = err.str() if err is not None else f"{type(exc).__name__}: {exc}"
        if code in AUTH_CODES:
            return AuthenticationError(
                self.alias, f"authentication failed at {self.where}: {self._auth_hint()} ({text})"
            )
        tls = tls_failure(err) if err is not None else None
        if tls == "untrusted":
            return AuthenticationError(
                self.alias,
                f"TLS handshake failed at {self.where}: the broker's certificate is not trusted (ssl.ca.location "
                f"must hold the CA that signed it, and the certificate must name the host) ({text})",
            )
        if tls == "rejected":
            return AuthenticationError(
                self.alias,
                f"TLS handshake failed at {self.where}: the broker rejected the client certificate (mTLS: check "
                f"ssl.certificate.location / ssl.key.location and that the broker trusts their CA) ({text})",
            )
        if code in AUTHZ_CODES:
            return ClusterError(self.alias, f"not authorized: {text}")
        if code in UNREACHABLE_CODES:
            return UnreachableError(self.alias, f"cannot reach {self.where} ({text})")
        return ClusterError(self.alias, text)

    def _diagnose(self) -> AuthenticationError | None:
        """The AuthenticationError a fresh admin client meets within DIAGNOSE_TIMEOUT_S (librdkafka
        reports a refused login or handshake only through error_cb), else None."""
        watch = ErrorWatch()
        try:
            admin = AdminClient({**self._settings, "error_cb": watch})
            self.check(admin, watch, DIAGNOSE_TIMEOUT_S)
        except AuthenticationError as refused:
            return refused
        except (ClusterError, KafkaException):
            return None
        return None

    def _auth_hint(self) -> str:
        mechanism = str(self._settings.get("sasl.mechanism") or self._settings.get("sasl.mechanisms") or "")
        if mechanism.upper() == "OAUTHBEARER":
            return "the broker rejected the OAuth token (expired, not yet valid, or not signed as it expects)"
        return f"check the SASL username and password (mechanism {mechanism or 'GSSAPI'})"

    def admin(self, conf: Mapping[str, Any] | None = None, check_timeout: float | None = 10.0) -> AdminClient:
        """An AdminClient; with `check_timeout` it first proves the cluster answers (and we may log in)."""
        watch = ErrorWatch()
        settings = {**CLIENT_DEFAULTS, **ADMIN_DEFAULTS, **self.settings(conf), "error_cb": watch}
        try:
            admin = AdminClient(settings)
        except KafkaException as exc:
            raise self.describe_failure(exc) from None
        if check_timeout:
            self.check(admin, watch, check_timeout)
        # a stand-in with every method of the AdminClient: it replaces a client that lost its brokers
        return cast(AdminClient, RecoveringAdmin(lambda: AdminClient(settings), admin))

    def check(self, admin: AdminClient, watch: ErrorWatch | None = None, timeout: float = 10.0) -> None:
        """Prove the cluster answers. Asks in slices of at most 2 s and serves error_cb between
        them, so a refused login or TLS handshake fails after the first slice, not the whole
        `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                admin.list_topics(timeout=max(0.1, min(2.0, remaining)))
                break
            except KafkaException as exc:
                # error_cb runs only from poll(): serve the queued errors so an authentication failure
                # is reported as one (list_topics itself only says "transport failure")
                admin.poll(0.2)
                if (watch and watch.error) or time.monotonic() >= deadline:
                    raise self.describe_failure(exc, watch) from None
        if watch and watch.error:
            raise self.describe_failure(KafkaException(watch.error), watch)

    def producer(self, conf: Mapping[str, Any] | None = None) -> Producer:
        try:
            return Producer({**CLIENT_DEFAULTS, **self.settings(conf)})
        except KafkaException as exc:
            raise self.describe_failure(exc) from None

    def consumer(self, conf: Mapping[str, Any] | None = None) -> Consumer:
        try:
            return Consumer({**CLIENT_DEFAULTS, **self.settings(conf)})
        except KafkaException as exc:
            raise self.describe_failure(exc) from None


def warm_metadata(client: Any, topic: str, timeout: float = 1.0) -> None:
    """One metadata request for `topic` on a new client: its broker connections come up and the
    topic's leaders are known before the first fetch or produce, which otherwise waits for
    librdkafka's 500 ms retry timers (a new consumer's first read of a topic took 0.5 s, a new
    idempotent producer's first write 1 s; 50 ms with this). Short (it only saves time): failures
    are left to the call that follows, which reports them with its own retries, bound and context."""
    with contextlib.suppress(KafkaException, RuntimeError):
        client.list_topics(topic, timeout=timeout)


def produce_queued(producer: Any, *args: Any, **kwargs: Any) -> None:
    """producer.produce(*args, **kwargs), waiting while the producer's local queue is full (deliveries
    drain it) instead of failing with BufferError."""
    while True:
        try:
            producer.produce(*args, **kwargs)
            return
        except BufferError:
            producer.poll(0.1)


def warm_producer(producer: Any, topic: str, timeout: float = 1.0) -> None:
    """`warm_metadata` for a new idempotent producer, asked twice. librdkafka (2.16) retires the
    bootstrap connection once the first metadata answer names the cluster's brokers, and asks for the
    producer id when a metadata answer arrives while a broker is up, else on a 500 ms timer: when the
    first answer came through the connection being retired, the id (and the first write) waited for
    that timer, in 7 of 12 runs measured here (0.4 s of an idle run's 0.9). The second answer comes from
    a broker the producer keeps, and the id is asked for at once (0 of 12)."""
    warm_metadata(producer, topic, timeout)
    warm_metadata(producer, topic, timeout)


def warm_topics(client: Any, topics: list[str], timeout: float = 5.0) -> None:
    """`warm_metadata` for the topics a consumer is about to read one partition after another. A
    consumer assigned a partition of a topic it has no metadata for asks for it on librdkafka's
    fast-refresh timer, whose backoff grows (measured on a local broker: 0.04-0.66 s per switch to
    a new topic, 12 ms with the metadata asked for first): a lane over many quiet partitions of many
    topics paid that once per partition. One request: the topic's, or the whole cluster's."""
    if len(topics) == 1:
        warm_metadata(client, topics[0], timeout)
        return
    with contextlib.suppress(KafkaException, RuntimeError):
        if topics:
            client.list_topics(timeout=timeout)
