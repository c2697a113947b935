"""Failover of a flow A->B: move its consumer groups to B and stop the flow (the DR runbook's step).

* **unplanned** (A is lost): everything comes from the TARGET -- progress (what was replicated),
  the checkpoints (where each group resumes) and the offset map behind them. The source is asked
  for its ends only to tell the RPO, and only if it answers.
* **planned** (A is up; stopping A's producers is the operator's step): drain first -- sync the
  topics, replicate until the lag is 0 (or `max_drain_runs` runs), checkpoint once more, verify --
  so the groups resume exactly where they stopped on A. The verify checks what was copied since
  the last verify that passed (ops.verify, `since_last`) and records how far it got.

Two steps, so that what is approved is what is committed:

* `plan_failover`: the preflight. Its **plan** (`FailoverPlan`, serialisable, with an id derived
  from its content) says per partition what was replicated (and the RPO), per group the exact
  target offsets it will commit, and which groups it leaves alone and why.
* `commit_failover(plan)`: under the flow's lease, re-reads what the plan was built from (progress,
  checkpoints, the groups on the target); if any of it moved it commits nothing and says what moved
  (`PlanMovedError`: make a new plan). Otherwise it commits exactly the plan's offsets (never
  backwards, never a group with active members), sets the flow to `stopped` and writes the failover
  record (who approved, the plan id, per-partition target ends, per-group offsets) to the target.

`failover` composes them for the CLI (plan, confirm, commit); the DAG runs them as its preflight and
commit tasks with Airflow's approval step between. A second failover of a stopped, failed-over flow
is a no-op that says so, naming the groups still to move -- those left alone at the failover (active
members on B) or never chosen by its `--groups`. With `groups` it moves them: a plan
bound to the failover record (`moves_after`), committed the same way (never backwards, never a
group with active members), recorded as a `failover` line in the operations history; the failover
record itself keeps the original failover.

A planned drain that cannot reach lag 0 in its runs (producers still writing) stops, naming the
partitions and their lag, unless the operator accepted a stated total lag (`max_lag`).

**Take-over** (`take_over`, the CLI's `--take-over`, the DAG's Param `take_over`): a failover needs
the flow's lease, and the flow's state must belong to this config's deployment. When a run holds
the lease (a continuous run riding out the outage, a run of the old site's Airflow) or another
deployment owns the flow (a DR-site Airflow with its own deployment.id), the preflight stops and
names the flag -- unless the operator confirmed the take-over. Then the commit (a planned
failover: before its drain, which needs the flow) takes the lease whoever holds it
(state.lease.FlowLease.take_over: that owner is fenced for good and this deployment owns the flow
from then on), fences the copy transactions of every partition on the target
(state.fencing.fence_copies) so the run taken over can never commit again, records who took the
flow from whom in the operations history, and goes on. Needs exactly-once copies (idempotent
producers cannot be fenced).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, DeploymentConflictError, LeaseError, MirrorflowError, StateError
from mirrorflow.groups.checkpoint import CheckpointStore, emit_checkpoints
from mirrorflow.groups.offset_sync import (
    GroupSyncPlan,
    GroupSyncRun,
    PartitionSync,
    commit_group_plans,
    sync_group_offsets,
)
from mirrorflow.groups.render import resume_note
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.verify import VerifyReport, verify_flow
from mirrorflow.replication.planner import source_offsets
from mirrorflow.replication.runner import run_once
from mirrorflow.reporting import Report
from mirrorflow.state.fencing import fence_copies
from mirrorflow.state.flow_state import flow_state, read_control, set_flow_state, write_control
from mirrorflow.state.history import record_operation
from mirrorflow.state.lease import FlowLease, describe_deployment, local_owner, whoami
from mirrorflow.state.state_topics import lease_topic
from mirrorflow.state.store import StateStore

MODES = ("planned", "unplanned")
TAKE_OVER_HINT = (
    "To fail over anyway, take the flow over: run the failover again with --take-over (in Airflow: the failover "
    "DAG's Param take_over). It takes the flow's lease from whoever holds it, fences the flow's copy transactions "
    "on the target so that run can never write to it again, makes this deployment the one that owns the flow, and "
    "records who took it from whom in the operations history"
)


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


@dataclass
class FailoverReport(Report):
    flow: str
    target: str
    mode: str
    dry_run: bool
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    source_error: str | None = None  # why the source could not tell its ends (unplanned)
    drain: list[str] = field(default_factory=list)  # what the planned drain did
    plan: FailoverPlan | None = None
    verify: VerifyReport | None = None  # planned mode: the target checked against the source
    committed: dict[str, int] = field(default_factory=dict)  # group -> partitions committed
    approved_by: str | None = None
    done: bool = False  # the groups were committed and the flow stopped
    note: str | None = None  # why nothing was done (already failed over, not confirmed, dry run)
    take_over: str | None = None  # what the take-over takes the flow from (preflight) or did (commit)

    @property
    def partitions(self) -> list[PartitionRPO]:
        return list(self.plan.partitions) if self.plan else []

    @property
    def groups(self) -> GroupSyncRun | None:
        if self.plan is None:
            return None
        return GroupSyncRun(self.flow, list(self.plan.groups), dict(self.committed), dict(self.plan.errors))

    @property
    def not_replicated(self) -> int | None:
        values = [p.not_replicated for p in self.partitions]
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    def status(self) -> str:
        if self.done:
            if self.plan is not None and self.plan.moves_after:
                return f"DONE, groups moved after failover {self.plan.moves_after}"
            return "DONE, the flow is stopped"
        if self.note:
            return self.note
        if self.plan is not None and self.plan.blocked:
            return f"plan {self.plan.id} CANNOT be committed: {self.plan.blocked}"
        return f"plan {self.plan.id}, nothing committed yet" if self.plan else "preflight"

    def lines(self) -> list[str]:
        nr = self.not_replicated
        out = [
            f"failover of flow {self.flow} to cluster {self.target!r} ({self.mode}"
            + (", dry run" if self.dry_run else "")
            + "): "
            + self.status()
        ]
        if self.plan is not None:
            out.append(f"  plan: {self.plan.id}" + (f", approved by {self.approved_by}" if self.approved_by else ""))
        if self.take_over:
            out.append(f"  take-over: {self.take_over}")
        out += [f"  drain: {d}" for d in self.drain]
        if self.source_error:
            out.append(f"  source: {self.source_error} (offsets not replicated: unknown)")
        out.append(
            "  RPO: "
            + ("unknown" if nr is None else f"{nr:,} offsets not replicated")
            + f" over {len(self.partitions)} partitions"
        )
        for p in self.partitions:
            behind = p.seconds_behind(self.at_ms)
            out.append(
                f"  {p.topic}[{p.partition}] -> {p.target_topic}[{p.partition}]: replicated up to {p.replicated_to}"
                + ("" if p.source_end is None else f", source end {p.source_end}, {p.not_replicated:,} not replicated")
                + ("" if behind is None else f", {behind:.0f} s behind")
                + f"; target end {p.target_end}"
            )
        if self.verify is not None:
            out += ["  verify: " + line for line in self.verify.lines()]
        if self.plan is not None:
            out += self._group_lines(self.plan)
        return out

    def _group_lines(self, plan: FailoverPlan) -> list[str]:
        verb = "committed" if self.done else "to commit"
        out = [
            f"  groups: {sum(len(g.writes) for g in plan.groups)} offset(s) {verb} for {len(plan.commits())} group(s)"
        ]
        for g in plan.groups:
            if g.action == "left-alone":
                out.append(f"    {g.group}: left alone ({g.reason})")
                continue
            ahead = [x for x in g.partitions if x.action == "skip-ahead"]
            no_topic = [x for x in g.partitions if x.action == "skip-no-topic"]
            out.append(
                f"    {g.group}: "
                + (f"{len(g.writes)} partition(s) {verb}" if g.writes else "up to date")
                + "".join(f"; keeps {x.topic}[{x.partition}] at {x.target_offset} (ahead)" for x in ahead)
                + "".join(f"; {x.topic}[{x.partition}] not on the target (run `mirrorflow sync`)" for x in no_topic)
            )
            for x in g.partitions:
                if x.action in ("write", "skip-equal", "skip-ahead"):
                    resume = max(x.checkpoint_offset, x.target_offset or -1)
                    out.append(f"    {g.group} resumes {x.topic}[{x.partition}] at {resume}" + resume_note(x))
        out += [f"    {g}: CANNOT be read on the target: {e}" for g, e in sorted(plan.errors.items())]
        return out

    def markdown(self) -> str:
        """The report for Airflow's Required Actions page: as printed, in a code block, headed by the plan id."""
        text = self.render()
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
        after = self.plan is not None and self.plan.moves_after
        what = ", groups left alone at the failover" if after else ""
        does = "" if after else " and stops the flow"
        takes = (
            " **It first takes the flow over** (confirmed with `take_over`): it takes the flow's lease from whoever "
            "holds it and fences the flow's copy transactions on the target, so that run can never write to it "
            f"again, and this deployment owns the flow from then on ({self.take_over or 'see the report'})."
            if self.plan is not None and self.plan.take_over
            else ""
        )
        head = (
            f"**Failover plan `{self.plan.id}`** of flow `{self.flow}` to cluster `{self.target}` ({self.mode}{what}). "
            f"Approve commits exactly these offsets on the target{does}; if what the plan was "
            "built from moves before the commit, nothing is committed and the run fails (trigger a new preflight)."
            + takes
            if self.plan is not None
            else f"Failover of flow `{self.flow}` to cluster `{self.target}`"
        )
        return f"{head}\n\n{fence}text\n{text}\n{fence}\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "target": self.target,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "at_ms": self.at_ms,
            "done": self.done,
            "note": self.note,
            "plan_id": self.plan.id if self.plan else None,
            "blocked": self.plan.blocked if self.plan else None,
            "approved_by": self.approved_by,
            "take_over": self.take_over,
            "source_error": self.source_error,
            "drain": self.drain,
            "not_replicated": self.not_replicated,
            "partitions": [
                {**asdict(p), "not_replicated": p.not_replicated, "seconds_behind": p.seconds_behind(self.at_ms)}
                for p in self.partitions
            ],
            "groups": self.groups.to_dict() if self.groups else None,
            "verify": self.verify.to_dict() if self.verify else None,
        }


