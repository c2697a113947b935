"""Failback of a failed-over flow X->Y: start its reverse flow Y->X from what X->Y wrote.

Every record on Y that X->Y did not write reaches X exactly once, whenever it was written (before
the failover committed, while its approval waited, after), and nothing X already had is copied back:

* **What X->Y wrote** comes from X->Y's own offset map (its runs: the target offsets of every
  record it copied), never from Y's end at some moment. Per partition of Y's topic the reverse
  flow's progress gets a ledger (`Progress.covered`) that holds exactly those offsets; every other
  offset from where the reverse flow stands (its own progress, else Y's log start) is left to copy.
  The offsets between X->Y's records (its transaction markers, aborted attempts, or records other
  producers wrote in between) are read once (read_committed): a stretch without a committed record
  joins the ledger, a stretch with records stays to be copied. The reverse flow copies holes in its
  ledger like backfill/reseed do (planner: [next, end) minus the ledger), so its first run copies
  every record written on Y outside X->Y, in Y's order. The report counts them per partition
  (`written on Y outside X->Y: N records, will be copied`).
* **IdentityReplicationPolicy** (topics keep their names both ways): the reverse flow's offset map
  also gets the inverse of X->Y's map over what X->Y wrote (Y offset -> the original X offset), so
  Y->X's checkpoints translate a group on Y exactly, also one still reading records that came from
  X, and `verify` of Y->X checks them.
* **DefaultReplicationPolicy**: X->Y wrote only into Y's `X.T`, which is never copied back (MM2's
  cycle rule); every record of Y's own topic `T` reaches X as `Y.T` (from where Y->X stands, else
  from Y's log start).

Records on X that are not on Y, two categories, both kept on X (never deleted) and never copied to
Y by any later step (a failback back records them as done for X->Y):

* **divergence**: written on X before the failover (record timestamp before the failover record's
  `at`, when its plan was made) and never copied by X->Y: lost from Y's point of view.
* **split brain**: accepted by X after the failover (timestamp at or after `at`), i.e. producers
  that still wrote to X while the applications moved to Y. MirrorMaker 2 users expect a
  failback not to merge these silently; the report names them (ranges, counts) so the operator
  decides (re-produce them on Y, or drop them).
Both: per partition, X offsets at or above X->Y's progress that its ledger does not cover, up to
X's end now.

X rebuilt empty (`failback --reseed`): nothing of X's is kept, so Y->X starts each partition of Y's
topics at Y's log start in a new map epoch (as `mirrorflow reseed` does) and copies all of it; its
own map then moves the groups back exactly. X->Y's state (of the old X) gets a new epoch without
progress, so the failback back starts it at the rebuilt X's log start. Refused when X's topics hold
records (they would be duplicated).

Going back (the symmetric step): `mirrorflow failover --flow Y->X --mode planned` moves the groups
to X and stops Y->X; `mirrorflow failback --flow Y->X` then restarts X->Y by the same rule the other
way: X->Y's ledger gets what Y->X wrote on X (the records copied and the seeded inverse runs) and
the divergence and split-brain ranges of the earlier failback, so it copies only what was written
on X outside Y->X since (the records producers wrote on X after the failover back).

The reverse flow must be in the config. With the identity policy the pair X->Y / Y->X is a cycle,
which `config validate` accepts only when one of the two is `standby: true` (stopped until a
failback starts it); only one of the two runs at a time because a failover stops the flow it moves
away from and a failback refuses to start the reverse flow of a flow that is not stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, MirrorflowError, StateError
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.replication.planner import source_offsets
from mirrorflow.reporting import Report
from mirrorflow.state.flow_state import flow_state, read_control, read_controls, set_flow_state, write_control
from mirrorflow.state.history import record_operation
from mirrorflow.state.lease import FlowLease, local_owner, whoami
from mirrorflow.state.offset_map import MapEntry, Run, merge_ranges, subtract_ranges
from mirrorflow.state.records import Progress
from mirrorflow.state.state_topics import (
    ensure_state_topics,
    offset_map_topic,
    progress_topic,
)
from mirrorflow.state.state_writer import StateWriter, write_partition_state
from mirrorflow.state.store import StateStore

Key = tuple[str, int]
Ranges = tuple[tuple[int, int], ...]
Inverse = tuple[list[Run], list[tuple[int, int]]]  # inverse runs, and the ranges their map entries cover
RUNS_PER_ENTRY = 5_000  # inverse runs per seeded offset-map entry (records stay small)


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
            out.append(f"  failed over at {_iso(self.failover_at)}")
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
            "divergence": [_divergence_dict(d) for d in self.divergence],
            "split_brain": [_divergence_dict(d) for d in self.split_brain],
            "seeds": [_seed_dict(s) for s in self.seeds],
        }


def reverse_flow(cfg: Config, flow: FlowConfig) -> FlowConfig:
    """The flow target->source of `flow`; a ConfigError saying how to add it when there is none."""
    for f in cfg.flows.values():
        if f.source == flow.target and f.target == flow.source:
            return f
    raise ConfigError(
        [
            (
                f"flows.{flow.target}->{flow.source}",
                f"failback of {flow.name} starts the reverse flow {flow.target}->{flow.source}, which is not "
                f"in the config: add it with the same topics, groups and replication.policy.class as "
                f"{flow.name} and `standby: true` (it stays stopped until the failback starts it)",
            )
        ]
    )


def failback(
    cfg: Config,
    flow: FlowConfig,
    dry_run: bool = False,
    confirm: Callable[[FailbackReport], bool] = lambda r: True,
    reseed: bool = False,
) -> FailbackReport:
    """Preflight (divergence, split brain, what the reverse flow copies), confirm, start the reverse
    flow (module docstring); `reseed`: the source was rebuilt empty (`_plan_reseed`). Raises a
    MirrorflowError for bad input (no failover yet, flow not stopped, source unreachable, --reseed
    into a source that holds records)."""
    rev = reverse_flow(cfg, flow)
    if _is_identity(flow) != _is_identity(rev):
        raise ConfigError(
            [
                (
                    f"flows.{rev.name}.replication.policy.class",
                    f"the reverse flow must use the same replication policy as {flow.name} (identity on one side "
                    "only would copy what the target got from the source back to it, under another name)",
                )
            ]
        )
    identity = _is_identity(flow)
    report = FailbackReport(flow.name, rev.name, identity, dry_run, reseed=reseed)
    with FlowClients(cfg, flow) as fc, FlowClients(cfg, rev) as rc:
        record = read_control(fc, "failover")
        if record is None:
            raise StateError(
                f"flow {flow.name} was never failed over (no failover record on cluster {flow.target!r}): "
                f"failback starts {rev.name} from that record; run `mirrorflow failover --flow {flow.name}` first"
            )
        report.failover_at = int(record.get("at", 0))
        previous = read_control(rc, "failback")
        if previous is not None and int(previous.get("failover_at", -1)) == report.failover_at:
            report.note = (
                f"nothing to do: {rev.name} was already started by a failback of {flow.name} at "
                f"{_iso(int(previous.get('at', 0)))}"
            )
            report.divergence = [_divergence_from(d) for d in previous.get("divergence", [])]
            report.split_brain = [_divergence_from(d) for d in previous.get("split_brain", [])]
            report.seeds = [_seed_from(s) for s in previous.get("seeds", [])]
            return report
        state = flow_state(fc)
        if state.state != "stopped":
            raise StateError(
                f"flow {flow.name} is {state.describe()}: a failback starts {rev.name}, and both running "
                f"would copy records back and forth; stop it first (`mirrorflow flow stop --flow {flow.name}`)"
            )
        inverse: dict[Key, Inverse] = {}
        if reseed:
            report.seeds = _plan_reseed(rc, record)
        else:
            report.divergence, report.split_brain = _divergence(fc, record, report.failover_at)
            report.seeds, inverse = _plan_seeds(fc, rc, record, identity)
        if dry_run:
            report.note = "dry run: nothing changed"
            return report
        if not confirm(report):
            report.note = "not confirmed: nothing changed"
            return report
        ensure_state_topics(rc)  # the reverse flow may never have run
        lease = FlowLease(rc, *local_owner("mirrorflow failback")).acquire()
        try:
            if reseed:
                _write_reseed(fc, rc, report.seeds, sorted(_offsets(record, "replicated_to")))
            else:
                _write_seeds(rc, report.seeds, inverse)
            set_flow_state(
                rc, "running", f"failback of {flow.name} (failed over at {_iso(report.failover_at)})", whoami()
            )
            write_control(
                rc,
                "failback",
                {
                    "at": report.at_ms,
                    "of": flow.name,
                    "failover_at": report.failover_at,
                    "by": whoami(),
                    "reseed": reseed,
                    "divergence": [_divergence_dict(d) for d in report.divergence],
                    "split_brain": [_divergence_dict(d) for d in report.split_brain],
                    # what earlier failbacks kept on the same target stays there, apart (verify)
                    "kept_earlier": [] if reseed else _kept_ranges(previous),
                    "seeds": [_seed_dict(s) for s in report.seeds],
                },
            )
            record_operation(
                rc,
                "failback",
                whoami(),
                summary=f"started by the failback of {flow.name}" + (" (reseed)" if reseed else ""),
                figures={
                    "partitions": len(report.seeds),
                    "to copy": report.to_copy,
                    "divergence": report.diverged,
                    "split brain": sum(d.records for d in report.split_brain),
                },
            )
        finally:
            lease.release()
    report.done = True
    return report


def _is_identity(flow: FlowConfig) -> bool:
    return FlowFilters.for_flow(flow).remote_topic("t") == "t"


def _offsets(record: dict[str, Any], name: str) -> dict[Key, int]:
    """A failover record's "topic:partition" -> offset mapping, keyed by (topic, partition)."""
    out: dict[Key, int] = {}
    for k, v in dict(record.get(name) or {}).items():
        topic, _, part = str(k).rpartition(":")
        out[(topic, int(part))] = int(v)
    return out


