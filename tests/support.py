"""Small helpers tests use to put records into and read records out of real clusters."""
from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from mirrorflow.kafka.retry import refresh_metadata
from mirrorflow_dev.dev_cluster import DevCluster


@dataclass(frozen=True)
class Rec:
    """A record as tests compare it: everything a faithful copy must preserve."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    def content(self) -> tuple:
        """What must be equal on source and target (offsets may differ)."""
        return (self.partition, self.key, self.value, self.headers, self.timestamp)


def admin(cluster: DevCluster, user: str = "admin") -> AdminClient:
    return AdminClient(cluster.client_config(user))


def set_topic_config(cluster: DevCluster, topic: str, **values: str) -> None:
    """Set `topic`'s configs (`cleanup_policy="delete"` sets cleanup.policy), as kafka-configs.sh
    --alter --add-config does."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in values.items()]
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    a = admin(cluster)  # alive until its future resolves
    a.incremental_alter_configs([res])[res].result(30)


def create_topic(cluster: DevCluster, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    a = admin(cluster)  # keep the client alive until its futures resolve
    a.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)
    wait_for_topic(cluster, name, partitions)


def wait_for_topic(cluster: DevCluster, name: str, partitions: int | None = None, timeout: float = 30) -> None:
    a = admin(cluster)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = a.list_topics(name, timeout=5).topics.get(name)
        if md and not md.error and (partitions is None or len(md.partitions) >= partitions):
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {name} did not appear on {cluster.alias}")


def producer(cluster: DevCluster, **extra: str) -> Producer:
    return Producer({**cluster.client_config(), "linger.ms": 5, "message.max.bytes": 20_000_000, **extra})


def produce(cluster: DevCluster, topic: str, records: list[dict], **extra: str) -> None:
    """records: dicts with partition, key, value, headers (list of (k, v)), timestamp (ms)."""
    p = producer(cluster, **extra)
    errors: list[str] = []

    def on_delivery(err, msg):
        if err:
            errors.append(str(err))

    for r in records:
        kwargs = {k: r[k] for k in ("partition", "key", "value", "headers", "timestamp") if r.get(k) is not None}
        if "value" in r and r["value"] is None:
            kwargs["value"] = None
        while True:
            try:
                p.produce(topic, on_delivery=on_delivery, **kwargs)
                break
            except BufferError:  # librdkafka's queue is full (a loaded broker is slow): let deliveries drain
                p.poll(0.5)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors


def end_transaction(p: Producer, commit: bool, timeout: float = 30) -> None:
    """Commit or abort a test producer's transaction. Before an abort, wait for the records to be
    acknowledged: librdkafka may send EndTxn before the coordinator has registered the partition
    (confluentinc/librdkafka#4849), and the broker then answers a fatal INVALID_TXN_STATE ("Failed
    to end transaction"; failed test_verify once in a fresh-clone run)."""
    if commit:
        p.commit_transaction(timeout)
    else:
        p.flush(timeout)  # what is still unacknowledged after it (a broker down), the abort purges
        p.abort_transaction(timeout)


# a partition whose leader is not settled yet: asked again a moment later
_LEADER_SETTLING = (KafkaError._UNKNOWN_PARTITION, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)


