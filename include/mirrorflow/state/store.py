"""Reading a flow's committed state back from the TARGET cluster (read_committed).

A record is state only once its transaction committed together with the data it describes, so
everything here reads with isolation.level=read_committed, through the one log reader. Reads of
some source partitions touch only the state partitions their keys live in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from mirrorflow.clients import FlowClients
from mirrorflow.kafka.log_reader import LogReader
from mirrorflow.state.offset_map import MapEntry, PartitionMap
from mirrorflow.state.records import Progress, decode_entry
from mirrorflow.state.topics import offset_map_topic, parse_key, progress_topic, state_key, state_partition

Keys = Iterable[tuple[str, int]]


class StateStore:
    """The flow's progress and offset map, as committed on the target."""

    def __init__(self, clients: FlowClients) -> None:
        self.clients, self.flow = clients, clients.flow
        self._reader: LogReader | None = None

    @property
    def has_reader(self) -> bool:
        return self._reader is not None

    @property
    def reader(self) -> LogReader:
        if self._reader is None:
            self._reader = self.clients.reader("target", group=f"mirrorflow-{self.flow.id}-state-reader")
        return self._reader

    def _read(self, topic: str, keys: Keys | None, timeout: float) -> Iterator[tuple[tuple[str, int], bytes | None]]:
        n = self.clients.partitions("target", topic)
        if n == 0:
            return
        wanted = list(keys) if keys is not None else None
        parts = sorted({state_partition(t, p, n) for t, p in wanted}) if wanted is not None else list(range(n))
        key_set = {state_key(t, p) for t, p in wanted} if wanted is not None else None
        for m in self.reader.read(topic, parts, timeout, keys=key_set):
            tp = parse_key(m.key())
            if tp is not None:
                yield tp, m.value()

    def progress(self, keys: Keys | None = None, timeout: float = 120.0) -> dict[tuple[str, int], Progress]:
        """Latest committed progress per source partition (all of the flow's, or just `keys`)."""
        out: dict[tuple[str, int], Progress] = {}
        for tp, value in self._read(progress_topic(self.flow), keys, timeout):
            if value is None:
                out.pop(tp, None)
            else:
                out[tp] = Progress.from_json(value)
        return out

    def entries(self, keys: Keys | None = None, timeout: float = 300.0) -> dict[tuple[str, int], list[MapEntry]]:
        """Every committed offset-map entry per source partition (each of `keys` appears, maybe empty)."""
        keys = list(keys) if keys is not None else None
        out: dict[tuple[str, int], list[MapEntry]] = {k: [] for k in keys or []}
        for tp, value in self._read(offset_map_topic(self.flow), keys, timeout):
            if value is not None:
                out.setdefault(tp, []).append(decode_entry(value))
        return out

    def offset_map(self, keys: Keys | None = None) -> dict[tuple[str, int], PartitionMap]:
        """The committed offset map (SOURCE (topic, partition) -> PartitionMap)."""
        return {k: PartitionMap(v) for k, v in self.entries(keys).items()}