def _divergence(fc: FlowClients, record: dict[str, Any], failover_at: int) -> tuple[list[Divergence], list[Divergence]]:
    """Per source partition of the failover record: [replicated, end now) minus the covered ledger,
    split by record timestamp at the failover's time into the divergence and the split brain."""
    replicated = _offsets(record, "replicated_to")
    keys = sorted(replicated)
    if not keys:
        return [], []
    try:
        ends = source_offsets(fc, keys, OffsetSpec.latest())
    except MirrorflowError as exc:
        raise MirrorflowError(
            f"failback of {fc.flow.name} needs cluster {fc.flow.source!r} back (the divergence is read there): {exc}"
        ) from None
    progress = StateStore(fc).progress(keys)
    reader = fc.reader("source")
    diverged, split = [], []
    try:
        for t, p in keys:
            prog = progress.get((t, p))
            start, end = max(replicated[(t, p)], 0), ends[(t, p)]
            ranges = subtract_ranges(start, end, list(prog.covered) if prog else []) if end > start else []
            # each range is cut where the category changes: [first record of a category, next change)
            parts: dict[bool, list[tuple[int, int]]] = {False: [], True: []}
            counts = {False: 0, True: 0}
            for a, b in ranges:
                cur, lo = None, a
                for m in reader.read(t, {p: a}, timeout=120, stops={p: b}):
                    after = m.timestamp()[1] >= failover_at
                    if cur is not None and after != cur:
                        parts[cur].append((lo, m.offset()))
                        lo = m.offset()
                    cur = after
                    counts[after] += 1
                parts[bool(cur)].append((lo, b))  # no record at all: markers only, a divergence of 0
            if ranges:
                diverged.append(Divergence(t, p, tuple(merge_ranges(parts[False])), counts[False]))
            if counts[True]:
                split.append(Divergence(t, p, tuple(merge_ranges(parts[True])), counts[True]))
    finally:
        fc.release(reader.consumer)
    return [d for d in diverged if d.ranges], split


