"""State records and their JSON codecs: `Progress` (progress topic) and `MapEntry` (offset-map topic).

Both carry a format version `v`; a reader refuses a newer version than it knows (StateError), so an
old mirrorflow never misreads state a newer one wrote. Formats: docs/state.md.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from mirrorflow.errors import StateError
from mirrorflow.state.offset_map import MapEntry, Run, merge_ranges

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Progress:
    """The latest committed progress of one source partition."""

    topic: str
    partition: int
    next: int  # next source offset to copy
    covered: tuple[tuple[int, int], ...]  # merged ledger of covered source ranges
    tgt_end: int  # target offset right after the last record written (-1: none yet)
    lost: int = 0  # total offsets lost to source retention before they were copied
    records: int = 0  # total records copied
    last_timestamp: int = -1  # source timestamp (ms) of the last copied record
    updated: int = 0  # wall clock ms of the commit
    gaps: tuple[tuple[int, int], ...] = ()  # source ranges lost to retention (from, to)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "v": FORMAT_VERSION,
                "topic": self.topic,
                "partition": self.partition,
                "next": self.next,
                "covered": [list(r) for r in self.covered],
                "tgt_end": self.tgt_end,
                "lost": self.lost,
                "records": self.records,
                "last_ts": self.last_timestamp,
                "updated": self.updated,
                "gaps": [list(g) for g in self.gaps][-20:],
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Progress:
        d = json.loads(raw)
        if int(d.get("v", 0)) > FORMAT_VERSION:
            raise StateError(f"progress record format v{d.get('v')} is newer than this mirrorflow (v{FORMAT_VERSION})")
        return cls(
            str(d["topic"]),
            int(d["partition"]),
            int(d["next"]),
            tuple((int(a), int(b)) for a, b in d.get("covered", [])),
            int(d.get("tgt_end", -1)),
            int(d.get("lost", 0)),
            int(d.get("records", 0)),
            int(d.get("last_ts", -1)),
            int(d.get("updated", 0)),
            tuple((int(a), int(b)) for a, b in d.get("gaps", [])),
        )

    def advanced(
        self,
        src_from: int,
        src_to: int,
        tgt_end: int,
        records: int,
        last_ts: int,
        lost_range: tuple[int, int] | None = None,
    ) -> Progress:
        covered = tuple(merge_ranges([*self.covered, (src_from, src_to)]))
        gaps = self.gaps + ((lost_range,) if lost_range else ())
        lost = self.lost + ((lost_range[1] - lost_range[0]) if lost_range else 0)
        return Progress(
            self.topic,
            self.partition,
            max(self.next, src_to),
            covered,
            tgt_end if records or self.tgt_end < 0 else max(self.tgt_end, tgt_end),
            lost,
            self.records + records,
            last_ts if records else self.last_timestamp,
            int(time.time() * 1000),
            gaps,
        )

    @classmethod
    def empty(cls, topic: str, partition: int) -> Progress:
        return cls(topic, partition, -1, (), -1)


def encode_entry(e: MapEntry) -> bytes:
    d: dict[str, Any] = {
        "v": FORMAT_VERSION,
        "topic": e.topic,
        "partition": e.partition,
        "from": e.src_from,
        "to": e.src_to,
        "runs": [[r.src, r.tgt, r.count] for r in e.runs],
        "tgt_end": e.tgt_end,
        "ts": int(time.time() * 1000),
    }
    if e.lost:
        d["lost"] = e.lost
    if e.epoch:
        d["epoch"] = e.epoch
    return json.dumps(d, separators=(",", ":")).encode()


def decode_entry(raw: bytes) -> MapEntry:
    d = json.loads(raw)
    if int(d.get("v", 0)) > FORMAT_VERSION:
        raise StateError(f"offset-map record format v{d.get('v')} is newer than this mirrorflow (v{FORMAT_VERSION})")
    return MapEntry(
        str(d["topic"]),
        int(d["partition"]),
        int(d["from"]),
        int(d["to"]),
        tuple(Run(int(s), int(t), int(c)) for s, t, c in d.get("runs", [])),
        int(d["tgt_end"]),
        int(d.get("lost", 0)),
        int(d.get("epoch", 0)),
    )
