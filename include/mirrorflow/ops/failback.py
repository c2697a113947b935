"""Failback of a failed-over flow X->Y: start its reverse flow Y->X from the failover record (issue 9.3).

What producers wrote on Y after the failover must reach X exactly once, and nothing X already had
may be copied back to it:

* **IdentityReplicationPolicy** (topics keep their names both ways): Y's topic T holds X's records
  (copied by X->Y up to the target ends recorded at failover) and then the new ones. The reverse
  flow's progress is written to start at those target ends, in the normal progress format, so
  `replicate` of Y->X continues from there. Its offset map gets the inverse of X->Y's map over what
  X->Y wrote (Y offset -> the original X offset), so Y->X's checkpoints translate a group on Y
  exactly, also one still reading records that came from X, and `verify` of Y->X checks them.
* **DefaultReplicationPolicy**: Y's topic `X.T` is never copied back (MM2's cycle rule); what
  producers write to Y's own topics reaches X as `Y.T`, as MM2 names it. Nothing to seed.

Divergence: the records X had that had not reached Y when X was lost -- per partition, X->Y's
progress (next, covered) up to X's end now -- ranges and counts. Nothing on X is deleted; the
reverse flow copies after them.

Going back (the symmetric step): `mirrorflow failover --flow Y->X --mode planned` moves the groups
to X and stops Y->X; `mirrorflow failback --flow Y->X` then restarts X->Y at X's ends recorded by
that failover (the same rule, the other way), so X->Y never copies Y->X's records back to Y; the
records below X->Y's old progress and at or above it up to those ends that came from Y are mapped
back by the inverse of Y->X's map.

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
from mirrorflow.kafka.topics import list_offsets
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.replication.planner import source_offsets
from mirrorflow.replication.reseed import write_partition_state
from mirrorflow.state.flow_state import flow_state, read_control, set_flow_state, write_control
from mirrorflow.state.lease import FlowLease, local_owner, whoami
from mirrorflow.state.offset_map import MapEntry, Run, merge_ranges, subtract_ranges
from mirrorflow.state.records import Progress
from mirrorflow.state.store import StateStore
from mirrorflow.state.topics import (
    ensure_state_topics,
    offset_map_topic,
    progress_topic,
)
from mirrorflow.state.writer import StateWriter

Key = tuple[str, int]
RUNS_PER_ENTRY = 5_000  # inverse runs per seeded offset-map entry (records stay small)


@dataclass(frozen=True)
class Divergence:
    """Records on the failed-over flow's source that had not reached its target."""

    topic: str
    partition: int
    ranges: tuple[tuple[int, int], ...]  # [from, to) source offsets
    records: int  # records in them (read_committed; markers and aborted records do not count)


@dataclass(frozen=True)
class Seed:
    """Where the reverse flow starts in one partition (identity policy)."""

    topic: str  # the reverse flow's SOURCE topic (the failed-over flow's target topic)
    partition: int
    start: int  # the target end recorded at failover: the reverse flow copies from here
    owned_from: int  # reverse-source offsets [owned_from, start) were written by the failed-over flow
    mapped: int  # records mapped back by the inverse offset map
    target_end: int  # the reverse target's end when the failback started (its new records go after)


