"""Kafka clients for a configured cluster, with failures turned into one clear ClusterError.

Everything that talks to Kafka gets its AdminClient / Producer / Consumer here, so secrets are
resolved in one place and an unreachable cluster or a wrong password reads the same everywhere
("cluster 'A': cannot reach 127.0.0.1:19092 ...", "cluster 'A': authentication failed ...").
"""
from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from .config import ClusterConfig
from .errors import ClusterError

AUTH_CODES = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}


class _ErrorWatch:
    """error_cb that remembers the first fatal-looking error (auth) so callers can report it."""

    def __init__(self) -> None:
        self.error: KafkaError | None = None
        self._lock = threading.Lock()

    def __call__(self, err: KafkaError) -> None:
        with self._lock:
            if self.error is None and (err.code() in AUTH_CODES or err.fatal()):
                self.error = err


def client_config(cluster: ClusterConfig, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """librdkafka settings for `cluster` (secrets resolved) with per-flow overrides on top."""
    conf: dict[str, Any] = dict(cluster.client_config())
    conf.update({k: v for k, v in (overrides or {}).items()})
    return conf


def describe_failure(cluster: ClusterConfig, exc: BaseException, watch: _ErrorWatch | None = None) -> ClusterError:
    """A ClusterError for a failed call: authentication, authorization or reachability."""
    err = watch.error if watch and watch.error else (exc.args[0] if isinstance(exc, KafkaException) and exc.args else None)
    code = err.code() if isinstance(err, KafkaError) else None
    where = cluster.bootstrap_servers or f"(connection {cluster.airflow_conn_id})"
    if code in AUTH_CODES:
        return ClusterError(cluster.alias, f"authentication failed at {where}: check the SASL username and password "
                                           f"({err.str() if isinstance(err, KafkaError) else err})")
    if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
        return ClusterError(cluster.alias, f"not authorized: {err.str()}")  # type: ignore[union-attr]
    if code in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
        return ClusterError(cluster.alias, f"cannot reach {where} ({err.str()})")  # type: ignore[union-attr]
    return ClusterError(cluster.alias, f"{type(exc).__name__}: {exc}")


def admin_client(cluster: ClusterConfig, overrides: dict[str, Any] | None = None,
                 check_timeout: float | None = 10.0) -> AdminClient:
    """An AdminClient; with `check_timeout` it first proves the cluster answers (and we may log in)."""
    watch = _ErrorWatch()
    admin = AdminClient({**client_config(cluster, overrides), "error_cb": watch})
    if check_timeout:
        check(cluster, admin, watch, check_timeout)
    return admin


def check(cluster: ClusterConfig, admin: AdminClient, watch: _ErrorWatch | None = None, timeout: float = 10.0) -> None:
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        # error_cb runs only from poll(): serve the queued errors so an authentication failure
        # is reported as one (list_topics itself only says "transport failure")
        admin.poll(0.5)
        raise describe_failure(cluster, exc, watch) from None
    if watch and watch.error:
        raise describe_failure(cluster, KafkaException(watch.error), watch)


def producer(cluster: ClusterConfig, overrides: dict[str, Any] | None = None) -> Producer:
    return Producer(client_config(cluster, overrides))


def consumer(cluster: ClusterConfig, overrides: dict[str, Any] | None = None) -> Consumer:
    return Consumer(client_config(cluster, overrides))