def _plan_seeds(
    fc: FlowClients, rc: FlowClients, record: dict[str, Any], identity: bool
) -> tuple[list[Seed], dict[Key, Inverse]]:
    """Per partition of the reverse flow's source topics (the failed-over flow's topics, on its
    target): the ledger of offsets it must never copy (what the failed-over flow wrote there, the
    records the last failback kept out, stretches without a committed record between them), the
    records it copies, and (identity) the inverse of the forward map over what the forward flow wrote."""
    topics = sorted({t for t, _ in _offsets(record, "replicated_to")})  # default policy: Y's own topics
    keys = [(t, p) for t in topics for p in range(rc.partitions("source", t, refresh=True))]
    if not keys:
        return [], {}
    fwd = StateStore(fc).offset_map(keys) if identity else {}  # identity: target topic == source topic
    old = StateStore(rc).progress(keys)
    kept = _kept_out(fc)  # what the failback that started the forward flow kept out of it
    starts = source_offsets(rc, keys, OffsetSpec.earliest())
    stable = source_offsets(rc, keys, OffsetSpec.latest())  # read_committed: an open transaction stays out
    rev_ends = (
        list_offsets(rc.admin("target"), rc.connection("target"), keys, OffsetSpec.latest(), committed=False)
        if identity
        else {}
    )
    reader = rc.reader("source")
    seeds: list[Seed] = []
    inverse: dict[Key, Inverse] = {}
    try:
        for k in keys:
            prev = old.get(k)
            base = prev.next if prev is not None and prev.next >= 0 else starts[k]
            pm = fwd.get(k)
            runs = [r for r in (pm.runs if pm is not None else []) if r.tgt + r.count > base]
            owned = [(max(r.tgt, base), r.tgt + r.count) for r in runs]
            pruned = -1
            if pm is not None and pm.first is not None and pm.floor > pm.first:
                # the map forgot where the records below its floor landed: they lie below its first run
                pruned = min((r.tgt for r in pm.runs), default=int(pm.tgt_end or base))
                owned.append((base, pruned))
            done = merge_ranges([*owned, *kept.get(k, ())])
            todo, empty, count = [], [], 0
            for a, b in subtract_ranges(base, max(stable[k], base), done):
                first, n = -1, 0
                for m in reader.read(k[0], {k[1]: a}, timeout=120, stops={k[1]: b}):
                    first = m.offset() if first < 0 else first
                    n += 1
                if n:  # copied by the reverse flow (from its first record: the stretch before is empty)
                    empty.append((a, first))
                    todo.append((first, b))
                    count += n
                else:
                    empty.append((a, b))
            ledger = merge_ranges([*done, *empty])
            nxt = next((b for a, b in ledger if a <= base < b), base)
            inv = []
            for r in runs:
                lo = max(r.tgt, base)
                inv.append(Run(lo, r.src + (lo - r.tgt), r.tgt + r.count - lo))
            inverse[k] = (sorted(inv, key=lambda r: r.src), merge_ranges([*owned, *empty]))
            seeds.append(
                Seed(
                    k[0],
                    k[1],
                    nxt,
                    base,
                    sum(r.count for r in inv),
                    rev_ends.get(k, -1),
                    count,
                    tuple(todo),
                    tuple(ledger),
                    pruned,
                )
            )
    finally:
        rc.release(reader.consumer)
    return seeds, inverse