def failover(
    cfg: Config,
    flow: FlowConfig,
    mode: str = "unplanned",
    groups: str | None = None,
    dry_run: bool = False,
    confirm: Callable[[FailoverReport], bool] = lambda r: True,
    copy_mode: str = "submit",
    max_drain_runs: int = 5,
    log: Callable[[str], None] = lambda s: None,
    drain: bool | None = None,
    plan_id: str | None = None,
    approved_by: str | None = None,
    via: str = "cli",
    max_lag: int | None = None,
    take_over: bool = False,
) -> FailoverReport:
    """Plan, confirm, commit that plan (the CLI; see the module docstring). Never raises for a refusal
    the report can explain (already failed over, not confirmed, a plan that cannot be committed);
    raises MirrorflowError for bad input or a drain left with more lag than `max_lag`, PlanMovedError
    when the state moved after the plan or the plan is not `plan_id`. `drain` (planned mode; default:
    unless a dry run)."""
    report = plan_failover(
        cfg,
        flow,
        mode,
        groups,
        dry_run,
        copy_mode,
        max_drain_runs,
        log,
        drain,
        max_lag=max_lag,
        take_over=take_over,
        via=via,
    )
    if report.plan is None:  # nothing to do
        return report
    if plan_id and plan_id != report.plan.id:
        raise PlanMovedError(
            f"failover of {flow.name}: the plan is {report.plan.id} now, not {plan_id}: the state moved since "
            "that preflight (see this report); nothing committed"
        )
    if dry_run:
        report.note = "dry run: nothing changed"
        return report
    if report.plan.blocked or not confirm(report):
        report.note = (
            f"plan {report.plan.id} cannot be committed: {report.plan.blocked}; nothing changed"
            if report.plan.blocked
            else "not confirmed: nothing changed"
        )
        return report
    return commit_failover(cfg, flow, report.plan, approved_by or whoami(), report, via=via)


