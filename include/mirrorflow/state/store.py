"""Reading a flow's committed state back from the TARGET cluster (read_committed).

A record is state only once its transaction committed together with the data it describes, so
everything here reads with isolation.level=read_committed, through the one log reader. Every read
ends at the high watermark each partition had when it began (kafka.log_reader): it waits for
transactions open below that, so it never stops silently below progress or entries committed
after one (a read_committed consumer's own end would be the last stable offset). Reads of some
source partitions touch only the state partitions their keys live in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from mirrorflow.clients import FlowClients
from mirrorflow.errors import StateError
from mirrorflow.kafka.log_reader import LogReader
from mirrorflow.state.names import STATE_READER, offset_map_topic, progress_topic, reader_group, snapshot_topic
from mirrorflow.state.offset_map import MapEntry, PartitionMap
from mirrorflow.state.records import Progress, decode_entry
from mirrorflow.state.snapshot import Marker, Snapshot, SnapshotView, marker_key, parse_marker_key
from mirrorflow.state.state_topics import anchor_key, parse_anchor_key, parse_key, state_key, state_partition

Keys = Iterable[tuple[str, int]]
Key = tuple[str, int]
# a fold that commits while a reader reads the tail makes the reader start again; this many times
MAP_READ_ATTEMPTS = 5


@dataclass
class MapRead:
    """The offset map as read: snapshots plus the entries after them (the tail)."""

    maps: dict[Key, PartitionMap]
    view: SnapshotView
    ends: dict[int, int] = field(default_factory=dict)  # offset-map partition -> read up to (exclusive)
    starts: dict[int, int | None] = field(default_factory=dict)  # ... read from (None: its log start)
    tail: dict[Key, int] = field(default_factory=dict)  # tail entries per key


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
            self._reader = self.clients.reader("target", group=reader_group(self.flow, STATE_READER))
        return self._reader

    def _read(
        self, topic: str, keys: Keys | None, timeout: float, anchors: bool = False
    ) -> Iterator[tuple[tuple[str, int], bool, bytes | None]]:
        """(source partition, is it an anchor record, value) of each state record of `keys` (all
        when None); anchor records (state_topics.anchor_key) only with `anchors`."""
        n = self.clients.partitions("target", topic)
        if n == 0:
            return
        wanted = list(keys) if keys is not None else None
        parts = sorted({state_partition(t, p, n) for t, p in wanted}) if wanted is not None else list(range(n))
        key_set = {state_key(t, p) for t, p in wanted} if wanted is not None else None
        if wanted is not None and key_set is not None and anchors:
            key_set |= {anchor_key(t, p) for t, p in wanted}
        for m in self.reader.read(topic, parts, timeout, keys=key_set):
            tp = parse_key(m.key())
            if tp is not None:
                yield tp, False, m.value()
            elif anchors and (tp := parse_anchor_key(m.key())) is not None:
                yield tp, True, m.value()

    def progress(self, keys: Keys | None = None, timeout: float = 120.0) -> dict[tuple[str, int], Progress]:
        """Latest committed progress per source partition (all of the flow's, or just `keys`). A
        partition no copy has committed progress for yet has its anchor's, if an earlier release wrote
        one (state_topics.anchor_key): a copy's progress always wins over an anchor, whatever their order."""
        latest: dict[tuple[str, int], bytes] = {}
        anchored: dict[tuple[str, int], bytes] = {}
        for tp, anchor, value in self._read(progress_topic(self.flow), keys, timeout, anchors=True):
            into = anchored if anchor else latest
            if value is None:
                into.pop(tp, None)
            else:
                into[tp] = value  # parsed once, the latest only: the topic holds every run's until compacted
        return {tp: Progress.from_json(value) for tp, value in {**anchored, **latest}.items()}

    def entries(self, keys: Keys | None = None, timeout: float = 300.0) -> dict[tuple[str, int], list[MapEntry]]:
        """The committed offset-map entries still in the topic per source partition (each of `keys`
        appears, maybe empty); a fold truncates what it folded into the snapshots (`offset_map`)."""
        keys = list(keys) if keys is not None else None
        out: dict[tuple[str, int], list[MapEntry]] = {k: [] for k in keys or []}
        for tp, _, value in self._read(offset_map_topic(self.flow), keys, timeout):
            if value is not None:
                out.setdefault(tp, []).append(decode_entry(value))
        return out

    def offset_map(self, keys: Keys | None = None, timeout: float = 300.0) -> dict[tuple[str, int], PartitionMap]:
        """The committed offset map (SOURCE (topic, partition) -> PartitionMap): each key's snapshot
        plus the entries written after it, so the cost follows the partitions, not the history."""
        return self.read_map(keys, timeout).maps

    def read_map(self, keys: Keys | None = None, timeout: float = 300.0) -> MapRead:
        """Snapshots, then the offset-map partitions from where the snapshots end. A fold that
        commits meanwhile (and may truncate what this read still wanted) makes it start again."""
        wanted = sorted(set(keys)) if keys is not None else None
        for _ in range(MAP_READ_ATTEMPTS):
            view = self.snapshots(wanted, timeout)
            got = self._read_tail(view, wanted, timeout)
            if got is not None:
                return got
        raise StateError(
            f"the offset map of flow {self.flow.name} changed under {MAP_READ_ATTEMPTS} reads in a row "
            f"(folds of {snapshot_topic(self.flow)!r} committing all the time?)"
        )

    def snapshots(self, keys: list[Key] | None = None, timeout: float = 120.0) -> SnapshotView:
        """The snapshots of `keys` (all when None) and the markers of their offset-map partitions."""
        n_map = self.clients.partitions("target", offset_map_topic(self.flow))
        topic = snapshot_topic(self.flow)
        n_snap = self.clients.partitions("target", topic)
        view = SnapshotView(n_map, n_snap)
        if not n_snap or not n_map:
            return view
        if keys is None:
            parts, wanted = list(range(n_snap)), None
        else:
            map_parts = {state_partition(t, p, n_map) for t, p in keys}
            parts = sorted({state_partition(t, p, n_snap) for t, p in keys} | {mp % n_snap for mp in map_parts})
            wanted = {state_key(t, p) for t, p in keys} | {marker_key(mp) for mp in map_parts}
        view.watermarks = {p: hi for p, (_, hi) in self.reader.offsets(topic, parts).items()}
        # the newest record per key wins (older ones wait for compaction): decode only those
        latest: dict[bytes, bytes | None] = {}
        for m in self.reader.read(topic, {p: None for p in parts}, timeout, keys=wanted, stops=view.watermarks):
            latest[m.key()] = m.value()
        for key, value in latest.items():
            if value is None:
                continue
            mp = parse_marker_key(key)
            if mp is not None:
                view.markers[mp] = Marker.from_json(value).folded_to
            elif (tp := parse_key(key)) is not None:
                view.snapshots[tp] = Snapshot.from_json(value)
        return view

    def _read_tail(self, view: SnapshotView, keys: list[Key] | None, timeout: float) -> MapRead | None:
        """The entries after the snapshots; None when a fold committed meanwhile (read again)."""
        topic = offset_map_topic(self.flow)
        n = view.map_partitions
        if not n:  # nothing was ever copied
            return MapRead({k: PartitionMap() for k in keys or []}, view)
        by_part: dict[int, list[Key]] = {}
        for k in keys if keys is not None else view.snapshots:
            by_part.setdefault(state_partition(*k, n), []).append(k)
        parts = sorted(by_part) if keys is not None else list(range(n))
        starts: dict[int, int | None] = {}
        for p in parts:
            if keys is None and view.trusted and p in view.markers:
                starts[p] = view.markers[p]
                continue
            folded = [view.folded_to(k, p) for k in by_part.get(p, [])]
            starts[p] = None if not folded or None in folded else min(f for f in folded if f is not None)
        ends = {p: hi for p, (_, hi) in self.reader.offsets(topic, parts).items()}
        tail: dict[Key, list[MapEntry]] = {k: [] for k in keys or []}
        wanted = {state_key(t, p) for t, p in keys} if keys is not None else None
        if parts:
            for m in self.reader.read(topic, starts, timeout, keys=wanted, stops=ends):
                p, tp = m.partition(), parse_key(m.key())
                if tp is None or m.value() is None or m.offset() >= ends[p]:
                    continue
                below = view.folded_to(tp, p)
                if below is not None and m.offset() < below:
                    continue  # already in the key's snapshot
                tail.setdefault(tp, []).append(decode_entry(m.value()))
        # was the tail cut below where this read started? Only a fold does that, after it committed
        # new snapshots (which moved a snapshot partition): then read again
        cut = [p for p, start in starts.items() if start is not None]
        lows = {p: lo for p, (lo, _) in self.reader.offsets(topic, cut).items()}
        if self._moved(view):
            return None
        for p, low in lows.items():
            start = starts[p]
            if start is not None and low > start:
                raise StateError(
                    f"offset-map topic {topic!r} partition {p} was truncated below offset {start}, which "
                    f"its snapshots in {snapshot_topic(self.flow)!r} have not folded: entries were lost"
                )
        found = set(tail) | (set(view.snapshots) if keys is None else set(keys))
        maps = {}
        for k in found:
            snap = view.snapshots.get(k)
            maps[k] = PartitionMap(tail.get(k, []), base=snap.folded if snap is not None else None)
        return MapRead(maps, view, ends, starts, {k: len(v) for k, v in tail.items()})

    def _moved(self, view: SnapshotView) -> bool:
        """A snapshot partition grew since `view` was read (a fold wrote, maybe committed), or the
        snapshot topic appeared (the first fold)."""
        topic = snapshot_topic(self.flow)
        if not view.snapshot_partitions:
            return bool(self.clients.partitions("target", topic, refresh=True))
        now = self.reader.offsets(topic, view.watermarks)
        return any(now[p][1] != hw for p, hw in view.watermarks.items())
