"""Offset-map snapshots: the folded map of each source partition, and how far each state partition
was folded (records of the compacted `mirrorflow.<flow.id>.offset-map-snapshot.internal` topic).

The offset-map topic gets one entry per copy transaction; reading it whole would make every
translation cost as much as the flow's history. So a fold (state.compaction) merges the entries
into one snapshot record per source partition and then truncates the offset-map topic below what
it folded. A reader reads the snapshots, then only the entries after them (the tail).

Two kinds of records, both JSON, format version `v`:

* a **snapshot** (key: the state key of the source partition, as in the other state topics, in
  partition crc32(key) % N): the `Folded` map plus `folded_to` = {offset-map partition: offset}:
  every entry of this key in that partition below that offset is folded in, none at or above it.
* a **marker** (key `{"map_partition":P}`, in snapshot partition P % N): every key of offset-map
  partition P had its entries below `folded_to` folded into its snapshot. A fold rewrites only
  the snapshots that changed and writes the markers last, in the same transaction, so a key whose
  snapshot did not change needs no new record. A marker is trusted only when both topics have the
  same partition count (a key's snapshot and its partition's marker then share a partition, and a
  reader sees the marker only together with every snapshot written before it).

A key's entries are then folded up to max(its own folded_to, its partition's marker); the tail of
a key starts there.

Snapshot format v2 adds what the map keeps below its floor (`covered_from`, `marks`, `spans`,
`pins`; state.landmarks). A snapshot without them is written as v1, so a mirrorflow from before
landmarks reads it; a v1 snapshot reads as one without them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.errors import StateError
from mirrorflow.state.landmarks import decode_spans, encode_spans
from mirrorflow.state.offset_map import Folded, Run

SNAPSHOT_FORMAT = 2  # the newest snapshot format this mirrorflow reads and writes
MARKER_FORMAT = 1


def marker_key(map_partition: int) -> bytes:
    return json.dumps({"map_partition": map_partition}, separators=(",", ":")).encode()


def parse_marker_key(key: bytes | None) -> int | None:
    """The offset-map partition of a marker key, None for any other key."""
    try:
        d = json.loads(key or b"")
        return int(d["map_partition"]) if isinstance(d, dict) and "topic" not in d else None
    except (ValueError, KeyError, TypeError):
        return None


def _check_version(d: dict[str, Any], what: str, newest: int) -> None:
    if int(d.get("v", 0)) > newest:
        raise StateError(f"{what} record format v{d.get('v')} is newer than this mirrorflow (v{newest})")


def encode_runs(runs: tuple[Run, ...]) -> list[int]:
    """Runs as one flat list, each run relative to the end of the one before: exactly-once copies
    give (0, 1, count) for every transaction after the first (the commit marker takes one offset)."""
    out: list[int] = []
    src_end = tgt_end = 0
    for r in runs:
        out += [r.src - src_end, r.tgt - tgt_end, r.count]
        src_end, tgt_end = r.src + r.count, r.tgt + r.count
    return out


def decode_runs(flat: list[int]) -> tuple[Run, ...]:
    if len(flat) % 3:
        raise StateError(f"offset-map snapshot: runs list of length {len(flat)} is not made of triples")
    runs = []
    src_end = tgt_end = 0
    for i in range(0, len(flat), 3):
        r = Run(src_end + int(flat[i]), tgt_end + int(flat[i + 1]), int(flat[i + 2]))
        runs.append(r)
        src_end, tgt_end = r.src + r.count, r.tgt + r.count
    return tuple(runs)


@dataclass(frozen=True)
class Snapshot:
    """The folded offset map of one source partition."""

    topic: str  # SOURCE topic
    partition: int  # SOURCE partition
    folded: Folded
    folded_to: dict[int, int] = field(default_factory=dict)  # offset-map partition -> folded below
    updated: int = 0  # wall clock ms of the fold that wrote it

    def to_json(self) -> bytes:
        f = self.folded
        below = f.covered_from is not None or f.marks or f.spans or f.pins or f.forgotten is not None
        d: dict[str, Any] = {
            "v": SNAPSHOT_FORMAT if below else 1,
            "topic": self.topic,
            "partition": self.partition,
            "epoch": f.epoch,
            "entries": f.entries,
            "floor": f.floor,
            "covered": [list(r) for r in f.covered],
            "runs": encode_runs(f.runs),
            "tgt_end": f.tgt_end,
            "lost": f.lost,
            "first": f.first,
            "end": f.end,
            "anchor": f.anchor,
            "folded_to": {str(p): o for p, o in sorted(self.folded_to.items())},
            "updated": self.updated or int(time.time() * 1000),
        }
        if below:
            d["covered_from"] = f.covered_from
            d["marks"] = encode_runs(f.marks)
            d["spans"] = encode_spans(f.spans)
            d["pins"] = list(f.pins)
            d["forgotten"] = f.forgotten
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Snapshot:
        d = json.loads(raw)
        _check_version(d, "offset-map snapshot", SNAPSHOT_FORMAT)

        def opt(name: str) -> int | None:
            return None if d.get(name) is None else int(d[name])

        first, floor = opt("first"), int(d.get("floor", 0))
        # v1 pruned without landmarks: where the records below its floor landed is not known
        old_prune = floor if int(d.get("v", 0)) < 2 and first is not None and first < floor else None
        folded = Folded(
            epoch=int(d.get("epoch", 0)),
            entries=int(d.get("entries", 0)),
            covered=tuple((int(a), int(b)) for a, b in d.get("covered", [])),
            runs=decode_runs(d.get("runs", [])),
            tgt_end=opt("tgt_end"),
            lost=int(d.get("lost", 0)),
            first=opt("first"),
            end=opt("end"),
            anchor=opt("anchor"),
            floor=int(d.get("floor", 0)),
            covered_from=opt("covered_from"),
            marks=decode_runs(d.get("marks", [])),
            spans=decode_spans(d.get("spans", []), "offset-map snapshot"),
            pins=tuple(int(p) for p in d.get("pins", [])),
            forgotten=opt("forgotten") if "forgotten" in d else old_prune,
        )
        folded_to = {int(p): int(o) for p, o in d.get("folded_to", {}).items()}
        return cls(str(d["topic"]), int(d["partition"]), folded, folded_to, int(d.get("updated", 0)))


@dataclass(frozen=True)
class Marker:
    """Every key of offset-map partition `map_partition` is folded below `folded_to`."""

    map_partition: int
    folded_to: int
    updated: int = 0

    def to_json(self) -> bytes:
        d = {
            "v": MARKER_FORMAT,
            "map_partition": self.map_partition,
            "folded_to": self.folded_to,
            "updated": self.updated or int(time.time() * 1000),
        }
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Marker:
        d = json.loads(raw)
        _check_version(d, "offset-map snapshot marker", MARKER_FORMAT)
        return cls(int(d["map_partition"]), int(d["folded_to"]), int(d.get("updated", 0)))


@dataclass
class SnapshotView:
    """The snapshot topic as read: snapshots per source partition, markers per offset-map partition."""

    map_partitions: int
    snapshot_partitions: int
    snapshots: dict[tuple[str, int], Snapshot] = field(default_factory=dict)
    markers: dict[int, int] = field(default_factory=dict)  # offset-map partition -> folded_to
    # the snapshot partitions read and their high watermarks before reading (a fold that commits
    # while the tail is read moves one of them: the read is then done again)
    watermarks: dict[int, int] = field(default_factory=dict)

    @property
    def trusted(self) -> bool:
        """Markers count only when a key's snapshot and its partition's marker share a partition."""
        return self.map_partitions == self.snapshot_partitions > 0

    def folded_to(self, key: tuple[str, int], map_partition: int) -> int | None:
        """Offset below which every entry of `key` in `map_partition` is in its snapshot (None:
        none is; read from the log start)."""
        snap = self.snapshots.get(key)
        own = snap.folded_to.get(map_partition) if snap is not None else None
        marker = self.markers.get(map_partition) if self.trusted else None
        if own is None or marker is None:
            return own if marker is None else marker
        return max(own, marker)
