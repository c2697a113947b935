"""What a failback found and did (`FailbackReport`, a `reporting.Report`): the records on the
failed-over flow's source that are not on its target (`Divergence`: the divergence and the split
brain) and where the reverse flow starts in each partition (`Seed`), with their JSON in the
failback record."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.reporting import Report, iso

Ranges = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Divergence:
    """Records on the failed-over flow's source that had not reached its target (one category:
    the divergence, or the split brain)."""

    topic: str
    partition: int
    ranges: Ranges  # [from, to) source offsets
    records: int  # records in them (read_committed; markers and aborted records do not count)


@dataclass(frozen=True)
class Seed:
    """Where the reverse flow stands in one partition of its source after the failback."""

    topic: str  # the reverse flow's SOURCE topic (identity: the failed-over flow's target topic)
    partition: int
    start: int  # the reverse flow's next offset: the first one not written by the failed-over flow
    owned_from: int  # the reverse flow considers its source from here (its own progress, else the log start)
    mapped: int  # records of the failed-over flow mapped back by the inverse offset map
    target_end: int  # the reverse target's end when the failback started (its new records go after)
    to_copy: int = 0  # records at or above owned_from the failed-over flow did not write: copied
    to_copy_ranges: Ranges = ()  # [from, to) holding them (the last one up to the stable end then)
    covered: Ranges = ()  # the reverse flow's ledger at or above owned_from: never copied
    pruned_below: int = -1  # the forward map was pruned: offsets below this are taken as its writes


@dataclass
class FailbackReport(Report):
    flow: str  # the failed-over flow X->Y
    reverse: str  # Y->X, started by the failback
    identity: bool
    dry_run: bool
    failover_at: int = 0
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    divergence: list[Divergence] = field(default_factory=list)
    split_brain: list[Divergence] = field(default_factory=list)
    seeds: list[Seed] = field(default_factory=list)
    done: bool = False
    note: str | None = None
    reseed: bool = False  # the source was rebuilt: the reverse flow copies all of the target's topics

    @property
    def diverged(self) -> int:
        return sum(d.records for d in self.divergence)

    @property
    def split(self) -> int:
        return sum(d.records for d in self.split_brain)

    @property
    def to_copy(self) -> int:
        return sum(s.to_copy for s in self.seeds)

    def lines(self) -> list[str]:
        head = f"failback of flow {self.flow}: reverse flow {self.reverse}" + (" (dry run)" if self.dry_run else "")
        status = "STARTED" if self.done else (self.note or "preflight")
        src, tgt = self.flow.split("->", 1) if "->" in self.flow else (self.flow, self.flow)
        out = [f"{head}: {status}"]
        if self.failover_at:
            out.append(f"  failed over at {iso(self.failover_at)}")
        how = (
            "IdentityReplicationPolicy: the reverse flow copies every record on the target that the flow "
            "did not write (its offset map), and maps the others back"
            if self.identity
            else "the reverse flow copies the target's own topics under MM2's remote names"
        )
        if self.reseed:
            how = (
                f"--reseed: {src} was rebuilt; {self.reverse} copies every record of {tgt}'s topics from their "
                f"log start in a new map epoch, and {self.flow}'s state (of the old {src}) starts a new epoch"
            )
        out.append(f"  {how}")
        if self.reseed:
            for s in self.seeds:
                a, b = s.to_copy_ranges[0] if s.to_copy_ranges else (s.start, s.start)
                out.append(
                    f"    {s.topic}[{s.partition}]: copies offsets {a}..{b} ({b - a:,} offsets) into an empty {src}"
                )
            return out
        out.append(f"  written on {tgt} outside {self.flow}: {self.to_copy:,} records, will be copied to {src}")
        for s in self.seeds:
            where = ", ".join(f"{a}..{b}" for a, b in s.to_copy_ranges) or "-"
            line = (
                f"    {s.topic}[{s.partition}]: {s.to_copy:,} records (offsets {where}); {self.reverse} copies "
                f"from offset {s.start}"
            )
            if self.identity:
                line += f", {s.mapped:,} records of {self.flow} mapped back"
            if s.pruned_below >= 0:
                line += f" (offset map pruned: offsets below {s.pruned_below} taken as {self.flow}'s)"
            out.append(line)
        for name, total, parts, what in (
            (
                "divergence",
                self.diverged,
                self.divergence,
                f"written on {src} before the failover, not on {tgt}",
            ),
            ("split brain", self.split, self.split_brain, f"accepted by {src} after the failover"),
        ):
            keep = f" (kept on {src}, not deleted; not copied to {tgt})" if total else ""
            out.append(f"  {name}: {total:,} records {what}{keep}")
            for d in parts:
                ranges = ", ".join(f"{a}..{b}" for a, b in d.ranges)
                out.append(f"    {d.topic}[{d.partition}]: {d.records:,} records at offsets {ranges}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "reverse": self.reverse,
            "identity": self.identity,
            "dry_run": self.dry_run,
            "failover_at": self.failover_at,
            "at_ms": self.at_ms,
            "done": self.done,
            "note": self.note,
            "reseed": self.reseed,
            "diverged": self.diverged,
            "split": self.split,
            "to_copy": self.to_copy,
            "divergence": [divergence_dict(d) for d in self.divergence],
            "split_brain": [divergence_dict(d) for d in self.split_brain],
            "seeds": [seed_dict(s) for s in self.seeds],
        }


def divergence_dict(d: Divergence) -> dict[str, Any]:
    return {**asdict(d), "ranges": [list(r) for r in d.ranges]}


def divergence_from(d: dict[str, Any]) -> Divergence:
    return Divergence(
        str(d["topic"]), int(d["partition"]), tuple((int(a), int(b)) for a, b in d["ranges"]), int(d["records"])
    )


def seed_dict(s: Seed) -> dict[str, Any]:
    return {**asdict(s), **{k: [list(r) for r in getattr(s, k)] for k in ("to_copy_ranges", "covered")}}


def seed_from(d: dict[str, Any]) -> Seed:
    """A stored seed (older records lack the later fields)."""
    ranges = {k: tuple((int(a), int(b)) for a, b in d.get(k, ())) for k in ("to_copy_ranges", "covered")}
    return Seed(
        str(d["topic"]),
        int(d["partition"]),
        int(d["start"]),
        int(d["owned_from"]),
        int(d["mapped"]),
        int(d["target_end"]),
        int(d.get("to_copy", 0)),
        ranges["to_copy_ranges"],
        ranges["covered"],
        int(d.get("pruned_below", -1)),
    )