def _plan_reseed(rc: FlowClients, record: dict[str, Any]) -> list[Seed]:
    """--reseed: per partition of the reverse flow's source topics, copy everything from the log
    start (offsets, not read). Refused when a reverse target topic holds anything: copying all of Y
    into a source that still has records would duplicate them (the plain failback is for that)."""
    rev = rc.flow
    filters = FlowFilters.for_flow(rev)
    topics = sorted({t for t, _ in _offsets(record, "replicated_to")})
    keys = [(t, p) for t in topics for p in range(rc.partitions("source", t, refresh=True))]
    if not keys:
        return []
    starts = source_offsets(rc, keys, OffsetSpec.earliest())
    stable = source_offsets(rc, keys, OffsetSpec.latest())
    remote = {t: filters.remote_topic(t) for t in topics}
    there = [(remote[t], p) for t, p in keys if rc.partitions("target", remote[t], refresh=True) > p]
    admin, conn = rc.admin("target"), rc.connection("target")
    lows = list_offsets(admin, conn, there, OffsetSpec.earliest(), committed=False)
    highs = list_offsets(admin, conn, there, OffsetSpec.latest(), committed=False)
    full = [f"{t}[{p}] ({highs[(t, p)] - lows[(t, p)]:,} offsets)" for t, p in there if highs[(t, p)] > lows[(t, p)]]
    if full:
        raise StateError(
            f"failback --reseed of {rev.name} copies all of {rev.source}'s topics into {rev.target}, but "
            f"{rev.target} still holds records in " + ", ".join(full[:10]) + ": they would be duplicated; "
            f"use the failback without --reseed (it copies only what {rev.source} got outside the flow), or "
            f"empty those topics first"
        )
    return [
        Seed(
            t,
            p,
            starts[(t, p)],
            starts[(t, p)],
            0,
            highs.get((remote[t], p), 0),
            stable[(t, p)] - starts[(t, p)],
            ((starts[(t, p)], stable[(t, p)]),),
        )
        for t, p in keys
    ]


