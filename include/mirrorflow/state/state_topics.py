"""The flow's state topics on the TARGET cluster: key placement, configs and creation (their names:
state.names).

The state topics of a flow (names end in `.internal`, so MM2's default filters and internal-topic rules
never replicate them), both keyed by the SOURCE (topic, partition):

* `mirrorflow.<flow.id>.progress.internal` (cleanup.policy=compact): the latest progress of each
  source partition (next offset to copy, the merged ledger of covered ranges, tgt_end, ...).
* `mirrorflow.<flow.id>.offset-map.internal` (cleanup.policy=delete, retention.ms=-1): one entry
  per committed copy transaction (see offset_map.MapEntry); all entries together are the ledger.
* `mirrorflow.<flow.id>.offset-map-snapshot.internal` (cleanup.policy=compact): the offset map
  folded per source partition, and how far each offset-map partition was folded (state.snapshot).
* `mirrorflow.<flow.id>.lease.internal` (one partition, LogAppendTime): who runs the flow now
  (see state.lease).
* `mirrorflow.<flow.id>.runs.internal` (one partition, 7 days): a summary of each run and
  checkpoint pass (see state.run_log), for status pages and metrics.
* `mirrorflow.<flow.id>.results.internal` (one partition, 1 day): each run's per-unit results, keyed
  by the run's id (see state.run_results): how a copy job on another host hands them to the report.
* `mirrorflow.<flow.id>.operations.internal` (one partition, a year or 64 MiB): every pause, resume,
  stop, failover, failback, takeover and reseed, appended (see state.history).

A key always lives in state partition crc32(key) % (partitions of that topic), so a copy unit reads
one partition only.
"""

from __future__ import annotations

import json
import zlib

from confluent_kafka.admin import NewTopic

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import MirrorflowError, StateError
from mirrorflow.kafka.topic_admin import create_topics
from mirrorflow.state.names import (
    history_topic,
    lease_topic,
    offset_map_topic,
    progress_topic,
    results_topic,
    runs_topic,
    snapshot_topic,
)

HISTORY_RETENTION_MS = 366 * 24 * 3600 * 1000  # the operations history: a year...
HISTORY_RETENTION_BYTES = 64 * 1024 * 1024  # ...or 64 MiB, whichever is reached first
# Every state topic's index files (offset and time index of each segment) are this large, not the broker's
# 10 MiB: a broker allocates them sparse, and the first index entry of a segment (after 4 KiB of records)
# makes the kernel zero what the mapping covers. Measured on this project's test machine (Linux 6.18, ext4):
# 0.36 s of broker system CPU for the first index entries of 32 fresh partitions with 10 MiB indexes, 0.04 s
# with 256 KiB; a flow's first run touches ~36 state partitions at once (+1.3 s of broker CPU in a 4 s run).
# 256 KiB holds 32,768 offset entries (128 MiB of records at the broker's 4 KiB interval) and 21,845 time
# entries (85 MiB): a state segment is rolled once either is full, far above the 16 MiB compacted segments.
STATE_INDEX_BYTES = 256 * 1024


def _compact_json(value: dict) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _topic_partition(key: bytes | None, anchor: bool) -> tuple[str, int] | None:
    try:
        d = json.loads(key or b"")
        d = d["anchor"] if anchor else d
        return str(d["topic"]), int(d["partition"])
    except (ValueError, KeyError, TypeError):
        return None


def state_key(topic: str, partition: int) -> bytes:
    """The key of both state topics: compact JSON {"partition":P,"topic":T} (sorted keys)."""
    return _compact_json({"partition": partition, "topic": topic})


def parse_key(key: bytes | None) -> tuple[str, int] | None:
    return _topic_partition(key, anchor=False)


def anchor_key(topic: str, partition: int) -> bytes:
    """The key of a source partition's ANCHOR in the progress topic: the progress of a partition with
    nothing copied yet, which a copy's own progress always overrides. Releases before 2026-11-30 wrote
    anchors outside any transaction (unfenced, hence a key of their own); the state they left is read
    as it is (state.store). It lives in the partition of `state_key`, so a unit's read finds both;
    readers that do not know it skip it (it names no top-level topic and partition)."""
    return _compact_json({"anchor": {"partition": partition, "topic": topic}})