def plan_failover(
    cfg: Config,
    flow: FlowConfig,
    mode: str = "unplanned",
    groups: str | None = None,
    dry_run: bool = False,
    copy_mode: str = "submit",
    max_drain_runs: int = 5,
    log: Callable[[str], None] = lambda s: None,
    drain: bool | None = None,
    *,
    max_lag: int | None = None,
    take_over: bool = False,
    via: str = "cli",
) -> FailoverReport:
    """The preflight: drain (planned mode, unless a dry run or `drain=False`; more than `max_lag`
    offsets left, default 0, stop it with MirrorflowError), then the report and its plan (planned
    mode: verified). Changes no group and no flow state. On a flow already failed over, with `groups`:
    the plan moving the groups still to move (no drain, no verify); `report.plan` is None when there
    is nothing to do (`report.note` says so and names the groups still to move). A run holding the
    flow's lease or another deployment owning it stops it (LeaseError / DeploymentConflictError
    naming `--take-over`) unless `take_over`: then the plan takes the flow over at its commit (a
    planned drain takes it over first, as `via` and this process)."""
    if mode not in MODES:
        raise ConfigError([("--mode", f"expected planned or unplanned, got {mode!r}")])
    if max_lag is not None and (isinstance(max_lag, bool) or not isinstance(max_lag, int) or max_lag < 0):
        raise ConfigError([("--max-lag", f"expected a number of offsets >= 0, got {max_lag!r}")])
    pattern = _group_pattern(groups)
    report = FailoverReport(flow.name, flow.target, mode, dry_run)
    draining = mode == "planned" and (not dry_run if drain is None else drain)
    with FlowClients(cfg, flow) as clients:
        done = _failed_over(clients)
        if done is not None:
            _plan_after(clients, report, done, groups, pattern)
            return report
        report.take_over = held_by(clients, take_over, dry_run)
        if take_over and draining:  # the drain's runs need the flow: take it over now
            lease, report.take_over = take_over_flow(clients, whoami(), via, "planned failover's drain")
            lease.release()
    if draining:
        _drain(cfg, flow, report, copy_mode, max_drain_runs, log, max_lag)
    with FlowClients(cfg, flow) as clients:
        report.plan = replace(_build_plan(clients, mode, groups, pattern, report), take_over=take_over)
        if mode == "planned":
            # what was copied since the last verify that passed (its 'verified up to' marks), recorded
            # for the next one: bounded by what changed, not by the flow's history
            report.verify = verify_flow(clients, since_last=True, record=not dry_run, by=whoami())
            report.plan = replace(report.plan, verify_ok=report.verify.ok)
    return report