def _write_reseed(fc: FlowClients, rc: FlowClients, seeds: list[Seed], fwd_keys: list[Key]) -> None:
    """--reseed: the reverse flow starts each partition at its log start in a new map epoch (as
    `mirrorflow reseed` does); the failed-over flow's state described the old source, so each of
    its partitions gets a new epoch without progress: a failback back then starts it from the
    rebuilt source's log start with what the reverse flow wrote there as its ledger."""
    now = int(time.time() * 1000)
    for clients, keys, starts in (
        (rc, [(s.topic, s.partition) for s in seeds], {(s.topic, s.partition): (s.start, s.target_end) for s in seeds}),
        (fc, fwd_keys, {}),
    ):
        flow = clients.flow
        old = StateStore(clients).progress(keys)
        writer = StateWriter(
            flow,
            clients.partitions("target", progress_topic(flow)),
            clients.partitions("target", offset_map_topic(flow)),
        )
        lease = FlowLease(clients, *local_owner("mirrorflow failback")).acquire() if clients is fc else None
        try:
            for t, p in keys:
                prev = old.get((t, p))
                epoch = prev.epoch + 1 if prev is not None else 1
                start, tgt_end = starts.get((t, p), (-1, -1))
                prog = Progress(t, p, start, (), tgt_end, updated=now, epoch=epoch)
                marker = MapEntry(t, p, max(start, 0), max(start, 0), (), max(tgt_end, 0), 0, epoch)
                write_partition_state(clients, writer, prog, marker)
        finally:
            if lease is not None:
                lease.release()


def _kept_out(fc: FlowClients) -> dict[Key, list[tuple[int, int]]]:
    """The divergence and split-brain ranges of the failback that started `fc`'s flow (on its
    source, kept there): the reverse flow of a failback back must not copy them either."""
    rec = read_control(fc, "failback") or {}
    out: dict[Key, list[tuple[int, int]]] = {}
    for d in [*rec.get("divergence", []), *rec.get("split_brain", [])]:
        out.setdefault((str(d["topic"]), int(d["partition"])), []).extend((int(a), int(b)) for a, b in d["ranges"])
    return out