def parse_anchor_key(key: bytes | None) -> tuple[str, int] | None:
    return _topic_partition(key, anchor=True)


def state_partition(topic: str, partition: int, num_partitions: int) -> int:
    return zlib.crc32(state_key(topic, partition)) % max(1, num_partitions)


def state_topic_configs(flow: FlowConfig) -> dict[str, dict[str, str]]:
    index = {"segment.index.bytes": str(STATE_INDEX_BYTES)}
    return {topic: {**conf, **index} for topic, conf in _state_topic_settings(flow).items()}


def _state_topic_settings(flow: FlowConfig) -> dict[str, dict[str, str]]:
    return {
        # small segments so compaction keeps the progress topic short (units read a partition from its start)
        progress_topic(flow): {
            "cleanup.policy": "compact",
            "min.compaction.lag.ms": "60000",
            "segment.ms": "600000",
            "segment.bytes": str(16 * 1024 * 1024),
            "min.cleanable.dirty.ratio": "0.2",
        },
        offset_map_topic(flow): {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"},
        # one snapshot per source partition, rewritten by each fold (state.compaction) that changes it;
        # short segments, so that compaction keeps about one version of each (readers read it whole)
        snapshot_topic(flow): {
            "cleanup.policy": "compact",
            "min.compaction.lag.ms": "0",
            "segment.ms": "60000",
            "segment.bytes": str(16 * 1024 * 1024),
            "min.cleanable.dirty.ratio": "0.2",
            "max.message.bytes": str(8 * 1024 * 1024),
        },
        # the flow's run lease (state.lease): one partition, the broker's clock on every record, and
        # a few hours of history (a holder renews its lease every few seconds)
        lease_topic(flow): {
            "cleanup.policy": "delete",
            "retention.ms": str(6 * 3600 * 1000),
            "segment.ms": str(3600 * 1000),
            "message.timestamp.type": "LogAppendTime",
        },
        # the run log (state.run_log): a week of run summaries, read newest first
        runs_topic(flow): {
            "cleanup.policy": "delete",
            "retention.ms": str(7 * 24 * 3600 * 1000),
            "segment.ms": str(24 * 3600 * 1000),
            "max.message.bytes": str(8 * 1024 * 1024),
        },
        # each run's per-unit results (state.run_results), read by the run's report minutes later
        results_topic(flow): {
            "cleanup.policy": "delete",
            "retention.ms": str(24 * 3600 * 1000),
            "segment.ms": str(3600 * 1000),
            "max.message.bytes": str(2 * 1024 * 1024),
        },
        # the operations history (state.history): operations are done by people, a few a day, each
        # record well under 4 KiB, so a year is a few MB; the size bound only stops a runaway
        # script. Nothing replication does reads it: retention shortens the story, never the copy.
        history_topic(flow): {
            "cleanup.policy": "delete",
            "retention.ms": str(HISTORY_RETENTION_MS),
            "retention.bytes": str(HISTORY_RETENTION_BYTES),
            "segment.ms": str(30 * 24 * 3600 * 1000),
        },
    }


def state_topic_partitions(flow: FlowConfig, topic: str) -> int:
    one = (lease_topic(flow), runs_topic(flow), results_topic(flow), history_topic(flow))
    return 1 if topic in one else int(flow.props["state.topic.partitions"])


def ensure_state_topics(clients: FlowClients) -> dict[str, int]:
    """Create the flow's state topics on the target when missing; returns {topic: partitions}."""
    flow = clients.flow
    admin, conn = clients.admin("target"), clients.connection("target")
    wanted = state_topic_configs(flow)
    new = [
        NewTopic(t, state_topic_partitions(flow, t), flow.props["state.topic.replication.factor"], config=conf)
        for t, conf in wanted.items()
        if not clients.partitions("target", t)
    ]
    try:
        create_topics(admin, conn, new, timeout=60)
    except MirrorflowError as exc:
        raise StateError(
            f"cannot create the state topics of flow {flow.name} on cluster {flow.target!r}: {exc}"
        ) from None
    if new:  # one listing of the cluster after creating, not one per topic (each a full listing)
        clients.partitions("target", new[0].topic, refresh=True)
    return {t: clients.partitions("target", t) for t in wanted}
