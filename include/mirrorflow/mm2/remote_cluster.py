"""RemoteClusterUtils for any (Python) client: MM2's MirrorClient API over the TARGET cluster.

Java's `org.apache.kafka.connect.mirror.RemoteClusterUtils` (in Kafka's `connect/mirror-client`) answers,
from the cluster a client is connected to, "which clusters replicate into here, how many hops away,
and where should my group resume". It reads only that local cluster: heartbeats topics for the
topology, `<remote>.checkpoints.internal` for offsets. This module does the same, with the same
results (a test runs the Java class against the same cluster), so a failed-over Python consumer
does not need the source cluster, mirrorflow's config or the offset map:

    from mirrorflow.mm2 import remote_cluster
    offsets = remote_cluster.translate_offsets({"bootstrap.servers": "b:9092"}, "A", "orders-app")
    consumer.commit(offsets=remote_cluster.to_kafka(offsets), asynchronous=False)

"Local cluster" may be given as a property map like Java's (client settings plus
`replication.policy.class` / `replication.policy.separator` /
`replication.policy.internal.topic.separator.enabled`), or as a ClusterConnection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorflow.errors import TopicError
from mirrorflow.kafka.connection import ClusterConnection
from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.mm2.formats import Checkpoint, FormatError
from mirrorflow.mm2.policy import DefaultReplicationPolicy, policy_from_props

# Topics the broker flags internal; Java's Admin.listTopics() leaves them out.
BROKER_INTERNAL = frozenset(
    {"__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata", "__remote_log_metadata"}
)
POLICY_KEYS = (
    "replication.policy.class",
    "replication.policy.separator",
    "replication.policy.internal.topic.separator.enabled",
    "source.cluster.alias",
)
# MirrorClientConfig keys that are not client settings.
NON_CLIENT_KEYS = POLICY_KEYS + ("forwarding.admin.class",)


class TopicPartitionKey(NamedTuple):
    """A downstream topic-partition (hashable, unlike a confluent_kafka TopicPartition with an offset)."""

    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""


# -- pure parts (the Java algorithms over a list of topic names) ------------------------------------
def heartbeat_topics_of(topics: Iterable[str], policy: DefaultReplicationPolicy) -> set[str]:
    """MirrorClient.heartbeatTopics: `heartbeats` itself and every replica (`A.heartbeats`, ...)."""
    return {t for t in topics if policy.is_heartbeats_topic(t)}


def checkpoint_topics_of(topics: Iterable[str], policy: DefaultReplicationPolicy) -> set[str]:
    return {t for t in topics if policy.is_checkpoints_topic(t)}


def all_sources(topic: str, policy: DefaultReplicationPolicy) -> set[str]:
    """MirrorClient.allSources: the chain of source aliases in a remote topic's name."""
    sources: set[str] = set()
    current: str | None = topic
    source = policy.topic_source(current)
    while source is not None and source not in sources:
        sources.add(source)
        current = policy.upstream_topic(current)
        source = policy.topic_source(current)
    return sources


def upstream_clusters_of(topics: Iterable[str], policy: DefaultReplicationPolicy) -> set[str]:
    """MirrorClient.upstreamClusters: every alias found in the heartbeats topics' names."""
    out: set[str] = set()
    for t in heartbeat_topics_of(topics, policy):
        out |= all_sources(t, policy)
    return out


def count_hops(topic: str, alias: str, policy: DefaultReplicationPolicy) -> int:
    """MirrorClient.countHopsForTopic: hops from `alias` to here along one topic name, -1 if none."""
    hops = 0
    visited: set[str] = set()
    current: str | None = topic
    while True:
        hops += 1
        source = policy.topic_source(current)
        if source is None:
            return -1
        if source == alias:
            return hops
        if source in visited:
            return -1
        visited.add(source)
        current = policy.upstream_topic(current)


def replication_hops_of(topics: Iterable[str], policy: DefaultReplicationPolicy, alias: str) -> int:
    """MirrorClient.replicationHops: the fewest hops from `alias` over all heartbeats topics, -1 if unreachable."""
    hops = [h for h in (count_hops(t, alias, policy) for t in heartbeat_topics_of(topics, policy)) if h != -1]
    return min(hops, default=-1)


