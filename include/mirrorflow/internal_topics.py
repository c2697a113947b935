"""Small I/O helpers for MM2's single-partition internal topics (checkpoints, heartbeats).

They create the topic the way MirrorUtils.createCompactedTopic does (1 partition, compacted,
"already exists" is fine), read a partition from an offset to its current end with an
assign-mode consumer (no group membership, nothing committed), and produce a batch of records
and wait for every acknowledgement, so callers never report something as written that was not.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from . import clients
from .config import FLOW_PROPERTIES, ClusterConfig, FlowConfig
from .errors import ClusterError, TopicError

# librdkafka needs a group.id even for assign(); we never subscribe or commit with it.
READER_GROUP = "mirrorflow-internal-reader"


def overrides(flow: FlowConfig, kind: str) -> dict[str, str]:
    """flow.client_overrides(kind) without MM2 flow properties that share the prefix
    (`admin.timeout.ms` is MM2's admin timeout, not a librdkafka `timeout.ms`)."""
    return {k: v for k, v in flow.client_overrides(kind).items() if f"{kind}.{k}" not in FLOW_PROPERTIES}


@dataclass(frozen=True)
class RawRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def topic_exists(admin: AdminClient, cluster: ClusterConfig, topic: str, timeout: float = 10.0) -> bool:
    try:
        md = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    except KafkaException as exc:
        raise clients.describe_failure(cluster, exc) from None
    if md is None or md.error is not None and md.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return False
    if md.error is not None:
        raise ClusterError(cluster.alias, f"cannot describe topic {topic!r}: {md.error.str()}")
    return True


def ensure_compacted_topic(admin: AdminClient, cluster: ClusterConfig, topic: str,
                           replication_factor: int = -1, timeout: float = 30.0) -> bool:
    """Create `topic` (1 partition, cleanup.policy=compact) unless it exists; True if created."""
    if topic_exists(admin, cluster, topic):
        return False
    fut = admin.create_topics([NewTopic(topic, 1, replication_factor, config={"cleanup.policy": "compact"})],
                              request_timeout=timeout)[topic]
    try:
        fut.result(timeout)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise ClusterError(cluster.alias, f"cannot create topic {topic!r}: "
                                          f"{err.str() if isinstance(err, KafkaError) else exc}") from None
    _wait_metadata(admin, cluster, topic, timeout)
    return True


def _wait_metadata(admin: AdminClient, cluster: ClusterConfig, topic: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and md.partitions:
            return
        time.sleep(0.1)
    raise ClusterError(cluster.alias, f"topic {topic!r} was created but did not appear within {timeout:.0f}s")


def read_partition(cluster: ClusterConfig, topic: str, partition: int = 0, start: int | None = None,
                   timeout: float = 30.0, overrides: dict[str, Any] | None = None,
                   last: int | None = None) -> list[RawRecord]:
    """Every record of topic/partition from `start` (default: the log start) to the current end;
    with `last`, only the records among the last `last` offsets.

    The end is the high watermark read first; reading stops there, so a concurrent writer cannot
    make this loop forever. Raises ClusterError if the end is not reached within `timeout`
    (a partial read would break the checkpoint monotonicity guard).
    """
    conf = {**(overrides or {}), "group.id": READER_GROUP, "enable.auto.commit": False,
            "enable.partition.eof": True, "auto.offset.reset": "earliest",
            "isolation.level": "read_committed"}
    try:
        consumer = clients.consumer(cluster, conf)
    except KafkaException as exc:
        raise clients.describe_failure(cluster, exc) from None
    try:
        tp = TopicPartition(topic, partition)
        try:
            lo, hi = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                                KafkaError._UNKNOWN_PARTITION):
                raise TopicError(f"topic {topic!r} partition {partition} does not exist on cluster {cluster.alias!r}") from None
            raise clients.describe_failure(cluster, exc) from None
        begin = lo if start is None else max(lo, start)
        if last is not None:
            begin = max(begin, hi - last)
        if begin >= hi:
            return []
        consumer.assign([TopicPartition(topic, partition, begin)])
        out: list[RawRecord] = []
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() > deadline:
                raise ClusterError(cluster.alias, f"timed out reading {topic!r} partition {partition} "
                                                  f"(at {out[-1].offset + 1 if out else begin} of {hi})")
            for m in consumer.consume(500, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= hi:
                            return out
                        continue
                    raise ClusterError(cluster.alias, f"reading {topic!r} partition {partition}: {err.str()}")
                out.append(RawRecord(m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]))
                if m.offset() + 1 >= hi:
                    return out
    finally:
        consumer.close()


def produce_all(cluster: ClusterConfig, topic: str, records: Iterable[tuple[bytes, bytes, int]],
                partition: int = 0, overrides: dict[str, Any] | None = None, timeout: float = 30.0) -> int:
    """Produce (key, value, timestamp_ms) records to one partition; raise unless all were acknowledged."""
    conf = {**(overrides or {}), "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    try:
        producer = clients.producer(cluster, conf)
    except KafkaException as exc:
        raise clients.describe_failure(cluster, exc) from None
    errors: list[str] = []
    sent = 0

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err.str())

    for key, value, ts in records:
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=partition, timestamp=ts, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
    left = producer.flush(timeout)
    if left:
        raise ClusterError(cluster.alias, f"{left} of {sent} records to {topic!r} were not acknowledged within {timeout:.0f}s")
    if errors:
        raise ClusterError(cluster.alias, f"writing to {topic!r} failed: {errors[0]}"
                                          + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
    return sent
