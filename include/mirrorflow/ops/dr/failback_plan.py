"""A failback's plan (`FailbackPlan`): what it found on both clusters and what it will write, with an
id derived from that content, so that what is approved is what is started; and what moved between a
plan and the same state read again when it is started (`plan_moves`). Pure: the preflight
(`failback_preflight`) reads it, the commit (`failback_commit`) reads it again and writes it.

Its parts: per partition of the failed-over flow's source, the records that never reached its target
(`Divergence`: the divergence and the split brain); per partition of the reverse flow's source, where
the reverse flow starts (`Seed`); and what the target no longer holds (`Loss`: removed by retention or
compaction before the failback, or a topic recreated or a partition truncated since the failed-over
flow wrote it), which the operator must accept before anything starts."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NamedTuple

from mirrorflow.errors import StateError
from mirrorflow.state.landmarks import Span
from mirrorflow.state.offset_map import Run

Ranges = tuple[tuple[int, int], ...]
Key = tuple[str, int]


class Inverse(NamedTuple):
    """The reverse flow's offset map of one partition as a failback seeds it (failback_seeds)."""

    runs: list[Run]  # the failed-over flow's runs, source and target swapped
    ranges: list[tuple[int, int]]  # what its map entries cover
    spans: tuple[Span, ...] = ()  # where the failed-over flow's map kept only spans (below its floor), swapped


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
    # not on the reverse flow's source yet, but its target partition holds records the failback keeps
    # apart there: the reverse flow copies the partition from its beginning, after them, once it exists
    # (reported; nothing written: state_drift.only_kept tells those records apart)
    absent: bool = False


LOSS_CAUSES = ("retention", "compaction", "recreated", "truncated", "deleted")


@dataclass(frozen=True)
class Loss:
    """What the failed-over flow's target no longer holds that the failback would have copied, or can
    no longer tell from what the failed-over flow wrote there. Counted and named; the failback starts
    only when the operator accepts them all (`accept_loss`)."""

    topic: str
    partition: int  # -1: the whole topic (deleted)
    cause: str  # one of LOSS_CAUSES
    ranges: Ranges  # offsets on the reverse flow's source [from, to) (empty: not known)
    offsets: int  # how many offsets (-1: cannot be told)
    detail: str  # what was found, and what the failback does with the partition once accepted
    acceptable: bool = True  # False: the failback cannot go on even when accepted (the detail says why)

    def line(self) -> str:
        where = f"{self.topic}[{self.partition}]" if self.partition >= 0 else f"{self.topic}"
        what = "" if self.offsets < 0 else f"{self.offsets:,} offsets "
        at = f"at {', '.join(f'{a}..{b}' for a, b in self.ranges)} " if self.ranges else ""
        return f"{where}: {what}{at}({self.cause}): {self.detail}"


