"""What one run copied, per remote topic: the source and target offset ranges of each partition.

This is what a downstream consumer of the target needs to process exactly the new records (the
Airflow Asset event of each remote topic carries it, mirrorflow_airflow.assets). It is built from
the units' results (copier.UnitResult as dicts), so it counts only what was committed: a unit that
failed after some transactions still contributes those. Ranges are half-open `[from, to)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CopiedRange:
    """One partition's share of a run. The source range is the offsets the run's transactions
    covered (gaps, markers and aborted records in it are not copied); the target range holds every
    record the run wrote to that partition (from the first one's offset to the end after the last,
    transaction markers included), and nothing another run wrote; None when a copy task of an
    older version did not say where its first record landed."""

    partition: int
    source: tuple[int, int]
    target: tuple[int, int] | None
    records: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "source_offsets": list(self.source),
            "target_offsets": list(self.target) if self.target is not None else None,
            "records": self.records,
        }


@dataclass(frozen=True)
class CopiedTopic:
    source_topic: str
    target_topic: str
    partitions: tuple[CopiedRange, ...]

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_topic": self.source_topic,
            "target_topic": self.target_topic,
            "records": self.records,
            "partitions": [p.to_dict() for p in self.partitions],
        }


def copied_per_topic(results: Iterable[dict[str, Any]]) -> list[CopiedTopic]:
    """The remote topics a run wrote records to (sorted), each with its partitions' ranges; a
    topic or partition the run wrote no record to is absent."""
    ranges: dict[tuple[str, str, int], list[int]] = {}  # -> [src_from, src_to, tgt_from, tgt_to, records]
    for r in results:
        if not r.get("records"):
            continue
        key = (r["target_topic"], r["topic"], int(r["partition"]))
        got = [int(r["copied_from"]), int(r["copied_to"]), int(r.get("target_from", -1)), int(r["tgt_end"])]
        was = ranges.get(key)
        if was is not None:  # a target start unknown (-1) makes the partition's target range unknown
            got = [min(was[0], got[0]), max(was[1], got[1]), min(was[2], got[2]), max(was[3], got[3])]
        ranges[key] = [*got, int(r["records"]) + (was[4] if was is not None else 0)]
    topics: dict[tuple[str, str], list[CopiedRange]] = {}
    for (target, source, partition), (s0, s1, t0, t1, n) in sorted(ranges.items()):
        topics.setdefault((target, source), []).append(
            CopiedRange(partition, (s0, s1), (t0, t1) if t0 >= 0 else None, n)
        )
    return [CopiedTopic(s, t, tuple(parts)) for (t, s), parts in sorted(topics.items())]
