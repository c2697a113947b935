"""Writing state inside a copy transaction: the offset-map entry and the new progress of a batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mirrorflow.config import FlowConfig
from mirrorflow.state.offset_map import MapEntry
from mirrorflow.state.records import Progress, encode_entry
from mirrorflow.state.topics import offset_map_topic, progress_topic, state_key, state_partition


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
        producer.produce(
            self._progress_topic,
            progress.to_json(),
            key,
            state_partition(progress.topic, progress.partition, self.progress_partitions),
        )

    def write_entry(self, producer: Any, entry: MapEntry) -> None:
        producer.produce(
            self._map_topic,
            encode_entry(entry),
            state_key(entry.topic, entry.partition),
            state_partition(entry.topic, entry.partition, self.map_partitions),
        )