def offsets_from_checkpoints(
    checkpoints: Iterable[Checkpoint], group: str
) -> dict[TopicPartitionKey, OffsetAndMetadata]:
    """MirrorClient.remoteConsumerOffsets: the last checkpoint per downstream partition of `group`."""
    out: dict[TopicPartitionKey, OffsetAndMetadata] = {}
    for c in checkpoints:
        if c.group == group:
            out[TopicPartitionKey(c.topic, c.partition)] = OffsetAndMetadata(c.downstream_offset, c.metadata)
    return out


def to_kafka(offsets: Mapping[TopicPartitionKey, OffsetAndMetadata]) -> list[KafkaTopicPartition]:
    """confluent_kafka TopicPartitions ready for Consumer.commit / AdminClient.alter_consumer_group_offsets."""
    return [
        KafkaTopicPartition(tp.topic, tp.partition, om.offset, om.metadata or "") for tp, om in sorted(offsets.items())
    ]


# -- the client -----------------------------------------------------------------------------------
class MirrorClient:
    """MM2's MirrorClient: queries one (local, downstream) cluster."""

    def __init__(
        self,
        cluster: ClusterConnection | Mapping[str, Any],
        policy: DefaultReplicationPolicy | None = None,
        timeout: float = 30.0,
    ) -> None:
        if isinstance(cluster, ClusterConnection):
            self.conn = cluster
            self.policy = policy or DefaultReplicationPolicy()
        else:
            props = {str(k): v for k, v in cluster.items()}
            client = {
                k: str(v)
                for k, v in props.items()
                if k not in NON_CLIENT_KEYS and not k.startswith(("admin.", "consumer.", "producer."))
            }
            self.conn = ClusterConnection("local", client)
            self.policy = policy or policy_from_props(props, props.get("source.cluster.alias"))
        self.timeout = timeout

    def list_topics(self) -> set[str]:
        admin = self.conn.admin(check_timeout=None)
        try:
            md = admin.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise self.conn.describe_failure(exc) from None
        return {t for t in md.topics if t not in BROKER_INTERNAL}

    def heartbeat_topics(self) -> set[str]:
        return heartbeat_topics_of(self.list_topics(), self.policy)

    def checkpoint_topics(self) -> set[str]:
        return checkpoint_topics_of(self.list_topics(), self.policy)

    def upstream_clusters(self) -> set[str]:
        return upstream_clusters_of(self.list_topics(), self.policy)

    def replication_hops(self, alias: str) -> int:
        return replication_hops_of(self.list_topics(), self.policy, alias)

    def remote_topics(self, source: str | None = None) -> set[str]:
        """MirrorClient.remoteTopics: non-internal topics whose name tells a source (that source)."""
        out = set()
        for t in self.list_topics():
            if self.policy.is_internal_topic(t):
                continue
            s = self.policy.topic_source(t)
            if s is not None and (source is None or s == source):
                out.add(t)
        return out

    def read_checkpoints(self, remote_alias: str) -> list[Checkpoint]:
        """Every decodable checkpoint in `<remote_alias>.checkpoints.internal`, in log order."""
        topic = self.policy.checkpoints_topic(remote_alias)
        try:
            records = read_partition(self.conn, topic, 0, timeout=self.timeout)
        except TopicError:
            return []
        out = []
        for r in records:
            try:
                out.append(Checkpoint.decode(r.key, r.value))
            except FormatError:
                continue  # Java logs and skips records that do not parse
        return out

    def translate_offsets(self, remote_alias: str, group: str) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        """Where `group` (as committed on cluster `remote_alias`) resumes on this cluster."""
        return offsets_from_checkpoints(self.read_checkpoints(remote_alias), group)


# -- RemoteClusterUtils' static functions -----------------------------------------------------------
Local = ClusterConnection | Mapping[str, Any]


def translate_offsets(
    local: Local, remote_alias: str, group: str, timeout: float = 30.0
) -> dict[TopicPartitionKey, OffsetAndMetadata]:
    return MirrorClient(local, timeout=timeout).translate_offsets(remote_alias, group)


def upstream_clusters(local: Local, timeout: float = 30.0) -> set[str]:
    return MirrorClient(local, timeout=timeout).upstream_clusters()


def replication_hops(local: Local, alias: str, timeout: float = 30.0) -> int:
    return MirrorClient(local, timeout=timeout).replication_hops(alias)


def heartbeat_topics(local: Local, timeout: float = 30.0) -> set[str]:
    return MirrorClient(local, timeout=timeout).heartbeat_topics()


def checkpoint_topics(local: Local, timeout: float = 30.0) -> set[str]:
    return MirrorClient(local, timeout=timeout).checkpoint_topics()
