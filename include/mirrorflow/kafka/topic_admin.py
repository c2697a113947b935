"""Topic helpers on one cluster: existence, partitions, creation, offsets, and a bulk produce.

Compacted single-partition topics are created as MirrorUtils.createCompactedTopic does (1
partition, compacted, "already exists" is fine). `produce_all` waits for every acknowledgement, so
callers never report something as written that was not. Offset listings are batched (one request
for many partitions) and retried through leadership changes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import OFFSET_INVALID, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from mirrorflow.errors import ClusterError
from mirrorflow.kafka.connection import ClusterConnection, kafka_error, produce_queued, warm_producer
from mirrorflow.kafka.log_reader import MISSING, RETRIABLE
from mirrorflow.kafka.retry import (
    Outage,
    UnacknowledgedError,
    refresh_metadata,
    retry_call,
    stale_metadata,
    transient_error,
)

# A partition that is missing may only be new (its metadata still spreading): retried this long.
MISSING_GRACE_S = 5.0


def topic_exists(
    admin: AdminClient, conn: ClusterConnection, topic: str, timeout: float = 10.0, bound_s: float = 0.0
) -> bool:
    """Whether `topic` exists on the cluster. Transient failures (a broker restarting, a leader not
    yet elected for a topic just created) are retried for up to `bound_s` (0: reported at once)."""

    def describe() -> bool:
        md = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if md is None or md.error is not None and md.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        if md.error is not None:
            if transient_error(md.error):
                raise KafkaException(md.error)
            raise ClusterError(conn.alias, f"cannot describe topic {topic!r}: {md.error.str()}")
        return True

    try:
        if bound_s > 0:
            return retry_call(describe, conn.alias, f"describing topic {topic!r}", bound_s, bound_name="the timeout")
        return describe()
    except KafkaException as exc:
        raise conn.describe_failure(exc) from None


def create_topics(
    admin: AdminClient, conn: ClusterConnection, topics: list[NewTopic], timeout: float = 30.0
) -> list[str]:
    """Create `topics` (an existing one is fine) and wait until each has its partitions; returns
    the names this call created."""
    if not topics:
        return []
    created: list[str] = []
    pending, outage = list(topics), Outage(timeout, bound_name="the timeout")
    while pending:
        retry: list[NewTopic] = []
        last: KafkaException | None = None
        by_name = {t.topic: t for t in pending}
        for name, fut in admin.create_topics(pending, operation_timeout=timeout, request_timeout=timeout).items():
            try:
                fut.result(timeout + 30)
                created.append(name)
            except KafkaException as exc:
                err = kafka_error(exc)
                if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if transient_error(err):  # the controller moved or a broker restarts: ask again
                    retry.append(by_name[name])
                    last = exc
                    continue
                raise ClusterError(conn.alias, f"cannot create topic {name!r}: {err.str() if err else exc}") from None
        if retry and last is not None:
            outage.wait(conn.alias, f"creating topic {retry[0].topic!r}", last)
        pending = retry
    for t in topics:
        wait_for_topic(admin, conn, t.topic, timeout)
    return created


def ensure_compacted_topic(
    admin: AdminClient, conn: ClusterConnection, topic: str, replication_factor: int = -1, timeout: float = 30.0
) -> bool:
    """Create `topic` (1 partition, cleanup.policy=compact) unless it exists; True if created."""
    if topic_exists(admin, conn, topic, bound_s=timeout):
        return False
    new = NewTopic(topic, 1, replication_factor, config={"cleanup.policy": "compact"})
    return bool(create_topics(admin, conn, [new], timeout))


def wait_for_topic(admin: AdminClient, conn: ClusterConnection, topic: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(topic, timeout=5).topics.get(topic)
        except KafkaException as exc:  # a broker restarting while the topic spreads: ask again
            if not transient_error(kafka_error(exc)):
                raise conn.describe_failure(exc) from None
            md = None
        if md is not None and md.error is None and md.partitions:
            return
        time.sleep(0.1)
    raise ClusterError(conn.alias, f"topic {topic!r} was created but did not appear within {timeout:.0f}s")


# librdkafka matches a ListOffsets answer to its request partition by partition, in time quadratic
# in the request's size: 10,000 partitions in one request took 6.9 s, in requests of 1,000 1.5 s.
LIST_OFFSETS_CHUNK = 1000


def list_offsets(
    admin: AdminClient,
    conn: ClusterConnection,
    tps: Iterable[tuple[str, int]],
    spec: Any,
    committed: bool = True,
    timeout: float = 60.0,
) -> dict[tuple[str, int], int]:
    """Batched ListOffsets requests for many partitions (`committed`: the last stable offset, else
    the high watermark), LIST_OFFSETS_CHUNK partitions each, all in flight at once, retried through
    retriable errors until `timeout`. After an answer from a stale leader (a broker restarted) the
    topics' metadata is asked for again: the client's cache would keep the old leader epochs."""
    tps = list(tps)
    if not tps:
        return {}
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    started = time.monotonic()
    while True:
        try:
            futs: dict[TopicPartition, Any] = {}
            for i in range(0, len(tps), LIST_OFFSETS_CHUNK):  # every chunk is sent before any answer is awaited
                req = {TopicPartition(t, p): spec for t, p in tps[i : i + LIST_OFFSETS_CHUNK]}
                futs.update(
                    admin.list_offsets(req, isolation_level=level, request_timeout=max(1.0, min(30.0, timeout)))
                )
            got = {(tp.topic, tp.partition): f.result().offset for tp, f in futs.items()}
            unanswered = sorted(k for k, offset in got.items() if offset == OFFSET_INVALID)
            if not unanswered:
                return got
            # an answer cut by a connection reset: librdkafka reports these partitions with no offset
            # (-1001) and no error; taken as an end, a failback read nothing of the divergence on A
            if time.monotonic() - started > timeout:
                what = ", ".join(f"{t}[{p}]" for t, p in unanswered[:5])
                raise ClusterError(conn.alias, f"cannot list offsets of {what}: no offset in the answers") from None
            time.sleep(0.2)
        except KafkaException as exc:
            err = kafka_error(exc)
            code = err.code() if err is not None else None
            missing, gone = code in MISSING, None
            if stale_metadata(err):  # the client's cached leader epochs are old: ask for the topics again
                gone = refresh_metadata(admin, {t for t, _ in tps})
                missing = missing or bool(gone)  # _NOENT ("no leaders found") for a topic that does not exist
            waited = time.monotonic() - started
            retriable = code in RETRIABLE or transient_error(err) or stale_metadata(err)
            if not retriable or waited > (min(timeout, MISSING_GRACE_S) if missing else timeout):
                what = f"{len(tps)} partition(s)" if len(tps) > 1 else f"{tps[0][0]}[{tps[0][1]}]"
                why = f"topic {sorted(gone)[0]!r} does not exist" if gone else err.str() if err else str(exc)
                raise ClusterError(conn.alias, f"cannot list offsets of {what}: {why}") from None
            time.sleep(0.2)


def produce_all(
    conn: ClusterConnection,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None, int]],
    partition: int = 0,
    producer_conf: Mapping[str, Any] | None = None,
    timeout: float = 30.0,
) -> int:
    """Produce (key, value, timestamp_ms) records to one partition; raise unless all were acknowledged
    (UnacknowledgedError, transient, when a broker coming back may cure it)."""
    conf = _produce_all_conf(producer_conf)
    # one write at a time per shared producer: a failed write purges what the producer holds, which must be
    # its own records only (a lease renewal that timed out under load purged a control write another thread
    # had queued: "Local: Purged in queue", a hard error, found by the model-based search), and a flush then
    # waits for its own records only
    began, lock = time.monotonic(), _write_lock(conn, conf)
    if not lock.acquire(timeout=timeout):
        raise UnacknowledgedError(
            conn.alias, f"a write to {topic!r} waited {timeout:.0f}s for another write on the same connection"
        )
    left = max(0.1, timeout - (time.monotonic() - began))  # what waiting for the lock left of the time
    try:
        producer = _reused_producer(conn, conf, topic, min(1.0, timeout))
        try:
            return _produce_flush(conn, producer, topic, records, partition, left)
        except BaseException:
            _drop_producer(conn, conf)  # a failed producer may be fatally errored: the next call gets a new one
            # and what it still holds is never sent: a record written again after this failure must not
            # be overtaken by this one arriving late (a pause retried, then a resume, then the old pause)
            try:
                producer.purge()
                producer.flush(0)
            except (KafkaException, RuntimeError):
                pass  # the first failure is the one to report
            raise
    finally:
        lock.release()


# A new idempotent producer spends 0.5-1 s on its first write: librdkafka asks for its producer id
# and the topic's leader before any broker connection is up and retries on 500 ms timers. A run
# writes control records (lease, run log, release) a few times: one producer per connection and
# settings, kept as long as the connection (its FlowClients), and warmed by one metadata request for
# the topic it first writes (`warm_producer`: ~50 ms), pays that once.
_PRODUCERS_LOCK = threading.Lock()


def _producer_key(conf: Mapping[str, Any]) -> str:
    return repr(sorted((str(k), str(v)) for k, v in conf.items()))


def _write_lock(conn: ClusterConnection, conf: Mapping[str, Any]) -> threading.Lock:
    """The lock of `produce_all`'s writes through the connection's producer with these settings."""
    with _PRODUCERS_LOCK:
        locks: dict[str, threading.Lock] = conn.__dict__.setdefault("_produce_all_locks", {})
        return locks.setdefault(_producer_key(conf), threading.Lock())


def _reused_producer(conn: ClusterConnection, conf: Mapping[str, Any], topic: str, warm_s: float) -> Producer:
    with _PRODUCERS_LOCK:
        cache: dict[str, Producer] = conn.__dict__.setdefault("_produce_all_producers", {})
        key = _producer_key(conf)
        if key not in cache:
            cache[key] = conn.producer(conf)
            warm_producer(cache[key], topic, warm_s)
        return cache[key]


def _produce_all_conf(producer_conf: Mapping[str, Any] | None) -> dict[str, Any]:
    return {**(producer_conf or {}), "enable.idempotence": True, "acks": "all", "linger.ms": 5}


def prepare_produce_all(conn: ClusterConnection, topic: str, producer_conf: Mapping[str, Any] | None = None) -> None:
    """Build, in the background, the producer `produce_all` will use for `topic`. Its first write
    waits for its producer id, which librdkafka asks for only once a broker connection is up and
    otherwise on a 500 ms timer: a run's first control write (its lease) took 0.5 s in about half
    of the runs, 0.05 s in the others. Started as the run starts, that wait overlaps its first reads."""

    def build() -> None:
        with contextlib.suppress(Exception):  # only saves time: produce_all reports what fails
            _reused_producer(conn, _produce_all_conf(producer_conf), topic, 1.0)

    threading.Thread(target=build, name="mirrorflow-prepare-producer", daemon=True).start()


def _drop_producer(conn: ClusterConnection, conf: Mapping[str, Any]) -> None:
    with _PRODUCERS_LOCK:
        conn.__dict__.get("_produce_all_producers", {}).pop(_producer_key(conf), None)


def _produce_flush(
    conn: ClusterConnection,
    producer: Producer,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None, int]],
    partition: int,
    timeout: float,
) -> int:
    errors: list[KafkaError] = []
    sent = 0

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for key, value, ts in records:
        produce_queued(
            producer, topic, key=key, value=value, partition=partition, timestamp=ts, on_delivery=on_delivery
        )
        sent += 1
        producer.poll(0)
    left = producer.flush(timeout)
    if left:  # a broker away: UnacknowledgedError is transient (a caller may write the records again)
        raise UnacknowledgedError(
            conn.alias, f"{left} of {sent} records to {topic!r} were not acknowledged within {timeout:.0f}s"
        )
    if errors:
        kind = UnacknowledgedError if all(transient_error(e) for e in errors) else ClusterError
        raise kind(
            conn.alias,
            f"writing to {topic!r} failed: {errors[0].str()}"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
        )
    return sent


def topic_ids(
    admin: AdminClient, conn: ClusterConnection, names: Iterable[str], timeout: float = 30.0
) -> dict[str, str]:
    """The topic ID (KIP-516) of each existing topic of `names`, in one DescribeTopics request;
    topics that do not exist are left out. A recreated topic keeps its name but gets a new ID."""
    from confluent_kafka import TopicCollection

    names = sorted(set(names))
    if not names:
        return {}

    def describe() -> dict[str, str]:
        out: dict[str, str] = {}
        futures = admin.describe_topics(TopicCollection(names), request_timeout=min(timeout, 30.0))
        for name, fut in futures.items():
            try:
                out[name] = str(fut.result().topic_id)
            except KafkaException as exc:
                err = kafka_error(exc)
                if err is not None and err.code() in MISSING:
                    continue
                if transient_error(err):
                    raise  # retried as a whole
                raise ClusterError(conn.alias, f"cannot describe topic {name!r}: {err.str() if err else exc}") from None
        return out

    what = f"describing topic {names[0]!r}" if len(names) == 1 else f"describing {len(names)} topics"
    return retry_call(describe, conn.alias, what, timeout, bound_name="the timeout")


def compacted_topics(admin: AdminClient, conn: ClusterConnection, topics: Iterable[str]) -> set[str]:
    """The topics of `topics` whose cleanup.policy includes compact (the log cleaner may remove
    records from them: superseded values, and tombstones after delete.retention.ms)."""
    names = sorted(set(topics))
    if not names:
        return set()
    out = set()
    try:
        futs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in names])
        for res, fut in futs.items():
            entry = fut.result(30).get("cleanup.policy")
            if entry is not None and "compact" in str(entry.value):
                out.add(res.name)
    except KafkaException as exc:
        raise conn.describe_failure(exc) from None
    return out
