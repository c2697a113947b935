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
start (deleted by retention) and below the offset map's floor (state.snapshot prunes what no
translation can still need, docs/state.md). Source offsets the flow has not copied are listed as
`not_copied`. A flow with exactly.once=false may show `extra` records: duplicates a retried batch
wrote.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients, Side
from mirrorflow.errors import ClusterError, ConfigError, StateError, TopicError
from mirrorflow.kafka.log_reader import LogReader
from mirrorflow.kafka.topic_admin import compacted_topics, list_offsets, topic_ids
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.verify.verified_marks import mark_problem, next_mark
from mirrorflow.ops.verify.verify_report import PartitionVerify, VerifyReport, exit_code
from mirrorflow.ops.verify.verify_walk import Rec, Sides, clip, walk_partition
from mirrorflow.replication.backfill_plan import When, topic_pattern
from mirrorflow.replication.planner import source_offsets, source_partitions
from mirrorflow.reporting import iso
from mirrorflow.state.flow_state import read_control
from mirrorflow.state.offset_map import PartitionMap, subtract_ranges
from mirrorflow.state.records import Progress, VerifiedMark
from mirrorflow.state.store import StateStore
from mirrorflow.state.verified import read_marks, write_marks

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = 1 << 62  # "no upper bound" for a window
READ_TIMEOUT_S = 1800.0  # one side of one group may take this long to read (an open transaction blocks it)
Key = tuple[str, int]


SINCE_LAST = "the last verify"


def verify_flow(
    clients: FlowClients,
    topics: str | None = None,
    start: str | None = None,
    end: str | None = None,
    read_timeout: float = READ_TIMEOUT_S,
    *,
    since_last: bool = False,
    record: bool = False,
    by: str = "",
) -> VerifyReport:
    """Compare source and target over the copied ranges of the flow's partitions (see the module
    docstring); `topics` is a regex over source topic names, `start`/`end` bound the window.
    `since_last`: each partition from its trusted 'verified up to' (not with `start`); `record`:
    write the new marks of the partitions that matched (`by`: who, for the record)."""
    if since_last and start:
        raise ConfigError([("--from", "checks from each partition's last verify with --since-last: not both")])
    began = time.monotonic()
    lo_when, hi_when = When.parse(start or "earliest", "--from"), When.parse(end or "latest", "--to")
    pattern = topic_pattern(topics)
    window_from = SINCE_LAST if since_last else str(lo_when)
    report = VerifyReport(clients.flow.name, window_from, str(hi_when), topics, since_last=since_last)
    Verifier(clients, pattern, lo_when, hi_when, read_timeout, since_last, record, by).run(report)
    report.duration_s = time.monotonic() - began
    return report