def commit_failover(
    cfg: Config,
    flow: FlowConfig,
    plan: FailoverPlan,
    approved_by: str,
    report: FailoverReport | None = None,
    via: str = "",
) -> FailoverReport:
    """Commit exactly `plan` (module docstring), recording `approved_by` (and the door, `via`, in the
    operations history). PlanMovedError, nothing committed, when what the plan was built from moved;
    StateError for a plan that cannot be committed."""
    if (plan.flow, plan.target) != (flow.name, flow.target):
        raise ConfigError([("plan", f"plan {plan.id} is for flow {plan.flow}, not {flow.name}")])
    if plan.blocked:
        raise StateError(f"failover plan {plan.id} of {flow.name} cannot be committed: {plan.blocked}")
    if report is None:
        report = FailoverReport(flow.name, flow.target, plan.mode, False, plan=plan)
    report.approved_by = approved_by
    with FlowClients(cfg, flow) as clients:
        done = _failed_over(clients)
        if plan.moves_after is None and done is not None:
            report.note = _done_note(clients, done)
            return report
        if plan.moves_after is not None and (done is None or _record_id(done) != plan.moves_after):
            raise PlanMovedError(
                f"failover plan {plan.id} moves groups after failover {plan.moves_after} of {flow.name}, but the "
                + ("flow is not failed over now" if done is None else f"flow's failover is {_record_id(done)} now")
                + ": nothing committed. Run the preflight again."
            )
        if plan.take_over:
            keys = [(p.topic, p.partition) for p in plan.partitions]
            lease, report.take_over = take_over_flow(clients, approved_by, via, f"failover of plan {plan.id}", keys)
        else:
            try:
                lease = FlowLease(clients, *local_owner("mirrorflow failover")).acquire()
            except (LeaseError, DeploymentConflictError) as exc:
                raise type(exc)(f"failover of {flow.name}: {exc}. {TAKE_OVER_HINT}") from None
        try:
            pattern = _group_pattern(plan.groups_regex)
            if done is None:
                now = _build_plan(clients, plan.mode, plan.groups_regex, pattern, None)
            else:
                now = _build_plan(clients, plan.mode, plan.groups_regex, pattern, None, _moved_groups(done))
                now = replace(now, moves_after=plan.moves_after)
            moved = plan_moves(plan, now)
            if moved:
                raise PlanMovedError(
                    f"failover of {flow.name}: nothing committed: the state moved since plan {plan.id} was made"
                    f" (now {now.id}): "
                    + "; ".join(moved[:20])
                    + (f"; and {len(moved) - 20} more" if len(moved) > 20 else "")
                    + ". Run the preflight again and approve the new plan."
                    + (f" (The take-over stands: {report.take_over}.)" if plan.take_over else "")
                )
            if plan.moves_after is None:
                _commit(clients, report, plan, now, via)
            else:
                _commit_after(clients, report, plan, via)
        finally:
            lease.release()
    return report