@dataclass
class FailbackReport:
    flow: str  # the failed-over flow X->Y
    reverse: str  # Y->X, started by the failback
    identity: bool
    dry_run: bool
    failover_at: int = 0
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    divergence: list[Divergence] = field(default_factory=list)
    seeds: list[Seed] = field(default_factory=list)
    done: bool = False
    note: str | None = None

    @property
    def diverged(self) -> int:
        return sum(d.records for d in self.divergence)

    def lines(self) -> list[str]:
        head = f"failback of flow {self.flow}: reverse flow {self.reverse}" + (" (dry run)" if self.dry_run else "")
        status = "STARTED" if self.done else (self.note or "preflight")
        out = [f"{head}: {status}"]
        if self.failover_at:
            out.append(f"  failed over at {_iso(self.failover_at)}")
        how = (
            "IdentityReplicationPolicy: the reverse flow starts at the target ends recorded at failover"
            if self.identity
            else "the reverse flow copies the target's own topics under MM2's remote names (no seeding)"
        )
        out.append(f"  {how}")
        for s in self.seeds:
            out.append(
                f"  {self.reverse} {s.topic}[{s.partition}]: copies from offset {s.start}; offsets "
                f"{s.owned_from}..{s.start} came from {self.flow} ({s.mapped:,} records mapped back)"
            )
        out.append(
            f"  divergence: {self.diverged:,} records on the source of {self.flow} never reached its target"
            + (" (kept, not deleted; not copied)" if self.diverged else "")
        )
        for d in self.divergence:
            ranges = ", ".join(f"{a}..{b}" for a, b in d.ranges)
            out.append(f"    {d.topic}[{d.partition}]: {d.records:,} records at offsets {ranges}")
        return out

    def render(self) -> str:
        return "\n".join(self.lines())

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
            "diverged": self.diverged,
            "divergence": [{**asdict(d), "ranges": [list(r) for r in d.ranges]} for d in self.divergence],
            "seeds": [asdict(s) for s in self.seeds],
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
) -> FailbackReport:
    """Preflight (divergence, seeds), confirm, start the reverse flow (module docstring). Raises a
    MirrorflowError for bad input (no failover yet, flow not stopped, source unreachable)."""
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
    report = FailbackReport(flow.name, rev.name, identity, dry_run)
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
            report.seeds = [Seed(**s) for s in previous.get("seeds", [])]
            return report
        state = flow_state(fc)
        if state.state != "stopped":
            raise StateError(
                f"flow {flow.name} is {state.describe()}: a failback starts {rev.name}, and both running "
                f"would copy records back and forth; stop it first (`mirrorflow flow stop --flow {flow.name}`)"
            )
        report.divergence = _divergence(fc, record)
        inverse: dict[Key, list[Run]] = {}
        if identity:
            report.seeds, inverse = _plan_seeds(fc, rc, record)
        if dry_run:
            report.note = "dry run: nothing changed"
            return report
        if not confirm(report):
            report.note = "not confirmed: nothing changed"
            return report
        ensure_state_topics(rc)  # the reverse flow may never have run
        lease = FlowLease(rc, *local_owner("mirrorflow failback")).acquire()
        try:
            if identity:
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
                    "divergence": [asdict(d) for d in report.divergence],
                    "seeds": [asdict(s) for s in report.seeds],
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


def _divergence(fc: FlowClients, record: dict[str, Any]) -> list[Divergence]:
    """Per source partition of the failover record: [replicated, end now) minus the covered ledger."""
    replicated = _offsets(record, "replicated_to")
    keys = sorted(replicated)
    if not keys:
        return []
    try:
        ends = source_offsets(fc, keys, OffsetSpec.latest())
    except MirrorflowError as exc:
        raise MirrorflowError(
            f"failback of {fc.flow.name} needs cluster {fc.flow.source!r} back (the divergence is read there): {exc}"
        ) from None
    progress = StateStore(fc).progress(keys)
    reader = fc.reader("source")
    out = []
    try:
        for t, p in keys:
            prog = progress.get((t, p))
            start, end = max(replicated[(t, p)], 0), ends[(t, p)]
            ranges = tuple(subtract_ranges(start, end, list(prog.covered) if prog else [])) if end > start else ()
            count = sum(sum(1 for _ in reader.read(t, {p: a}, timeout=120, stops={p: b})) for a, b in ranges)
            if ranges:
                out.append(Divergence(t, p, ranges, count))
    finally:
        fc.release(reader.consumer)
    return out


def _plan_seeds(fc: FlowClients, rc: FlowClients, record: dict[str, Any]) -> tuple[list[Seed], dict[Key, list[Run]]]:
    """Identity policy: per partition, where the reverse flow starts (the failover's target end) and
    the inverse of the forward map over what the forward flow wrote there ([owned_from, start))."""
    ends = {k: v for k, v in _offsets(record, "target_ends").items() if v >= 0}
    owned = _owned_from(fc)
    fwd = StateStore(fc).offset_map(sorted(ends))  # identity: the target topic is the source topic
    keys = sorted(ends)
    rev_ends = list_offsets(rc.admin("target"), rc.connection("target"), keys, OffsetSpec.latest(), committed=False)
    seeds, inverse = [], {}
    for k in keys:
        start, pm = ends[k], fwd.get(k)
        runs = list(pm.runs) if pm is not None else []
        owned_from = min(owned.get(k, min((r.tgt for r in runs), default=start)), start)
        inv = [
            Run(lo, r.src + (lo - r.tgt), hi - lo)
            for r in runs
            if (hi := min(r.tgt + r.count, start)) > (lo := max(r.tgt, owned_from))
        ]
        inverse[k] = sorted(inv, key=lambda r: r.src)
        seeds.append(Seed(k[0], k[1], start, owned_from, sum(r.count for r in inv), rev_ends.get(k, 0)))
    return seeds, inverse