class Verifier:
    """Reads what verify needs in a few batched calls, then checks one partition after another."""

    def __init__(
        self,
        clients: FlowClients,
        pattern: re.Pattern[str] | None,
        lo: When,
        hi: When,
        read_timeout: float,
        since_last: bool = False,
        record: bool = False,
        by: str = "",
    ) -> None:
        self.clients, self.flow = clients, clients.flow
        self.filters = FlowFilters.for_flow(self.flow)
        self.pattern, self.lo, self.hi, self.read_timeout = pattern, lo, hi, read_timeout
        self.since_last, self.record, self.by = since_last, record, by
        self._readers: dict[Side, LogReader] = {}

    def reader(self, side: Side) -> LogReader:
        if side not in self._readers:
            self._readers[side] = self.clients.reader(side, group=f"mirrorflow-{self.flow.client_name}-verify")
        return self._readers[side]

    def _wanted(self, topic: str) -> bool:
        return self.filters.should_replicate_topic(topic) and (
            self.pattern is None or self.pattern.fullmatch(topic) is not None
        )

    def run(self, report: VerifyReport) -> None:
        store = StateStore(self.clients)
        on_source = {(t, p): r for t, p, r in source_partitions(self.flow, self.clients.admin("source"))}
        progress = {k: v for k, v in store.progress().items() if self._wanted(k[0])}
        keys = sorted({k for k in on_source if self._wanted(k[0])} | set(progress))
        if not keys:
            return
        maps = store.offset_map([k for k in keys if k in progress])
        live = [k for k in keys if k in on_source]
        starts = source_offsets(self.clients, live, OffsetSpec.earliest())
        ends = source_offsets(self.clients, live, OffsetSpec.latest())
        lo_of, hi_of = self._bound(self.lo, live, ends, progress), self._bound(self.hi, live, ends, progress)
        remote = {k: self._remote(k, progress.get(k), on_source) for k in keys}
        src_ids = topic_ids(self.clients.admin("source"), self.clients.connection("source"), {t for t, _ in live})
        tgt_ids = topic_ids(self.clients.admin("target"), self.clients.connection("target"), set(remote.values()))
        compacted_src = self._compacted("source", {t for t, _ in live})
        compacted_tgt = self._compacted("target", set(remote.values()) & set(tgt_ids))
        kept = self._kept_by_failback()
        marks = read_marks(self.clients, [k for k in live if k in progress]) if self.since_last or self.record else {}
        target_ends = self._target_ends([(remote[k], k[1]) for k in marks], tgt_ids)
        new_marks: list[VerifiedMark] = []
        for k in keys:
            t, p = k
            pv = PartitionVerify(t, p, remote[k])
            report.partitions.append(pv)
            prog = progress.get(k)
            if k not in on_source:
                if prog is not None and prog.records:
                    pv.error = f"source topic {t!r} partition {p} no longer exists on cluster {self.flow.source!r}"
                continue
            pv.source_start, pv.source_end = starts[k], ends[k]
            lo, hi = lo_of.get(k, 0), hi_of.get(k, LATEST)
            base = None
            if prog is not None and k in marks:
                base = self._trusted(pv, marks[k], prog, src_ids.get(t, ""), tgt_ids.get(remote[k], ""), target_ends)
            if self.since_last and base is not None:
                lo = pv.since = base.to
            pv.window = (lo, None if hi >= LATEST else hi)
            self._identity(pv, prog, src_ids.get(t, ""), tgt_ids.get(remote[k], ""))
            sides = Sides(t in compacted_src, remote[k] in compacted_tgt, kept=kept.get((remote[k], p), ()))
            pm = maps.get(k, PartitionMap())
            if pv.since is not None and base is not None:
                sides = replace(sides, target_from=base.tgt_end)
            try:
                self._check(pv, pm, lo, hi, sides)
            except (TopicError, ClusterError) as exc:
                pv.error = str(exc)
            if self.record and prog is not None and pv.ok:
                mark = self._mark(pv, prog, pm, lo, hi, base, src_ids.get(t, ""), tgt_ids.get(remote[k], ""))
                if mark is not None:
                    new_marks.append(mark)
        if new_marks:
            report.recorded = write_marks(self.clients, new_marks)

    def _target_ends(self, tps: list[tuple[str, int]], tgt_ids: dict[str, str]) -> dict[tuple[str, int], int]:
        """The ends of the remote partitions that have a mark (whether the target still holds what
        a mark verified)."""
        tps = [tp for tp in tps if tp[0] in tgt_ids]
        if not tps:
            return {}
        admin, conn = self.clients.admin("target"), self.clients.connection("target")
        return list_offsets(admin, conn, tps, OffsetSpec.latest(), committed=False)

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

    def _kept_by_failback(self) -> dict[Key, tuple[tuple[int, int], ...]]:
        """Target ranges holding records the failbacks that started this flow kept on its target:
        the reverse flow's divergence and split brain (ops.dr.failback), reported, never copied; the
        latest failback record carries the earlier ones' (`kept_earlier`)."""
        record = read_control(self.clients, "failback") or {}
        kept: dict[Key, tuple[tuple[int, int], ...]] = {}
        for d in [
            *(record.get("kept_earlier") or []),
            *(record.get("divergence") or []),
            *(record.get("split_brain") or []),
        ]:
            k = (str(d["topic"]), int(d["partition"]))
            kept[k] = kept.get(k, ()) + tuple((int(a), int(b)) for a, b in d["ranges"])
        return kept

    def _remote(self, k: Key, prog: Progress | None, on_source: dict[Key, str]) -> str:
        if prog is not None and prog.target_topic:
            return prog.target_topic
        return on_source.get(k) or self.filters.remote_topic(k[0])

    def _bound(
        self, when: When, keys: list[Key], ends: dict[Key, int], progress: dict[Key, Progress]
    ) -> dict[Key, int]:
        """The window bound as a source offset per partition (a time: the first offset at or after
        it; `start`: where the flow's copy of the partition began)."""
        if when.kind == "start":
            return {k: progress[k].covered[0][0] if k in progress and progress[k].covered else 0 for k in keys}
        if when.kind == "earliest":
            return {k: 0 for k in keys}
        if when.kind == "latest":
            return {k: LATEST for k in keys}
        if when.kind == "offset":
            return {k: when.value for k in keys}
        found = source_offsets(self.clients, keys, OffsetSpec.for_timestamp(when.value))
        return {k: (off if off >= 0 else ends[k]) for k, off in found.items()}

    def _compacted(self, side: Side, topics: set[str]) -> set[str]:
        """The topics whose cleanup.policy includes compact."""
        return compacted_topics(self.clients.admin(side), self.clients.connection(side), topics)

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
        ranges = [(max(a, start), min(b, hi)) for a, b in pm.covered if b > start and a < hi]
        if not ranges:
            return
        p, remote = pv.partition, pv.target_topic
        runs = clip(pm.runs, start, hi)
        try:
            lo_t, _ = self.reader("target").watermarks(remote, p, wait_for_topic=False)
        except TopicError:
            if runs:
                raise TopicError(
                    f"target topic {remote!r} partition {p} does not exist on cluster {self.flow.target!r}: "
                    f"{sum(r.count for r in runs):,} copied records are missing"
                ) from None
            lo_t = 0
        tally = walk_partition(
            ranges,
            runs,
            pm.runs,
            lambda a, b: self._records("source", pv.topic, p, a, b),
            lambda a, b: self._records("target", remote, p, a, b),
            replace(sides, target_log_start=lo_t),
            sides.target_from,
        )
        pv.ranges, pv.counts, pv.first_mismatch, pv.kept = tally.ranges, dict(tally.counts), tally.first, tally.kept

    def _records(self, side: Side, topic: str, partition: int, a: int, b: int) -> Iterator[Rec]:
        """The committed records of [a, b), read lazily (the read starts with the first record asked)."""
        if b <= a:
            return iter(())
        messages = self.reader(side).read(
            topic, {partition: a}, self.read_timeout, wait_for_topic=False, stops={partition: b}
        )
        return map(Rec.of, messages)


__all__ = ["PartitionVerify", "VerifyReport", "When", "exit_code", "verify_flow"]