@dataclass(frozen=True)
class FailbackPlan:
    """What a failback starts and what that depends on. Kept in XCom between the DAG's preflight and
    start: a few ranges per partition (the inverse offset map is not carried: the start computes it
    again and compares its digest)."""

    flow: str  # the failed-over flow X->Y
    reverse: str  # Y->X, started by the failback
    failover_at: int  # the failover record it follows (its `at`)
    failover_plan: str  # that failover's plan id ("" before plans had ids)
    identity: bool
    reseed: bool = False
    accept_loss: bool = False
    divergence: tuple[Divergence, ...] = ()
    split_brain: tuple[Divergence, ...] = ()
    seeds: tuple[Seed, ...] = ()
    losses: tuple[Loss, ...] = ()
    inverse: str = ""  # digest of the inverse offset-map runs the start writes
    read_to: Mapping[str, int] = field(default_factory=dict)  # "topic:partition" -> where the target was read to
    at_ms: int = 0
    split_by: str = "offsets"  # how the split brain was told from the divergence (offsets | timestamps)

    @property
    def id(self) -> str:
        """Derived from what the failback writes and depends on, not from when it was made nor from the
        ends that move while both clusters are written: records appended to the target after the plan's
        read are copied by the reverse flow anyway, records the source accepts after the failover are
        split brain either way (the start counts them again)."""
        content = {
            "flow": self.flow,
            "reverse": self.reverse,
            "failover_at": self.failover_at,
            "failover_plan": self.failover_plan,
            "identity": self.identity,
            "reseed": self.reseed,
            "accept_loss": self.accept_loss,
            "divergence": [_row(d) for d in self.divergence],
            "seeds": [{**_row(s), "target_end": None} for s in self.seeds],
            "losses": [_row(x) for x in self.losses],
            "inverse": self.inverse,
            "read_to": sorted(self.read_to.items()),
            "split_by": self.split_by,
        }
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def blocked(self) -> str | None:
        """Why this plan must not be started (None: it may)."""
        hard = [x for x in self.losses if not x.acceptable]
        if hard:
            return "; ".join(x.line() for x in hard[:10])
        if self.losses and not self.accept_loss:
            n = sum(max(x.offsets, 0) for x in self.losses)
            return (
                f"the target no longer holds what it would copy or cannot tell it from the failed-over flow's "
                f"records in {len(self.losses)} partition(s) ({n:,} offsets counted): see `lost on` below; accept "
                "it with --accept-loss (the DAG's Param accept_loss) to start the failback anyway"
            )
        return None

    @property
    def to_copy(self) -> int:
        return sum(s.to_copy for s in self.seeds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "flow": self.flow,
            "reverse": self.reverse,
            "failover_at": self.failover_at,
            "failover_plan": self.failover_plan,
            "identity": self.identity,
            "reseed": self.reseed,
            "accept_loss": self.accept_loss,
            "divergence": [_row(d) for d in self.divergence],
            "split_brain": [_row(d) for d in self.split_brain],
            "seeds": [_row(s) for s in self.seeds],
            "losses": [_row(x) for x in self.losses],
            "inverse": self.inverse,
            "read_to": dict(self.read_to),
            "at_ms": self.at_ms,
            "split_by": self.split_by,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FailbackPlan:
        """The plan `to_dict` wrote; StateError when it is not one or its id does not match its content."""
        try:
            plan = cls(
                str(d["flow"]),
                str(d["reverse"]),
                int(d["failover_at"]),
                str(d.get("failover_plan") or ""),
                bool(d["identity"]),
                bool(d.get("reseed", False)),
                bool(d.get("accept_loss", False)),
                tuple(divergence_from(x) for x in d.get("divergence", [])),
                tuple(divergence_from(x) for x in d.get("split_brain", [])),
                tuple(seed_from(x) for x in d.get("seeds", [])),
                tuple(loss_from(x) for x in d.get("losses", [])),
                str(d.get("inverse") or ""),
                {str(k): int(v) for k, v in dict(d.get("read_to") or {}).items()},
                int(d.get("at_ms", 0)),
                str(d.get("split_by") or "offsets"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"not a failback plan ({exc.__class__.__name__}: {exc})") from None
        if d.get("id") not in (None, plan.id):
            raise StateError(f"failback plan {d.get('id')}: its content does not match its id (now {plan.id})")
        return plan

    def with_accept_loss(self, accept: bool) -> FailbackPlan:
        return replace(self, accept_loss=accept)


def plan_moves(plan: FailbackPlan, now: FailbackPlan) -> list[str]:
    """What moved between `plan` and `now` (the same state read again, up to the same ends of the
    target) that the plan depends on: the failover it follows, the divergence, where the reverse flow
    starts in each partition and what it copies, what is lost, the inverse offset map."""
    out: list[str] = []
    if (plan.failover_at, plan.failover_plan) != (now.failover_at, now.failover_plan):
        out.append(f"the failover it follows is {now.failover_plan or now.failover_at} now")
    was, is_ = _by_key(plan.seeds), _by_key(now.seeds)
    for k in sorted(was.keys() | is_.keys()):
        a, b = was.get(k), is_.get(k)
        t = f"{k[0]}[{k[1]}]"
        if a is None:
            out.append(f"{t}: a new partition on {plan.reverse.split('->')[0]!r}")
        elif b is None:
            out.append(f"{t}: no longer on {plan.reverse.split('->')[0]!r}")
        elif (a.start, a.owned_from, a.covered) != (b.start, b.owned_from, b.covered):
            out.append(f"{t}: the reverse flow would start at {b.start} (ledger {_ranges(b.covered)}), not {a.start}")
        elif (a.to_copy, a.to_copy_ranges, a.mapped) != (b.to_copy, b.to_copy_ranges, b.mapped):
            out.append(f"{t}: {b.to_copy:,} records to copy at {_ranges(b.to_copy_ranges)}, not {a.to_copy:,}")
    for name, before, after in (("lost", plan.losses, now.losses), ("divergence", plan.divergence, now.divergence)):
        gone = sorted(set(map(_text, before)) - set(map(_text, after)))
        new = sorted(set(map(_text, after)) - set(map(_text, before)))
        out += [f"{name} now: {x}" for x in new] + [f"{name} no longer: {x}" for x in gone]
    if plan.inverse != now.inverse and not out:
        out.append("the failed-over flow's offset map changed")
    return out


def _by_key(seeds: tuple[Seed, ...]) -> dict[Key, Seed]:
    return {(s.topic, s.partition): s for s in seeds}


def _text(x: Loss | Divergence) -> str:
    return x.line() if isinstance(x, Loss) else f"{x.topic}[{x.partition}] {_ranges(x.ranges)} ({x.records})"


def _ranges(ranges: Ranges) -> str:
    return ", ".join(f"{a}..{b}" for a, b in ranges) or "-"


def _row(x: Divergence | Seed | Loss) -> dict[str, Any]:
    d = asdict(x)
    return {k: [list(r) for r in v] if k in ("ranges", "to_copy_ranges", "covered") else v for k, v in d.items()}


def divergence_dict(d: Divergence) -> dict[str, Any]:
    return _row(d)


def seed_dict(s: Seed) -> dict[str, Any]:
    return _row(s)


def loss_dict(x: Loss) -> dict[str, Any]:
    return _row(x)


def _pairs(v: Any) -> Ranges:
    return tuple((int(a), int(b)) for a, b in v or ())


def divergence_from(d: Mapping[str, Any]) -> Divergence:
    return Divergence(str(d["topic"]), int(d["partition"]), _pairs(d["ranges"]), int(d["records"]))


def seed_from(d: Mapping[str, Any]) -> Seed:
    """A stored seed (older records lack the later fields)."""
    return Seed(
        str(d["topic"]),
        int(d["partition"]),
        int(d["start"]),
        int(d["owned_from"]),
        int(d["mapped"]),
        int(d["target_end"]),
        int(d.get("to_copy", 0)),
        _pairs(d.get("to_copy_ranges")),
        _pairs(d.get("covered")),
        int(d.get("pruned_below", -1)),
        bool(d.get("absent", False)),
    )


def loss_from(d: Mapping[str, Any]) -> Loss:
    return Loss(
        str(d["topic"]),
        int(d["partition"]),
        str(d["cause"]),
        _pairs(d.get("ranges")),
        int(d.get("offsets", -1)),
        str(d.get("detail", "")),
        bool(d.get("acceptable", True)),
    )
