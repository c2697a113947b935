"""Where MirrorMaker 2 keeps its source positions: Kafka Connect's offsets topic.

Connect stores a source connector's offsets as JSON records: key `[connectorName, partitionMap]`,
value the offset map (null: a tombstone, the partition forgotten). MirrorSourceConnector's
partition map is `{"cluster": <source alias>, "topic": <upstream topic>, "partition": <int>}` and
its offset `{"offset": <upstream offset of the last record it replicated>}` (key order is not
guaranteed). The connector's name and the topic depend on how MM2 is deployed:

- dedicated mode (`connect-mirror-maker.sh`): `MirrorSourceConnector`, in
  `mm2-offsets.<source>.internal` on the target (the herder's `offset.storage.topic`);
- a Kafka Connect cluster: the name the operator posted (e.g. `A-to-B-MirrorSourceConnector`), in
  the worker's `offset.storage.topic` (or the connector's own `offsets.storage.topic`, KIP-618);
- Strimzi's KafkaMirrorMaker2: `<source>-><target>.MirrorSourceConnector`, in the Connect
  cluster's `offset.storage.topic` (default `mirrormaker2-cluster-offsets`).

A source-connector entry is recognised by its partition map's shape, whatever the connector is
called: the checkpoint and heartbeat connectors' maps have other keys.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

DEDICATED_CONNECTOR = "MirrorSourceConnector"
STRIMZI_OFFSETS_TOPIC = "mirrormaker2-cluster-offsets"
SOURCE_PARTITION_KEYS = frozenset({"cluster", "topic", "partition"})


def dedicated_offsets_topic(source_alias: str) -> str:
    """The offsets topic of MM2's dedicated-mode herder for `source_alias` (on the target)."""
    return f"mm2-offsets.{source_alias}.internal"


def strimzi_connector(source_alias: str, target_alias: str) -> str:
    """The name Strimzi gives the MirrorSourceConnector of one `spec.mirrors` entry."""
    return f"{source_alias}->{target_alias}.{DEDICATED_CONNECTOR}"


@dataclass(frozen=True)
class SourceOffset:
    """One MirrorSourceConnector offset record; `offset` None is a tombstone."""

    connector: str
    cluster: str  # the source cluster's alias in the connector's config
    topic: str
    partition: int
    offset: int | None


def decode_source_offset(key: bytes | None, value: bytes | None) -> SourceOffset | None:
    """The MirrorSourceConnector entry a Connect offsets record holds; None for any other record
    (another connector's, or bytes that are not Connect's JSON)."""
    try:
        connector, part = json.loads(key or b"null")
    except (TypeError, ValueError):
        return None
    if not isinstance(connector, str) or not isinstance(part, dict) or set(part) != SOURCE_PARTITION_KEYS:
        return None
    try:
        topic, partition, cluster = str(part["topic"]), int(part["partition"]), str(part["cluster"])
        if value is None:
            return SourceOffset(connector, cluster, topic, partition, None)
        offset = json.loads(value)["offset"]
        return SourceOffset(connector, cluster, topic, partition, int(offset))
    except (TypeError, ValueError, KeyError):
        return None
