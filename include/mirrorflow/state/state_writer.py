"""Writing state: inside a copy transaction (the offset-map entry and the new progress of a batch,
StateWriter), a partition's state replaced in one transaction of its own (write_partition_state: a
re-seed, a takeover, a failback's seed), and the plain acknowledged writes of control, lease,
run-log and results records (write_acknowledged: one retry shape for all of them, so none of them
reports a write done that the target never acknowledged, and none of them gives up at the first
broker restart)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import MirrorflowError, StateError
from mirrorflow.kafka.connection import produce_queued
from mirrorflow.kafka.retry import OUTAGE_BOUND, retry_call
from mirrorflow.kafka.topic_admin import prepare_produce_all, produce_all
from mirrorflow.state.fencing import copy_ids, fence_ids
from mirrorflow.state.names import offset_map_topic, progress_topic, state_transactional_id
from mirrorflow.state.offset_map import MapEntry
from mirrorflow.state.records import Progress, encode_entry
from mirrorflow.state.state_topics import state_key, state_partition
from mirrorflow.state.task_slots import read_layout


@dataclass
class StateWriter:
    """Produces progress and offset-map records with a given producer (inside its transaction)."""

    flow: FlowConfig
    progress_partitions: int
    map_partitions: int
    _progress_topic: str = field(init=False)
    _map_topic: str = field(init=False)

    def __post_init__(self) -> None:
        self._progress_topic = progress_topic(self.flow)
        self._map_topic = offset_map_topic(self.flow)

    def write(self, producer: Any, progress: Progress, entry: MapEntry | None) -> None:
        key = state_key(progress.topic, progress.partition)
        if entry is not None:
            self.write_entry(producer, entry)
        # a round anchoring thousands of fresh partitions writes two records each into a queue that may be small
        produce_queued(
            producer,
            self._progress_topic,
            progress.to_json(),
            key,
            state_partition(progress.topic, progress.partition, self.progress_partitions),
        )

    def write_entry(self, producer: Any, entry: MapEntry, on_delivery: Any = None) -> None:
        produce_queued(
            producer,
            self._map_topic,
            encode_entry(entry),
            state_key(entry.topic, entry.partition),
            state_partition(entry.topic, entry.partition, self.map_partitions),
            on_delivery=on_delivery,
        )


# One attempt at an acknowledged write: short, so that an outage is retried (and its bound kept) by
# retry_call rather than spent inside one flush.
WRITE_ATTEMPT_S = 15.0


def write_acknowledged(
    clients: FlowClients,
    topic: str,
    records: Sequence[tuple[bytes, bytes, int]],
    partition: int,
    what: str,
    bound_s: float | None = None,
    bound_name: str = OUTAGE_BOUND,
    attempt_s: float = WRITE_ATTEMPT_S,
) -> None:
    """Produce `records` to `topic`[`partition`] on the target (idempotent, acks=all) and wait for
    their acknowledgement; a write not acknowledged (a broker restarting, a leadership move: a
    kafka.retry.UnacknowledgedError) is written again, in attempts of at most `attempt_s`, for up
    to `bound_s` (default broker.outage.max.seconds). Raises BrokerUnavailableError past the bound
    (naming `what`, the bound and the last error), ClusterError at once for any other failure.
    Callers must tolerate a record landing twice (a write acknowledged too late is written again)."""
    bound = clients.outage_timeout if bound_s is None else bound_s
    conn, flush_s = clients.connection("target"), max(1.0, min(attempt_s, bound))
    conf = clients.overrides("target", "producer")
    retry_call(lambda: produce_all(conn, topic, records, partition, conf, flush_s), conn.alias, what, bound, bound_name)


def prepare_acknowledged_writes(clients: FlowClients, topic: str) -> None:
    """Have the producer of `write_acknowledged` ready early (kafka.topic_admin.prepare_produce_all)."""
    prepare_produce_all(clients.connection("target"), topic, clients.overrides("target", "producer"))


def write_partition_state(
    clients: FlowClients, writer: StateWriter, progress: Progress, markers: MapEntry | Sequence[MapEntry]
) -> None:
    """Replace a partition's progress and open its map with `markers` (in order), in one transaction,
    after fencing every copy that may write the partition's state (fencing.copy_ids: a copy still
    running for it stops): a re-seed, a takeover, a failback's seed. Either all of it is written or
    none."""
    flow, where = clients.flow, f"{progress.topic}[{progress.partition}]"
    key = (progress.topic, progress.partition)
    if flow.exactly_once:  # idempotent copies have no transactional id to fence
        fence_ids(clients, copy_ids(clients, [key], read_layout(clients)))
    producer: Any = clients.producer(
        "target", required={"transactional.id": state_transactional_id(flow), "acks": "all"}
    )
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        for entry in [markers] if isinstance(markers, MapEntry) else markers:
            writer.write_entry(producer, entry)
        writer.write(producer, progress, None)
        producer.commit_transaction(60)
    except MirrorflowError:
        raise
    except Exception as exc:  # noqa: BLE001 - a KafkaException: say which partition was not written
        raise StateError(
            f"writing the state of {where} of flow {flow.name} failed (its state is unchanged): {exc}"
        ) from None
    finally:
        clients.release(producer)
