"""`verify`: is the target a faithful copy of the source? Compared through the exact offset map.

For every source partition of the flow (or of the topics matching `--topics`) the copied source
ranges inside a window (`--from` / `--to`: `earliest`, `latest`, `offset:N` or an ISO-8601 time,
which the source maps to an offset with offsets_for_times) are read from the source and, where the
offset map places them, from the target, both read_committed, and walked together
(ops.verify.verify_walk): per range record counts and checksums, per partition what matches, the first
difference (source and target offset, and what differs) and how many of each kind, and what is not
copied yet. Nothing is written anywhere; it can run while copies run (state and records commit in
one transaction, so everything the map places is readable).

**Since the last verify** (`since_last`, the planned failover's verify): a verify that passed over
a stretch of a partition can record how far it got (`record`; state.verified: a "verified up to"
mark per partition on the target), and a later verify with `since_last` starts each partition at
its mark, so it costs what was copied since, not the flow's history. A mark is trusted only while
it still describes the partition (`mark_problem`): the same source and target topic IDs, remote
topic and map epoch, not ahead of what is copied, nothing copied below it since (a backfill), the
target partition not shorter than the verified copies' end. Otherwise that partition is verified
from the start and the report says why; nothing is ever skipped silently.

What cannot be checked is said, not counted as a mismatch: source offsets below the source's log
start (deleted by retention), copies below the target's log start (deleted there since, by its
retention or delete-records: the target's segments roll apart from the source's, so its retention
takes a copy while the source still holds the original) and source offsets below the offset map's
floor (state.snapshot prunes what no translation can still need, docs/state.md). Source offsets
the flow has not copied are listed as `not_copied`. A flow with exactly.once=false may show `extra`
records: duplicates a retried batch wrote.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import ClusterError, ConfigError, StateError, TopicError
from mirrorflow.ops.verify.inputs import VERIFY
from mirrorflow.ops.verify.verified_marks import mark_problem, next_mark
from mirrorflow.ops.verify.verify_reads import LATEST, Key, RecordReader, VerifyInputs, read_inputs
from mirrorflow.ops.verify.verify_report import PartitionVerify, VerifyReport, exit_code
from mirrorflow.ops.verify.verify_walk import Sides, clip, deleted_on_target, walk_partition
from mirrorflow.params import checked, named
from mirrorflow.replication.plan.when import When, check_range, topic_pattern
from mirrorflow.reporting import iso
from mirrorflow.state.offset_map import PartitionMap, below_target, merge_ranges, subtract_ranges
from mirrorflow.state.records import Progress, VerifiedMark
from mirrorflow.state.verified import write_marks

READ_TIMEOUT_S = 1800.0  # one side of one group may take this long to read (an open transaction blocks it)
SINCE_LAST = "the last verify"


def verify_flow(
    clients: FlowClients,
    topics: str | None = None,
    start: str | None = None,
    end: str | None = None,
    *,
    since_last: bool = False,
    record: bool = False,
    by: str = "",
    via: str = "cli",
) -> VerifyReport:
    """Compare source and target over the copied ranges of the flow's partitions (see the module
    docstring); `topics` is a regex over source topic names, `start`/`end` bound the window.
    `since_last`: each partition from its trusted 'verified up to' (not with `start`); `record`:
    write the new marks of the partitions that matched (`by`: who, for the record). A bad input is
    named as the door `via` calls it (ops.verify.inputs.VERIFY)."""
    if since_last and start:
        why = f"checks from each partition's last verify with {named('since_last', via)}: not both"
        raise ConfigError([(named("from", via), why)])
    began = time.monotonic()
    lo_when = When.parse(start or "earliest", named("from", via))
    hi_when = When.parse(end or "latest", named("to", via))
    check_range(lo_when, hi_when, named("from", via), named("to", via))
    pattern = topic_pattern(topics, named("topics", via))
    window_from = SINCE_LAST if since_last else str(lo_when)
    report = VerifyReport(clients.flow.name, window_from, str(hi_when), topics, since_last=since_last)
    inputs = read_inputs(clients, pattern, lo_when, hi_when, with_marks=since_last or record)
    if inputs is not None:
        verifier = Verifier(RecordReader(clients, READ_TIMEOUT_S), clients.flow, since_last, record, by)
        new_marks = [m for k in inputs.keys if (m := verifier.check(report, k, inputs)) is not None]
        if new_marks:
            report.recorded = write_marks(clients, new_marks)
    report.duration_s = time.monotonic() - began
    return report


def verify_given(clients: FlowClients, values: Mapping[str, Any], via: str = "cli", by: str = "") -> VerifyReport:
    """`verify_flow` over its inputs as a door handed them (ops.verify.inputs.VERIFY: the CLI's flags, the DAG's
    form), checked and named as that door calls them; `since_last` records too. A window start given
    with `since_last` is refused: the door drops a start it only has as a default (the form's)."""
    given = checked(VERIFY, values, via)
    since = bool(given["since_last"])
    return verify_flow(
        clients,
        given["topics"],
        values.get("from") or None,
        given["to"],
        since_last=since,
        record=bool(given["record"]) or since,
        by=by,
        via=via,
    )


class Verifier:
    """Judges one partition after another from what verify_reads read: whether its stored mark is
    trusted, whether its topics were recreated, the walk of its copied ranges, its new mark."""

    def __init__(self, records: RecordReader, flow: FlowConfig, since_last: bool, record: bool, by: str) -> None:
        self.records, self.flow = records, flow
        self.since_last, self.record, self.by = since_last, record, by

    def check(self, report: VerifyReport, k: Key, inputs: VerifyInputs) -> VerifiedMark | None:
        """Check partition `k` into a new PartitionVerify of `report`; returns its new mark (None: none)."""
        t, p = k
        pv = PartitionVerify(t, p, inputs.remote[k], failed_over=inputs.failed_over)
        report.partitions.append(pv)
        prog = inputs.progress.get(k)
        if k not in inputs.on_source:
            if prog is not None and prog.records:
                pv.error = f"source topic {t!r} partition {p} no longer exists on cluster {self.flow.source!r}"
            return None
        pv.source_start, pv.source_end = inputs.starts[k], inputs.ends[k]
        lo, hi = inputs.lo.get(k, 0), inputs.hi.get(k, LATEST)
        base = None
        if prog is not None and k in inputs.marks:
            base = self._trusted(pv, inputs.marks[k], prog, inputs.src_id(k), inputs.tgt_id(k), inputs.target_ends)
        if self.since_last and base is not None:
            lo = pv.since = base.to
        pv.window = (lo, None if hi >= LATEST else hi)
        self._identity(pv, prog, inputs.src_id(k), inputs.tgt_id(k))
        remote = inputs.remote[k]
        sides = Sides(t in inputs.compacted_src, remote in inputs.compacted_tgt, kept=inputs.kept.get((remote, p), ()))
        pm = inputs.maps.get(k, PartitionMap())
        if pv.since is not None and base is not None and base.tgt_end >= 0:
            # where the copies it verified end; a mark of no copy (-1) has no place on the target: from the first
            # copy, as a verify from the start (the target's records before it, a failback's or an application's
            # from before the flow, were taken as extra: search seed 3017673022)
            sides = replace(sides, target_from=base.tgt_end)
        if prog is not None:  # offsets the flow owns below one it copied and did not copy: a hole
            pv.holes = [(max(a, lo), min(b, hi)) for a, b in prog.holes() if b > lo and a < hi]
        try:
            self._check(pv, pm, lo, hi, sides)
        except (TopicError, ClusterError) as exc:
            pv.error = str(exc)
        if prog is not None:
            pv.not_copied, pv.not_owned = _owned(pv.not_copied, prog)
        if self.record and prog is not None and pv.ok:
            return self._mark(pv, prog, pm, lo, hi, base, inputs.src_id(k), inputs.tgt_id(k))
        return None

    def _trusted(
        self,
        pv: PartitionVerify,
        mark: VerifiedMark | StateError,
        prog: Progress,
        src_id: str,
        tgt_id: str,
        target_ends: dict[tuple[str, int], int],
    ) -> VerifiedMark | None:
        """The partition's stored mark when it may be trusted, else None and, with since_last, a
        note saying why it is verified from the start."""
        if isinstance(mark, StateError):
            why: str | None = str(mark)
        else:
            why = mark_problem(
                mark, prog, src_id, pv.target_topic, tgt_id, target_ends.get((pv.target_topic, pv.partition))
            )
        if why is None and isinstance(mark, VerifiedMark):
            if self.since_last:
                pv.notes.append(
                    f"since the last verify ({iso(mark.at)}{', by ' + mark.by if mark.by else ''}): verified up to "
                    f"{mark.to} then, checked from there"
                )
            return mark
        if self.since_last:
            shown = f" {mark.to}" if isinstance(mark, VerifiedMark) else ""
            pv.notes.append(f"the stored 'verified up to'{shown} is not trusted ({why}): checked from the start")
        return None

    def _mark(
        self,
        pv: PartitionVerify,
        prog: Progress,
        pm: PartitionMap,
        lo: int,
        hi: int,
        base: VerifiedMark | None,
        src_id: str,
        tgt_id: str,
    ) -> VerifiedMark | None:
        """The new 'verified up to' of a partition that matched (None: nothing new to record)."""
        stretch = next_mark(list(prog.covered), lo, hi, base)
        if stretch is None:
            return None
        frm, to = stretch
        copies = [r.tgt + r.count for r in clip(pm.runs, frm, to)]
        tgt_end = max([*copies, base.tgt_end if base is not None else -1])
        pv.verified_to = to
        pv.notes.append(f"recorded: verified up to {to}")
        at = int(time.time() * 1000)
        return VerifiedMark(
            pv.topic,
            pv.partition,
            frm,
            to,
            tgt_end,
            src_id,
            pv.target_topic,
            tgt_id,
            prog.epoch,
            at,
            self.by,
            pv.source_records,
        )

    def _identity(self, pv: PartitionVerify, prog: Progress | None, src_id: str, tgt_id: str) -> None:
        if prog is None:
            return
        if prog.topic_id and src_id and prog.topic_id != src_id:
            pv.notes.append(
                f"the source topic was recreated since it was copied (topic ID {prog.topic_id} -> {src_id})"
            )
        if prog.target_topic_id and prog.target_topic_id != tgt_id:
            now = tgt_id or "none: the topic is gone"
            pv.notes.append(
                f"the target topic was recreated since it was copied (topic ID {prog.target_topic_id} -> {now})"
            )

    def _check(self, pv: PartitionVerify, pm: PartitionMap, lo: int, hi: int, sides: Sides) -> None:
        """Check partition `pv` over source offsets [lo, hi)."""
        start = max(lo, pv.source_start)
        pv.not_copied = subtract_ranges(start, min(hi, pv.source_end), pm.covered)
        below = [a for a, b in pm.covered if a < pv.source_start and b > lo]
        if below and lo < pv.source_start:
            a = max(lo, below[0])
            pv.unchecked.append(f"source offsets {a}..{pv.source_start}: deleted by source retention, not checkable")
        if pm.floor > start and start < hi and pm.first is not None and pm.first < pm.floor:
            pv.unchecked.append(
                f"source offsets {start}..{min(pm.floor, hi)}: below the offset map's floor (pruned), not checkable"
            )
            start = pm.floor
            forgotten = [(r.tgt, r.tgt + r.count) for r in pm.marks] + [(sp.tgt, sp.tgt_end) for sp in pm.spans]
            sides = replace(sides, forgotten=tuple(merge_ranges(forgotten)))
        ranges = [(max(a, start), min(b, hi)) for a, b in pm.covered if b > start and a < hi]
        if not ranges:
            return
        p, remote = pv.partition, pv.target_topic
        runs = clip(pm.runs, start, hi)
        try:
            lo_t, _ = self.records.reader("target").watermarks(remote, p, wait_for_topic=False)
        except TopicError:
            if runs:
                raise TopicError(
                    f"target topic {remote!r} partition {p} does not exist on cluster {self.flow.target!r}: "
                    f"{sum(r.count for r in runs):,} copied records are missing"
                ) from None
            lo_t = 0
        gone = deleted_on_target(runs, lo_t)
        if gone:
            n = sum(r.count for r in below_target(runs, lo_t))
            pv.unchecked.append(
                f"source offsets {gone[0][0]}..{gone[-1][1]}: {n:,} copied records deleted on the target since "
                f"(below its log start {lo_t}: retention, delete-records), not checkable"
            )
            ranges = [piece for a, b in ranges for piece in subtract_ranges(a, b, gone)]
            runs = [piece for a, b in ranges for piece in clip(runs, a, b)]
        tally = walk_partition(
            ranges,
            runs,
            pm.runs,
            lambda a, b: self.records.records("source", pv.topic, p, a, b),
            lambda a, b: self.records.records("target", remote, p, a, b),
            replace(sides, target_log_start=lo_t),
            None if sides.target_from is None else max(sides.target_from, lo_t),
        )
        pv.ranges, pv.counts, pv.first_mismatch, pv.kept = tally.ranges, dict(tally.counts), tally.first, tally.kept


def _owned(ranges: list[tuple[int, int]], prog: Progress) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """`ranges` (source offsets with no copy) split into those the flow owns and those it does not: below
    its origin, or accounted for in its progress without a copy (a failback kept them apart on the source)."""
    theirs = merge_ranges([*prog.accounted(), *([(0, prog.owned_from)] if prog.owned_from > 0 else [])])
    mine = [piece for a, b in ranges for piece in subtract_ranges(a, b, theirs)]
    return mine, [piece for a, b in ranges for piece in subtract_ranges(a, b, mine)]


__all__ = ["PartitionVerify", "VerifyReport", "When", "exit_code", "verify_flow"]