def _high_watermark(c: Consumer, topic: str, p: int, wait_s: float = 30) -> int:
    """The partition's high watermark. A partition just added (a sync, a model step) is listed by the admin
    client before a new consumer's metadata knows its leader ("Local: Unknown partition"), and a broker just
    restarted answers "Not leader for partition" until it leads its partitions again: both are asked again
    a moment later (a model-based search and a DR chaos run each stopped on one once)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        except KafkaException as exc:
            if exc.args[0].code() not in _LEADER_SETTLING or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def consume_all(cluster: DevCluster, topic: str, partitions: list[int] | None = None,
                isolation: str = "read_committed", timeout: float = 120, user: str = "admin") -> list[Rec]:
    """Every record of `topic` (up to the current end), ordered by partition then offset. `timeout` only names a
    read that is stuck (it returns once every partition is read): 30 s was too little for the broker restart tests'
    400,000-600,000 records on a loaded machine (both failed so in a full run, 2026-12-02)."""
    a = admin(cluster, user)
    md = a.list_topics(topic, timeout=10).topics[topic]
    if md.error:
        raise KafkaException(md.error)
    parts = sorted(partitions if partitions is not None else md.partitions)
    c = Consumer({**cluster.client_config(user), "group.id": "mirrorflow-tests-reader", "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    ends = {p: _high_watermark(c, topic, p) for p in parts}
    todo = {p for p in parts if ends[p] > 0}
    c.assign([TopicPartition(topic, p, 0) for p in todo])
    out: list[Rec] = []
    deadline = time.monotonic() + timeout
    while todo and time.monotonic() < deadline:
        for m in c.consume(1000, timeout=0.05):  # returns early only with 1000: keep the wait short
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    if m.offset() >= ends[m.partition()]:
                        todo.discard(m.partition())
                    continue
                raise KafkaException(m.error())
            out.append(Rec(m.partition(), m.offset(), m.key(), m.value(),
                           tuple((k, v) for k, v in (m.headers() or [])), m.timestamp()[1]))
            if m.offset() + 1 >= ends[m.partition()]:
                todo.discard(m.partition())
    c.close()
    assert not todo, f"timed out reading {topic} partitions {sorted(todo)} on {cluster.alias}"
    return sorted(out, key=lambda r: (r.partition, r.offset))


def write_config(path, clusters: dict[str, DevCluster], flows: dict[str, dict], defaults: dict | None = None,
                 spark_master: str = "local[2]"):
    """Write a mirrorflow YAML for test clusters and return the loaded Config.

    SASL passwords are written as ${env:...} references (and set in os.environ), as a user would.
    """
    import os

    import yaml

    from mirrorflow import config as config_mod

    raw_clusters = {}
    for alias, c in clusters.items():
        conf = dict(c.client_config())
        if "sasl.password" in conf:
            var = f"MIRRORFLOW_TEST_{alias}_PASSWORD"
            os.environ[var] = conf["sasl.password"]
            conf["sasl.password"] = "${env:%s}" % var
        raw_clusters[alias] = conf
    raw = {"clusters": raw_clusters, "defaults": defaults or {}, "flows": flows, "spark": {"master": spark_master}}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config_mod.load(path)


def read_progress(cfg, flow, keys=None) -> dict:
    """The flow's committed progress on the target (what a copy unit reads back)."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.state.store import StateStore

    with FlowClients(cfg, flow) as clients:
        return StateStore(clients).progress(keys)


def load_offset_map(cfg, flow, keys=None) -> dict:
    """The flow's committed offset map on the target (SOURCE (topic, partition) -> PartitionMap)."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.state.store import StateStore

    with FlowClients(cfg, flow) as clients:
        return StateStore(clients).offset_map(keys)


def markers_written(cluster: DevCluster, topic: str, partitions: int = 1) -> None:
    """Wait until `topic` has no open transaction (last stable offset == high watermark). A commit
    returns once the coordinator logged its decision and writes the commit markers afterwards (a
    just-restarted broker, whose metadata cache learns the partition leaders late, may take seconds):
    until then a read_committed reader ends at the open transaction's first offset and sees nothing
    of it. A transaction really left open fails here, naming the offsets."""
    a, deadline = admin(cluster), time.monotonic() + 60
    tps = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}

    def ends(level) -> list[int] | str:
        try:
            fs = a.list_offsets(tps, isolation_level=level, request_timeout=30)
            return [fs[tp].result().offset for tp in sorted(fs, key=lambda tp: tp.partition)]
        except KafkaException as exc:  # no leader yet after the restart, or a leader epoch cached before it
            refresh_metadata(a, [topic])  # librdkafka keeps a stale epoch until asked (retry.STALE_METADATA_CODES)
            return str(exc)

    while (stable := ends(IsolationLevel.READ_COMMITTED)) != (high := ends(IsolationLevel.READ_UNCOMMITTED)) or (
        isinstance(stable, str)
    ):
        assert time.monotonic() < deadline, f"{topic} on {cluster.alias} not settled in 60 s: LSO {stable} HW {high}"
        time.sleep(0.2)