# Unplanned: the source is presumed lost and its ends only tell the RPO, so it is asked briefly
# (a dead cluster otherwise costs the connection check's 10 s, and a half-dead one the outage bound).
LOST_SOURCE_PROBE_S = 5.0


def _lost_source_ends(clients: FlowClients, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    admin = clients.admin("source", check_timeout=LOST_SOURCE_PROBE_S)
    return list_offsets(admin, clients.connection("source"), keys, OffsetSpec.latest(), True, LOST_SOURCE_PROBE_S)


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


def _failed_over(clients: FlowClients) -> dict[str, Any] | None:
    """The flow's failover record when the flow is failed over (stopped with a record), else None."""
    done = read_control(clients, "failover")
    return dict(done) if done is not None and flow_state(clients).state == "stopped" else None


def _record_id(done: Mapping[str, Any]) -> str:
    """What a plan moving groups after the failover is bound to: the failover's plan id (its time for a
    record written before plans had ids)."""
    return str(done.get("plan") or done.get("at"))


def _moved_groups(done: Mapping[str, Any]) -> frozenset[str]:
    """The groups the failover committed (never planned again after it)."""
    return frozenset(done.get("groups") or {})


def _done_note(clients: FlowClients, done: Mapping[str, Any]) -> str:
    return (
        f"nothing to do: flow {clients.flow.name} was already failed over to {clients.flow.target!r} at "
        f"{_iso(int(done.get('at', 0)))} ({done.get('mode')})"
        + (f", plan {done['plan']}" if done.get("plan") else "")
        + (f" approved by {done['approved_by']}" if done.get("approved_by") else "")
        + " and is stopped"
    )


def _plan_after(
    clients: FlowClients,
    report: FailoverReport,
    done: Mapping[str, Any],
    groups: str | None,
    pattern: re.Pattern[str] | None,
) -> None:
    """A flow already failed over: the plan moving the groups it did not commit (left alone, or not
    chosen by its --groups) that match `groups`; without `groups`, or nothing to commit, only a note
    naming the groups still to move and how."""
    mode = str(done.get("mode") or report.mode)
    report.mode = mode
    plan = replace(_build_plan(clients, mode, groups, pattern, None, _moved_groups(done)), moves_after=_record_id(done))
    note = _done_note(clients, done)
    busy = sorted(g.group for g in plan.groups if g.action == "left-alone")
    todo = sorted(g.group for g in plan.groups if g.writes) + sorted(plan.errors)
    if groups and (todo or plan.errors):
        report.plan = plan
        return
    if groups:
        report.note = note + f"; no group matching {groups!r} is left to move"
    elif todo:
        report.note = (
            note + f"; groups still to move: {', '.join(todo)} "
            f"(`mirrorflow failover --flow {clients.flow.name} --groups REGEX`, or the DAG's groups Param)"
        )
    else:
        report.note = note
    if busy:
        report.note += f"; left alone (active members on {clients.flow.target!r}): {', '.join(busy)}"


def _group_pattern(groups: str | None) -> re.Pattern[str] | None:
    if not groups:
        return None
    try:
        return re.compile(groups)
    except re.error as exc:
        raise ConfigError([("--groups", f"not a valid regular expression ({exc}): {groups!r}")]) from None


def held_by(clients: FlowClients, take_over: bool, dry_run: bool = False) -> str | None:
    """What a failover would take the flow over from: a run holding its lease, another deployment
    owning its state (None: nothing). Without `take_over` either is an error naming the flag (the
    preflight stops before anything is drained or approved), except in a dry run (a drill), which
    only says so."""
    flow = clients.flow
    if take_over and not flow.exactly_once:
        raise ConfigError(
            [
                (
                    "--take-over",
                    f"flow {flow.name} copies with exactly.once=false: a run holding it cannot be fenced (idempotent "
                    "producers have no transactional id). Stop that run (its process, or its Airflow task), or "
                    "wait until its lease expires, then fail over without --take-over",
                )
            ]
        )
    if not clients.partitions("target", lease_topic(flow)):
        return "nothing to take over (the flow never ran on this target)" if take_over else None
    lease = FlowLease(clients, "failover-preflight", "failover preflight", 1)
    holder = lease.read_holder()
    live = holder if holder is not None and holder.expires > int(time.time() * 1000) else None
    owning = lease.owning_deployment
    other = owning is not None and owning != flow.deployment
    what = ([f"the run holding its lease, {live.run_line()}"] if live else []) + (
        [f"{describe_deployment(owning or '')}, which owns its state on {flow.target!r}"] if other else []
    )
    if take_over:
        if not what:
            return (
                "nothing to take over now (the lease is free and this deployment owns the flow); its copies are fenced"
            )
        return "takes flow " + flow.name + " over from " + " and from ".join(what)
    if what and dry_run:
        return "needed to fail over now (--take-over, Param take_over): the flow is held by " + " and by ".join(what)
    if live and not other:
        raise LeaseError(f"failover of {flow.name}: {live.describe(flow.name)}. {TAKE_OVER_HINT}")
    if other:
        raise DeploymentConflictError(
            f"failover of {flow.name}: its state on cluster {flow.target!r} belongs to "
            f"{describe_deployment(owning or '')}"
            + (f" and {what[0]}" if live else "")
            + f"; this config is {describe_deployment(flow.deployment)}. {TAKE_OVER_HINT}"
        )
    return None


def take_over_flow(
    clients: FlowClients, by: str, via: str, purpose: str, keys: list[tuple[str, int]] | None = None
) -> tuple[FlowLease, str]:
    """Take the flow over for `purpose` (the operator confirmed it): its lease from whoever holds it
    (that owner fenced for good, this deployment owning the flow from then on), then every copy
    transaction of the flow fenced on the target (its progress's partitions and `keys`), then a
    history line saying who took it from whom. Returns the lease, held (the caller releases it), and
    what was done."""
    flow = clients.flow
    lease = FlowLease(clients, *local_owner("mirrorflow failover --take-over"))
    lease.read_holder()
    owning = lease.owning_deployment
    prev = lease.take_over()
    try:
        n = fence_copies(clients, set(StateStore(clients).progress()) | set(keys or []))
        what = f"took flow {flow.name} over for the {purpose}: " + (
            f"took its lease from {prev.who} (held since {_iso(prev.since)})" if prev else "its lease was free"
        )
        if owning is not None and owning != flow.deployment:
            what += (
                f"; its state belonged to {describe_deployment(owning)}, now to {describe_deployment(flow.deployment)}"
            )
        what += f"; fenced the copy transactions of {n} partition(s) on {flow.target!r}"
        record_operation(
            clients,
            "failover",
            by,
            via=via,
            summary=what,
            figures={"partitions fenced": n, **({"taken from": prev.who} if prev else {})},
        )
    except MirrorflowError as exc:
        lease.release()
        took = f"from {prev.who}" if prev else "(it was free)"
        raise StateError(
            f"flow {flow.name}: its lease was taken over {took} for the {purpose} (that run can no longer hold it), "
            f"but the take-over did not complete: {exc}. Nothing else changed; run the failover again with "
            "--take-over"
        ) from None
    except BaseException:
        lease.release()
        raise
    return lease, what


def drain_refusal(flow: str, runs: int, lags: Mapping[tuple[str, int], int], max_lag: int | None) -> str | None:
    """Why a drain left with `lags` (source partition -> offsets not copied) after `runs` replicate
    runs must not go on to the failover (None: it may): more than `max_lag` (None: 0) in all."""
    total, allowed = sum(lags.values()), max_lag or 0
    if total <= allowed:
        return None
    behind = sorted(((k, v) for k, v in lags.items() if v > 0), key=lambda kv: (-kv[1], kv[0]))
    return (
        f"planned failover of {flow}: the drain did not reach lag 0 in {runs} replicate run(s): lag {total:,} "
        + ("" if max_lag is None else f"(more than the accepted {max_lag:,}) ")
        + "on "
        + ", ".join(f"{t}[{p}] {v:,}" for (t, p), v in behind[:20])
        + (f" and {len(behind) - 20} more partition(s)" if len(behind) > 20 else "")
        + ". Nothing changed. Stop the source's producers and run the failover again, or accept the lag "
        f"(--max-lag {total} / Param max_lag): those offsets are not on the target after the failover."
    )


def _drain(
    cfg: Config,
    flow: FlowConfig,
    report: FailoverReport,
    copy_mode: str,
    max_runs: int,
    log: Callable[[str], None],
    max_lag: int | None = None,
) -> None:
    """Planned mode: last topic sync, replicate until the lag is at most `max_lag` (0; bounded runs,
    else stop), last checkpoint."""
    sync = sync_flow(cfg, flow, ["topics"])
    report.drain.append(f"topic sync: {len(sync.changes)} change(s)")
    lags: dict[tuple[str, int], int] = {}
    runs = 0
    for runs in range(1, max_runs + 1):
        rep = run_once(cfg, flow, mode=copy_mode, log=log)
        if not rep.ok:
            raise MirrorflowError(
                f"planned failover of {flow.name}: replication failed, nothing changed:\n{rep.render()}"
            )
        report.drain.append(f"replicate run {runs}: {rep.records:,} records, lag {rep.lag:,}")
        lags = {(p.topic, p.partition): p.lag for p in rep.partitions}
        if sum(lags.values()) <= (max_lag or 0):
            break
    refusal = drain_refusal(flow.name, runs, lags, max_lag)
    if refusal:
        raise MirrorflowError(refusal)
    if sum(lags.values()):
        report.drain.append(f"lag {sum(lags.values()):,} accepted (max lag {max_lag:,})")
    run = emit_checkpoints(cfg, flow)
    if run.errors:
        raise MirrorflowError(f"planned failover of {flow.name}: checkpoints failed for {sorted(run.errors)}")
    report.drain.append(f"checkpoints: {len(run.emitted)} emitted for {len(run.groups)} group(s)")


def _build_plan(
    clients: FlowClients,
    mode: str,
    groups: str | None,
    pattern: re.Pattern[str] | None,
    report: FailoverReport | None,
    exclude: frozenset[str] = frozenset(),
) -> FailoverPlan:
    """Read what a plan is made of from the target; with a `report` (the preflight) also the source's
    ends for the RPO, which a commit does not ask for. `exclude`: groups never to plan."""
    flow = clients.flow
    progress = StateStore(clients).progress()
    if not progress:
        raise StateError(f"flow {flow.name} has no replicated data on cluster {flow.target!r}: nothing to fail over to")
    filters = FlowFilters.for_flow(flow)
    keys = sorted(k for k in progress if filters.should_replicate_topic(k[0]))  # what the flow replicates now
    remote = {t: filters.remote_topic(t) for t, _ in keys}
    target_ends = list_offsets(
        clients.admin("target"),
        clients.connection("target"),
        [(remote[t], p) for t, p in keys if p < clients.partitions("target", remote[t])],
        OffsetSpec.latest(),
        committed=False,
    )
    ends: dict[tuple[str, int], int] = {}
    if report is not None:
        try:
            ends = (
                source_offsets(clients, keys, OffsetSpec.latest())
                if mode == "planned"
                else _lost_source_ends(clients, keys)
            )
        except MirrorflowError as exc:
            if mode == "planned":
                raise
            report.source_error = str(exc)
    store = CheckpointStore.load(clients)
    chosen = (
        None
        if pattern is None and not exclude
        else [g for g in store.groups() if (pattern is None or pattern.fullmatch(g)) and g not in exclude]
    )
    run = sync_group_offsets(clients.cfg, flow, store, groups=chosen, dry_run=True, clients=clients, failover=True)
    return FailoverPlan(
        flow.name,
        flow.target,
        mode,
        groups or None,
        tuple(
            PartitionRPO(
                t,
                p,
                remote[t],
                progress[(t, p)].next,
                target_ends.get((remote[t], p), -1),
                ends.get((t, p)),
                progress[(t, p)].last_timestamp,
            )
            for t, p in keys
        ),
        tuple(run.plans),
        int(time.time() * 1000),
        errors=dict(run.errors),
    )


def _commit(clients: FlowClients, report: FailoverReport, plan: FailoverPlan, now: FailoverPlan, via: str) -> None:
    flow = clients.flow
    report.committed, errors = commit_group_plans(clients.admin("target"), plan.groups, clients.admin_timeout)
    if errors:
        raise MirrorflowError(
            f"failover of {flow.name}: committing the offsets of plan {plan.id} failed for "
            + "; ".join(f"{g}: {e}" for g, e in sorted(errors.items()))
            + " (the flow is not stopped; fix and run the failover again: it never moves an offset backwards)"
        )
    write_control(
        clients,
        "failover",
        {
            # when the plan was made, however it is committed: the failback splits the records the
            # source accepted at this time into the divergence (before) and the split brain (after)
            "at": plan.at_ms or report.at_ms,
            "mode": plan.mode,
            "by": whoami(),
            "approved_by": report.approved_by,
            "plan": plan.id,
            # read again at the commit (producers may write to B while the approval waits)
            "target_ends": {f"{p.target_topic}:{p.partition}": p.target_end for p in now.partitions},
            "replicated_to": {f"{p.topic}:{p.partition}": p.replicated_to for p in plan.partitions},
            "groups": plan.commits(),
            "left_alone": [g.group for g in plan.groups if g.action == "left-alone"],
            "take_over": report.take_over if plan.take_over else None,
        },
    )
    why = f"failed over to {flow.target!r} ({plan.mode}), plan {plan.id} approved by {report.approved_by}"
    # the history line is the failover's; the cause makes every skipped run name the failback as the next step
    set_flow_state(clients, "stopped", why, whoami(), record=False, cause="failover")
    report.done = True
    try:
        _record(clients, report, plan, via)
    except StateError as exc:
        raise StateError(f"flow {flow.name} was failed over (plan {plan.id}), but {exc}") from None


def _commit_after(clients: FlowClients, report: FailoverReport, plan: FailoverPlan, via: str) -> None:
    """Commit a plan moving groups after the failover; the failover record stays the failover's, the
    operations history gets the line."""
    flow = clients.flow
    report.committed, errors = commit_group_plans(clients.admin("target"), plan.groups, clients.admin_timeout)
    if errors:
        raise MirrorflowError(
            f"moving groups of {flow.name} after its failover: committing plan {plan.id} failed for "
            + "; ".join(f"{g}: {e}" for g, e in sorted(errors.items()))
            + (f" (committed: {', '.join(sorted(report.committed))})" if report.committed else "")
            + "; run it again: it never moves an offset backwards"
        )
    report.done = True
    moved = sorted(report.committed)
    try:
        record_operation(
            clients,
            "failover",
            str(report.approved_by),
            via=via,
            summary=f"moved groups left alone: {', '.join(moved)} (plan {plan.id}, after failover {plan.moves_after})",
            figures={"groups committed": len(moved), "offsets committed": sum(report.committed.values())},
        )
    except StateError as exc:
        raise StateError(
            f"the groups {', '.join(moved)} of {flow.name} were moved (plan {plan.id}), but {exc}"
        ) from None


def _record(clients: FlowClients, report: FailoverReport, plan: FailoverPlan, via: str) -> None:
    """The failover's line in the flow's operations history (state.history)."""
    record_operation(
        clients,
        "failover",
        str(report.approved_by),
        via=via,
        summary=f"{plan.mode} failover to {clients.flow.target!r}, plan {plan.id}: the flow is stopped",
        figures={
            "groups committed": len(report.committed),
            "offsets committed": sum(report.committed.values()),
            "groups left alone": sum(g.action == "left-alone" for g in plan.groups),
            "not replicated": report.not_replicated,
        },
    )


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")