def _kept_ranges(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every range a failback record says is kept on its reverse flow's target: its divergence and
    split brain and the earlier failbacks' (`kept_earlier`), per partition. A later failback's record
    carries them on (the latest record is the only one read), so `verify` of the reverse flow counts
    the records every failback kept as kept, not as `extra`, round trip after round trip."""
    out: dict[Key, list[tuple[int, int]]] = {}
    rec = record or {}
    for d in [*rec.get("kept_earlier", []), *rec.get("divergence", []), *rec.get("split_brain", [])]:
        out.setdefault((str(d["topic"]), int(d["partition"])), []).extend((int(a), int(b)) for a, b in d["ranges"])
    return [
        {"topic": t, "partition": p, "ranges": [list(r) for r in merge_ranges(ranges)]}
        for (t, p), ranges in sorted(out.items())
    ]


def _write_seeds(rc: FlowClients, seeds: list[Seed], inverse: dict[Key, Inverse]) -> None:
    """Per partition, the reverse flow's progress (its ledger) and (identity) offset-map entries
    with the inverse runs, in one transaction (write_partition_state); a failback re-run writes the
    same again. The map entries cover what the forward flow wrote and the empty stretches between,
    never a range still to copy nor one kept out (verify reports those as not copied)."""
    rev = rc.flow
    old = StateStore(rc).progress([(s.topic, s.partition) for s in seeds])
    writer = StateWriter(
        rev, rc.partitions("target", progress_topic(rev)), rc.partitions("target", offset_map_topic(rev))
    )
    now = int(time.time() * 1000)
    for s in seeds:
        prev = old.get((s.topic, s.partition))
        epoch = prev.epoch if prev is not None else 0
        runs, ranges = inverse.get((s.topic, s.partition), ([], []))
        entries = []
        for a, b in ranges if runs else ():
            inside = [r for r in runs if a <= r.src < b]
            for i in range(0, max(len(inside), 1), RUNS_PER_ENTRY):
                chunk = tuple(inside[i : i + RUNS_PER_ENTRY])
                lo = a if i == 0 else chunk[0].src
                hi = inside[i + RUNS_PER_ENTRY].src if i + RUNS_PER_ENTRY < len(inside) else b
                entries.append(MapEntry(s.topic, s.partition, lo, hi, chunk, s.target_end, epoch=epoch))
        if prev is None or prev.next < 0:
            prog = Progress(s.topic, s.partition, s.start, s.covered, s.target_end, updated=now, epoch=epoch)
        else:
            prog = replace(
                prev,
                next=max(prev.next, s.start),
                covered=tuple(merge_ranges([*prev.covered, *s.covered])),
                tgt_end=max(prev.tgt_end, s.target_end),
                updated=now,
            )
        write_partition_state(rc, writer, prog, entries)


def _divergence_dict(d: Divergence) -> dict[str, Any]:
    return {**asdict(d), "ranges": [list(r) for r in d.ranges]}


def _divergence_from(d: dict[str, Any]) -> Divergence:
    return Divergence(
        str(d["topic"]), int(d["partition"]), tuple((int(a), int(b)) for a, b in d["ranges"]), int(d["records"])
    )


def _seed_dict(s: Seed) -> dict[str, Any]:
    return {**asdict(s), **{k: [list(r) for r in getattr(s, k)] for k in ("to_copy_ranges", "covered")}}


def _seed_from(d: dict[str, Any]) -> Seed:
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


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def resume_problem(cfg: Config, flow: FlowConfig, force: bool = False) -> str | None:
    """Why `mirrorflow flow resume` must not start `flow` (None: it may). With the identity policy
    both ways, the pair must never run at once, and a flow whose reverse flow was failed over since
    it last ran restarts through `mirrorflow failback` of that flow (which starts it at the ends
    recorded by that failover), never by a plain resume that would copy the reverse flow's records
    back. Any flow failed over and not restarted since goes on through a failback too: a resume would
    copy to the target what the source accepted after the failover (the split brain a failback keeps
    apart); `force` allows it (the applications never moved)."""
    rev = next((f for f in cfg.flows.values() if f.source == flow.target and f.target == flow.source), None)
    with FlowClients(cfg, flow) as fc:
        own = read_controls(fc, ["failover", "failback"])
    rev_failover = None
    if rev is not None:
        with FlowClients(cfg, rev) as rc:
            rev_state, rev_failover = flow_state(rc), read_control(rc, "failover")
        if _is_identity(flow) and _is_identity(rev):
            if rev_state.state != "stopped":
                return (
                    f"the reverse flow {rev.name} is {rev_state.describe()}: with IdentityReplicationPolicy both "
                    f"running would copy records back and forth (stop it first, or fail over with "
                    f"`mirrorflow failover --flow {rev.name}`)"
                )
            started = own.get("failback")
            if rev_failover is not None and (
                started is None or int(started.get("failover_at", -1)) != int(rev_failover.get("at", 0))
            ):
                return (
                    f"{rev.name} was failed over at {_iso(int(rev_failover.get('at', 0)))} and {flow.name} was not "
                    f"restarted since: run `mirrorflow failback --flow {rev.name}` (it starts {flow.name} at the ends "
                    f"that failover recorded; a plain resume would copy {rev.name}'s records back)"
                )
    failed_over, restarted = own.get("failover"), own.get("failback")
    if (
        force
        or failed_over is None
        or (restarted is not None and int(restarted.get("at", 0)) >= int(failed_over.get("at", 0)))
    ):
        return None
    at = int(failed_over.get("at", 0))
    if rev is not None and rev_failover is not None and int(rev_failover.get("at", 0)) > at:
        step = (
            f"the failback of {rev.name}, failed over since (`mirrorflow failback --flow {rev.name}`: it starts "
            f"{flow.name} at the ends that failover recorded)"
        )
    else:
        step = (
            f"the failback (`mirrorflow failback --flow {flow.name}`, DAG mirrorflow_failback__{flow.id}), which "
            f"copies what was written on {flow.target!r} back"
        )
    return (
        f"it was failed over to {flow.target!r} at {_iso(at)}: its next step is {step}; a resume would copy to "
        f"{flow.target!r} what {flow.source!r} accepted since the failover. If the applications never moved, "
        "resume with --force (the control DAG's Param force)"
    )