def _owned_from(fc: FlowClients) -> dict[Key, int]:
    """Per target partition, where the flow's own writes start when a failback seeded it (below that
    its target had records of its own: the seeds' `target_end`). Empty for a flow never seeded."""
    rec = read_control(fc, "failback") or {}
    return {(str(s["topic"]), int(s["partition"])): int(s["target_end"]) for s in rec.get("seeds", [])}


def _write_seeds(rc: FlowClients, seeds: list[Seed], inverse: dict[Key, list[Run]]) -> None:
    """Per partition, the reverse flow's offset-map entries (inverse runs) and its progress in one
    transaction (write_partition_state); a failback re-run writes the same again."""
    rev = rc.flow
    old = StateStore(rc).progress([(s.topic, s.partition) for s in seeds])
    writer = StateWriter(
        rev, rc.partitions("target", progress_topic(rev)), rc.partitions("target", offset_map_topic(rev))
    )
    now = int(time.time() * 1000)
    for s in seeds:
        runs = inverse.get((s.topic, s.partition), [])
        entries = []
        for i in range(0, len(runs), RUNS_PER_ENTRY):
            chunk = tuple(runs[i : i + RUNS_PER_ENTRY])
            lo = s.owned_from if i == 0 else chunk[0].src
            hi = runs[i + RUNS_PER_ENTRY].src if i + RUNS_PER_ENTRY < len(runs) else s.start
            entries.append(MapEntry(s.topic, s.partition, lo, hi, chunk, s.target_end))
        prev = old.get((s.topic, s.partition))
        covered = ((s.owned_from, s.start),) if s.start > s.owned_from else ()
        if prev is None or prev.next < 0:
            prog = Progress(s.topic, s.partition, s.start, covered, s.target_end, updated=now)
        else:
            prog = replace(
                prev,
                next=max(prev.next, s.start),
                covered=tuple(merge_ranges([*prev.covered, *covered])),
                tgt_end=max(prev.tgt_end, s.target_end),
                updated=now,
            )
        write_partition_state(rc, writer, prog, entries)


def _divergence_from(d: dict[str, Any]) -> Divergence:
    return Divergence(
        str(d["topic"]), int(d["partition"]), tuple((int(a), int(b)) for a, b in d["ranges"]), int(d["records"])
    )


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def resume_problem(cfg: Config, flow: FlowConfig) -> str | None:
    """Why `mirrorflow flow resume` must not start `flow` (None: it may). With the identity policy
    both ways, the pair must never run at once, and a flow whose reverse flow was failed over since
    it last ran restarts through `mirrorflow failback` of that flow (which starts it at the ends
    recorded by that failover), never by a plain resume that would copy the reverse flow's records back."""
    rev = next((f for f in cfg.flows.values() if f.source == flow.target and f.target == flow.source), None)
    if rev is None or not (_is_identity(flow) and _is_identity(rev)):
        return None
    with FlowClients(cfg, rev) as rc:
        state = flow_state(rc)
        rev_failover = read_control(rc, "failover")
    if state.state != "stopped":
        return (
            f"the reverse flow {rev.name} is {state.describe()}: with IdentityReplicationPolicy both running "
            f"would copy records back and forth (stop it first, or fail over with "
            f"`mirrorflow failover --flow {rev.name}`)"
        )
    if rev_failover is None:
        return None
    with FlowClients(cfg, flow) as fc:
        started = read_control(fc, "failback")
    if started is None or int(started.get("failover_at", -1)) != int(rev_failover.get("at", 0)):
        return (
            f"{rev.name} was failed over at {_iso(int(rev_failover.get('at', 0)))} and {flow.name} was not restarted "
            f"since: run `mirrorflow failback --flow {rev.name}` (it starts {flow.name} at the ends that failover "
            f"recorded; a plain resume would copy {rev.name}'s records back)"
        )
    return None
