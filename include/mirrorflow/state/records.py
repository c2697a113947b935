"""State records and their JSON codecs: `Progress` and `VerifiedMark` (progress topic), `MapEntry` (offset-map topic).

Both carry a format version `v`; a reader refuses a newer version than it knows (StateError), so an
old mirrorflow never misreads state a newer one wrote. Formats: docs/state.md.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any

from mirrorflow.errors import StateError
from mirrorflow.state.landmarks import decode_spans, encode_spans
from mirrorflow.state.offset_map import MapEntry, Run, merge_ranges, subtract_ranges

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Progress:
    """The latest committed progress of one source partition."""

    topic: str
    partition: int
    # the first source offset not accounted for: every offset from the partition's first covered one
    # up to `next` was copied (or lost to retention, named in `gaps`); ranges copied above it (a
    # backfill above the progress, the units after a partial one) are in `covered`, the holes between
    # them are planned by every run (`holes`)
    next: int
    covered: tuple[tuple[int, int], ...]  # merged ledger of covered source ranges
    tgt_end: int  # target offset right after the last record written (-1: none yet)
    lost: int = 0  # total offsets lost to source retention before they were copied
    records: int = 0  # total records copied
    last_timestamp: int = -1  # source timestamp (ms) of the last copied record
    updated: int = 0  # wall clock ms of the commit
    gaps: tuple[tuple[int, int], ...] = ()  # source ranges lost to retention (from, to)
    # identity of what this progress describes: a recreated topic keeps its name, not its ID, and a
    # replication-policy change renames the remote topic ("": not recorded yet, e.g. older state)
    topic_id: str = ""  # the SOURCE topic's ID
    target_topic: str = ""  # the remote topic copied into
    target_topic_id: str = ""
    epoch: int = 0  # the map epoch (a re-seed starts a new one; see offset_map.MapEntry.epoch)
    # the first source offset the flow owns: where its first copy started (the initial position, an
    # anchor). Ranges a backfill copied below it are not its to copy again; every hole from here up
    # is (-1: older state, which did not record it: its first covered offset stands for it)
    origin: int = -1

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
                "gaps": [list(g) for g in merge_ranges(self.gaps)][-20:],
                "topic_id": self.topic_id,
                "target_topic": self.target_topic,
                "target_topic_id": self.target_topic_id,
                "epoch": self.epoch,
                "origin": self.origin,
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
            str(d.get("topic_id", "")),
            str(d.get("target_topic", "")),
            str(d.get("target_topic_id", "")),
            int(d.get("epoch", 0)),
            int(d.get("origin", -1)),
        ).settled()

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
        # a fresh partition's flow owns it from where its first range starts (an anchor: an empty
        # range at its initial position); `next` moves only over what is accounted for, never a hole
        fresh = lost_range[0] if lost_range else src_from
        origin = self.owned_from if self.next >= 0 else fresh
        return replace(
            self,
            next=first_hole(origin, merge_ranges([*covered, *gaps])),
            origin=origin,
            covered=covered,
            tgt_end=tgt_end if records or self.tgt_end < 0 else max(self.tgt_end, tgt_end),
            lost=lost,
            records=self.records + records,
            # a backfill or a hole below the highest copied offset copies older records: the newest
            # copied timestamp stays
            last_timestamp=last_ts if records and src_to >= self.high else self.last_timestamp,
            updated=int(time.time() * 1000),
            gaps=gaps,
        )

    @property
    def owned_from(self) -> int:
        """`origin`, or for state that did not record it its first covered offset (or `next`)."""
        if self.origin >= 0 or self.next < 0:
            return self.origin
        return min(self.next, self.covered[0][0]) if self.covered else self.next

    @property
    def high(self) -> int:
        """The end of the highest range copied (or accounted lost): `next` when there is no hole."""
        return max(self.next, self.covered[-1][1] if self.covered else -1, max((b for _, b in self.gaps), default=-1))

    def accounted(self) -> list[tuple[int, int]]:
        """The source ranges copied or named lost to retention, merged."""
        return merge_ranges([*self.covered, *self.gaps])

    def holes(self, end: int | None = None) -> list[tuple[int, int]]:
        """The source ranges from `next` up to the highest copied offset (or `end`, when given) that
        are neither copied nor accounted lost: what every run plans first."""
        if self.next < 0:
            return []
        hi = self.high if end is None else end
        return subtract_ranges(self.next, hi, self.accounted()) if hi > self.next else []

    def settled(self) -> Progress:
        """This progress with `next` at its first hole: state written before `next` moved only over
        what was copied (a unit cut short by unit.max.bytes, then the next unit, moved it over the
        rest) may hold holes below it; they are planned and copied like any other."""
        if not self.covered or self.next < 0:
            return self
        first = first_hole(self.owned_from, self.accounted())
        return self if first == self.next else replace(self, next=first)

    def identity_problem(self, topic_id: str, target_topic: str, target_topic_id: str) -> str | None:
        """Why this progress does not describe these topics (None: it does, or it does not know)."""
        t = f"{self.topic}[{self.partition}]"
        if self.topic_id and topic_id and self.topic_id != topic_id:
            return (
                f"source topic {self.topic!r} was recreated (topic ID {topic_id}; the state of {t} was "
                f"written for topic ID {self.topic_id})"
            )
        if self.target_topic and target_topic != self.target_topic:
            return (
                f"the remote topic of {t} is now {target_topic!r} but its state was written for "
                f"{self.target_topic!r} (replication.policy.class or its separator changed)"
            )
        if self.target_topic_id and target_topic_id and self.target_topic_id != target_topic_id:
            return (
                f"target topic {target_topic!r} was recreated (topic ID {target_topic_id}; {t} was copied "
                f"into topic ID {self.target_topic_id})"
            )
        return None

    def with_identity(self, topic_id: str, target_topic: str, target_topic_id: str) -> Progress:
        """This progress, recording the topics' identity where it has none yet (older state)."""
        return replace(
            self,
            topic_id=self.topic_id or topic_id,
            target_topic=self.target_topic or target_topic,
            target_topic_id=self.target_topic_id or target_topic_id,
        )

    @classmethod
    def empty(cls, topic: str, partition: int) -> Progress:
        return cls(topic, partition, -1, (), -1)


