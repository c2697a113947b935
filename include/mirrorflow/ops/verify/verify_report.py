"""A verify's result: per partition what matched, the first difference and how many of each kind,
what is not copied and what could not be checked (`PartitionVerify`), and the flow's verdict
(`VerifyReport`, a `reporting.Report`; `exit_code` for the CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mirrorflow.ops.verify.verify_walk import Mismatch, RangeCheck
from mirrorflow.reporting import Report, as_dict


@dataclass
class PartitionVerify:
    topic: str
    partition: int
    target_topic: str
    source_start: int = -1  # the source's log start and end (last stable offset) when verified
    source_end: int = -1
    window: tuple[int, int | None] = (0, None)  # source offsets [from, to) asked (None: latest)
    ranges: list[RangeCheck] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # mismatches per kind
    first_mismatch: Mismatch | None = None
    not_copied: list[tuple[int, int]] = field(default_factory=list)  # source offsets in the window not copied yet
    # source offsets in the window with no copy that the flow does not own: below its origin (its initial
    # position), or accounted for without a copy (a failback kept them apart on the source)
    not_owned: list[tuple[int, int]] = field(default_factory=list)
    # the part of `not_copied` below a copied offset: a hole the copy left (a mismatch until copied,
    # unless the flow failed over: then its failover's RPO, which that failover reported not replicated)
    holes: list[tuple[int, int]] = field(default_factory=list)
    failed_over: bool = False  # the flow's failover stopped it: nothing not copied will be copied by it
    unchecked: list[str] = field(default_factory=list)  # what could not be checked, and why
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the partition could not be verified (counts as a mismatch)
    kept: int = 0  # target records a failback kept there (divergence, split brain): not copies, not mismatches
    since: int | None = None  # since_last: checked from this trusted 'verified up to' (None: from the start)
    verified_to: int | None = None  # the 'verified up to' this verify recorded (None: none recorded)

    @property
    def source_records(self) -> int:
        return sum(r.source_records for r in self.ranges)

    @property
    def target_records(self) -> int:
        return sum(r.target_records for r in self.ranges)

    @property
    def matched(self) -> int:
        return sum(r.matched for r in self.ranges)

    @property
    def compacted(self) -> int:
        return sum(r.compacted for r in self.ranges)

    @property
    def mismatches(self) -> int:
        return sum(self.counts.values())

    @property
    def ok(self) -> bool:
        return self.error is None and self.mismatches == 0 and not (self.holes and not self.failed_over)

    def line(self) -> str:
        head = f"{self.topic}[{self.partition}] -> {self.target_topic}[{self.partition}]"
        if self.error:
            return f"{head}: NOT VERIFIED: {self.error}"
        state = "ok" if self.ok else "MISMATCH"
        text = (
            f"{head}: {state}, {self.matched:,} of {self.source_records:,} source records match "
            f"({self.target_records:,} on the target) in {len(self.ranges)} range(s)"
        )
        if self.compacted:
            text += f", {self.compacted:,} removed by compaction on one side"
        if self.kept:
            text += f", {self.kept:,} kept on the target by a failback (divergence/split brain, not copies)"
        if self.counts:
            text += "; " + ", ".join(f"{n:,} {k}" for k, n in sorted(self.counts.items()))
        if self.holes:
            text += "; " + self._holes()
        return text

    def _holes(self) -> str:
        n, ranges = sum(b - a for a, b in self.holes), ", ".join(f"{a}..{b}" for a, b in self.holes)
        gone = self.holes[0][0] < self.source_start
        below = f" (those below the source's log start {self.source_start} are gone" if gone else ""
        if self.failed_over:  # an unplanned failover's RPO (a planned one drains them, or --max-lag accepted them)
            return (
                f"{n:,} source offsets below the copied ones were not copied when the flow failed over ({ranges}): "
                "its failover reported them not replicated; a failback keeps those the source holds apart there"
                + (f"{below})" if gone else "")
            )
        return (
            f"HOLES: {n:,} source offsets below the copied ones are not on the target ({ranges}); the next "
            "replicate run copies them" + (f"{below}: it names them lost)" if gone else "")
        )

    def detail_lines(self) -> list[str]:
        out = []
        if self.first_mismatch is not None:
            out.append(f"first: {self.first_mismatch.line()}")
        for r in self.ranges:
            tgt = f"target {r.tgt_from}..{r.tgt_to}" if r.tgt_from >= 0 else "no target records"
            out.append(
                f"source {r.src_from}..{r.src_to} -> {tgt}: {r.source_records:,} / {r.target_records:,} records, "
                f"checksums {r.source_checksum[:12]} / {r.target_checksum[:12]}"
                + ("" if r.ok else f", {r.mismatches:,} not matching")
            )
        if self.not_copied:
            # failed over: the flow copies nothing more (what it had not copied, and what the source got since)
            when = "(failed over: the flow copies nothing more)" if self.failed_over else "yet"
            out.append(f"not copied {when}: " + ", ".join(f"{a}..{b}" for a, b in self.not_copied))
        if self.not_owned:
            out.append(
                "not the flow's to copy (before its origin, or kept apart on the source by a failback): "
                + ", ".join(f"{a}..{b}" for a, b in self.not_owned)
            )
        out += self.unchecked + self.notes
        return out

    def to_dict(self) -> dict[str, Any]:
        derived = ("ok", "source_records", "target_records", "matched", "compacted", "mismatches")
        return as_dict(self, *derived, parts={"ranges": ("ok",)})


@dataclass
class VerifyReport(Report):
    flow: str
    window_from: str
    window_to: str
    topics: str | None = None
    partitions: list[PartitionVerify] = field(default_factory=list)
    duration_s: float = 0.0
    since_last: bool = False
    recorded: int = 0  # 'verified up to' marks written

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.partitions)

    @property
    def mismatched(self) -> list[PartitionVerify]:
        return [p for p in self.partitions if not p.ok]

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "from": self.window_from,
            "to": self.window_to,
            "topics": self.topics,
            "ok": self.ok,
            "duration_s": round(self.duration_s, 3),
            "records": sum(p.source_records for p in self.partitions),
            "matched": sum(p.matched for p in self.partitions),
            "mismatched_partitions": len(self.mismatched),
            "since_last": self.since_last,
            "recorded": self.recorded,
            "partitions": [p.to_dict() for p in self.partitions],
        }

    def lines(self) -> list[str]:
        """The report as text: a verdict, then one line per partition and its details."""
        scope = f"topics {self.topics!r}, " if self.topics else ""
        verdict = (
            "MATCH: every copied record is on the target, exactly"
            if self.ok
            else f"MISMATCH in {len(self.mismatched)} of {len(self.partitions)} partition(s)"
        )
        out = [
            f"verify {self.flow} ({scope}from {self.window_from} to {self.window_to}): {verdict} "
            f"({sum(p.source_records for p in self.partitions):,} source records checked in {self.duration_s:.1f}s"
            + (f"; 'verified up to' recorded for {self.recorded} partition(s)" if self.recorded else "")
            + ")"
        ]
        if not self.partitions:
            out.append("  no partitions to verify")
        for p in self.partitions:
            out.append(f"  {p.line()}")
            out += [f"    {x}" for x in p.detail_lines()]
        return out


def exit_code(report: VerifyReport) -> int:
    """0 when everything checked matches, 1 on a mismatch (or a partition that could not be verified)."""
    return 0 if report.ok else 1
