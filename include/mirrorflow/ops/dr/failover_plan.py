"""A failover's plan (`FailoverPlan`): per partition what was replicated and the RPO, per group the
exact target offsets the commit writes and the groups it leaves alone, with an id derived from its
content, so that what is approved is what is committed; and what moved between a plan and the same
state read again at the commit (`plan_moves`). Pure: the preflight reads it from the target."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.errors import StateError
from mirrorflow.groups.offset_sync import GroupSyncPlan, PartitionSync


class PlanMovedError(StateError):
    """What a failover plan was built from moved before its commit: nothing was committed."""


@dataclass(frozen=True)
class PartitionRPO:
    topic: str
    partition: int
    target_topic: str
    replicated_to: int  # the next source offset not replicated
    target_end: int  # the remote partition's end on the target
    source_end: int | None = None  # None: the source did not answer
    last_replicated_ms: int = -1  # source timestamp of the last replicated record

    @property
    def not_replicated(self) -> int | None:
        return None if self.source_end is None else max(0, self.source_end - self.replicated_to)

    def seconds_behind(self, now_ms: int) -> float | None:
        """How old the newest replicated record is when the source has more (0: caught up)."""
        if self.not_replicated == 0:
            return 0.0
        if self.last_replicated_ms <= 0:
            return None
        return max(0.0, (now_ms - self.last_replicated_ms) / 1000)


@dataclass(frozen=True)
class FailoverPlan:
    """What a failover will commit and what that depends on. Kept in XCom between the DAG's preflight
    and commit: about 40 bytes per (group, partition) and per replicated partition."""

    flow: str
    target: str
    mode: str
    groups_regex: str | None
    partitions: tuple[PartitionRPO, ...]
    groups: tuple[GroupSyncPlan, ...]  # per group: commit (the `write` partitions), up to date, left alone
    at_ms: int = 0
    verify_ok: bool | None = None  # planned mode: the preflight's verify (None: not verified)
    errors: Mapping[str, str] = field(default_factory=dict)  # groups that could not be read on the target
    moves_after: str | None = None  # moves groups after this failover (its plan id); None: the failover
    take_over: bool = False  # the commit takes the flow over (its lease, fencing its copies): the operator confirmed
    # "topic:partition" -> the source's end when the plan was made, for every source partition the flow's
    # filter matched then ({}: the source did not answer). Not part of the id (it moves while the source is
    # written); the failback splits the records the source holds beyond what was replicated by it:
    # below it the divergence, from it on (and in partitions born later) the split brain
    source_ends: Mapping[str, int] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """Derived from what the plan commits and depends on (not from when it was made or from the
        source's moving ends): the same state gives the same id."""
        content = {
            "flow": self.flow,
            "target": self.target,
            "mode": self.mode,
            "groups_regex": self.groups_regex,
            "replicated_to": [[p.topic, p.partition, p.replicated_to] for p in self.partitions],
            "groups": [_group_row(g) for g in self.groups],
            "verify_ok": self.verify_ok,
            "errors": sorted(self.errors.items()),
        }
        if self.moves_after is not None:
            content["moves_after"] = self.moves_after
        if self.take_over:
            content["take_over"] = True
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def blocked(self) -> str | None:
        """Why this plan must not be committed (None: it may)."""
        if self.errors:
            return "the groups " + "; ".join(f"{g}: {e}" for g, e in sorted(self.errors.items()))
        if self.mode == "planned" and self.verify_ok is False:
            return "verify found partitions on the target that do not match the source (see verify above)"
        return None

    def commits(self) -> dict[str, dict[str, int]]:
        """group -> {"topic:partition": target offset} that the commit writes."""
        return {
            g.group: {f"{x.topic}:{x.partition}": x.checkpoint_offset for x in g.writes}
            for g in self.groups
            if g.writes
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "flow": self.flow,
            "target": self.target,
            "mode": self.mode,
            "groups_regex": self.groups_regex,
            "at_ms": self.at_ms,
            "verify_ok": self.verify_ok,
            "errors": dict(self.errors),
            "moves_after": self.moves_after,
            "take_over": self.take_over,
            "source_ends": dict(self.source_ends),
            "partitions": [asdict(p) for p in self.partitions],
            "groups": [_group_row(g) for g in self.groups],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FailoverPlan:
        """The plan `to_dict` wrote; StateError when it is not one or its id does not match its content."""
        try:
            plan = cls(
                str(d["flow"]),
                str(d["target"]),
                str(d["mode"]),
                d.get("groups_regex"),
                tuple(PartitionRPO(**p) for p in d["partitions"]),
                tuple(
                    GroupSyncPlan(g[0], g[1], int(g[2]), g[3], tuple(PartitionSync(*x) for x in g[5]), g[4])
                    for g in d["groups"]
                ),
                int(d.get("at_ms", 0)),
                d.get("verify_ok"),
                dict(d.get("errors") or {}),
                d.get("moves_after"),
                bool(d.get("take_over", False)),
                {str(k): int(v) for k, v in dict(d.get("source_ends") or {}).items()},
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise StateError(f"not a failover plan ({exc.__class__.__name__}: {exc})") from None
        if d.get("id") not in (None, plan.id):
            raise StateError(f"failover plan {d.get('id')}: its content does not match its id (now {plan.id})")
        return plan


def _group_row(g: GroupSyncPlan) -> list[Any]:
    """A group of a plan, compact: [group, state, members, action, reason, [[topic, partition,
    checkpoint offset, target offset, action, metadata, reread], ...]]."""
    return [
        g.group,
        g.state,
        g.members,
        g.action,
        g.reason,
        [
            [x.topic, x.partition, x.checkpoint_offset, x.target_offset, x.action, x.metadata, x.reread]
            for x in g.partitions
        ],
    ]


def plan_moves(plan: FailoverPlan, now: FailoverPlan) -> list[str]:
    """What moved between `plan` and `now` (the same state read again) that the plan depends on:
    progress (except heartbeat topics, which move while the flow runs and no group resumes on), the
    groups chosen, their checkpoints, whether they are left alone, and their committed offsets on the
    target (one the group sync has since moved to exactly the planned offset has not moved)."""
    out: list[str] = []
    was = {(p.topic, p.partition): p.replicated_to for p in plan.partitions if not _heartbeats(p.topic)}
    is_ = {(p.topic, p.partition): p.replicated_to for p in now.partitions if not _heartbeats(p.topic)}
    for k in sorted(was.keys() | is_.keys()):
        if was.get(k) != is_.get(k):
            out.append(f"{k[0]}[{k[1]}] replicated up to {_n(was.get(k))} in the plan, now {_n(is_.get(k))}")
    before = {g.group: g for g in plan.groups}
    after = {g.group: g for g in now.groups}
    for name in sorted(before.keys() | after.keys()):
        b, a = before.get(name), after.get(name)
        if b is None:
            out.append(f"group {name}: has checkpoints now, not in the plan")
        elif a is None:
            out.append(f"group {name}: " + (now.errors.get(name) or "no longer has checkpoints"))
        elif (b.action == "left-alone") != (a.action == "left-alone"):
            out.append(
                f"group {name}: "
                + (
                    f"now has {a.members} active member(s) on the target"
                    if a.action == "left-alone"
                    else f"left alone in the plan ({b.reason}), not any more"
                )
            )
        elif b.action != "left-alone":
            out += _partition_moves(b, a)
    return out


def _partition_moves(b: GroupSyncPlan, a: GroupSyncPlan) -> list[str]:
    out = []
    was = {(x.topic, x.partition): x for x in b.partitions}
    is_ = {(x.topic, x.partition): x for x in a.partitions}
    for k in sorted(was.keys() | is_.keys()):
        x, y = was.get(k), is_.get(k)
        where = f"group {b.group} {k[0]}[{k[1]}]"
        if x is None or y is None:
            out.append(f"{where}: {'a new checkpoint' if x is None else 'its checkpoint is gone'}")
        elif x.checkpoint_offset != y.checkpoint_offset:
            out.append(f"{where}: checkpoint moved from {x.checkpoint_offset} to {y.checkpoint_offset}")
        elif x.target_offset != y.target_offset and not (
            x.action == "write" and y.target_offset == x.checkpoint_offset
        ):
            out.append(
                f"{where}: committed offset on the target moved from {_n(x.target_offset)} to {_n(y.target_offset)}"
            )
    return out


def _n(v: int | None) -> str:
    return "none" if v is None else str(v)


def _heartbeats(topic: str) -> bool:
    return topic == "heartbeats" or topic.endswith(".heartbeats")