def first_hole(origin: int, accounted: list[tuple[int, int]]) -> int:
    """A partition's `next`: the first offset from `origin` on that the merged `accounted` ranges
    leave out."""
    n = origin
    for a, b in accounted:
        if a > n:
            break
        n = max(n, b)
    return n


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
    if e.spans:  # a mirrorflow before them reads the entry without them (as it wrote it)
        d["spans"] = encode_spans(e.spans)
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
        decode_spans(d.get("spans", []), "offset-map entry"),
    )


@dataclass(frozen=True)
class VerifiedMark:
    """How far one source partition was verified (`state.verified`): every covered source offset in
    [src_from, to) was compared with its copy on the target and matched, by a verify that passed.
    It names what it was verified against (topic IDs, the remote topic, the map epoch, the target's
    end), so a mark that no longer describes the partition is never trusted."""

    topic: str
    partition: int
    src_from: int  # the start of the verified stretch (the partition's first covered offset then)
    to: int  # verified up to here (exclusive)
    tgt_end: int  # the target offset right after the last verified copy (-1: none)
    topic_id: str
    target_topic: str
    target_topic_id: str
    epoch: int
    at: int  # wall clock ms of the verify
    by: str = ""
    records: int = 0  # source records the verify that wrote it compared (its new stretch only)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "v": FORMAT_VERSION,
                "topic": self.topic,
                "partition": self.partition,
                "from": self.src_from,
                "to": self.to,
                "tgt_end": self.tgt_end,
                "topic_id": self.topic_id,
                "target_topic": self.target_topic,
                "target_topic_id": self.target_topic_id,
                "epoch": self.epoch,
                "at": self.at,
                "by": self.by,
                "records": self.records,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> VerifiedMark:
        d = json.loads(raw)
        if int(d.get("v", 0)) > FORMAT_VERSION:
            raise StateError(f"verified record format v{d.get('v')} is newer than this mirrorflow (v{FORMAT_VERSION})")
        return cls(
            str(d["topic"]),
            int(d["partition"]),
            int(d["from"]),
            int(d["to"]),
            int(d.get("tgt_end", -1)),
            str(d.get("topic_id", "")),
            str(d.get("target_topic", "")),
            str(d.get("target_topic_id", "")),
            int(d.get("epoch", 0)),
            int(d.get("at", 0)),
            str(d.get("by", "")),
            int(d.get("records", 0)),
        )
