"""Failover of a flow A->B: move its consumer groups to B and stop the flow (issue 9's runbook).

* **unplanned** (A is lost): everything comes from the TARGET -- progress (what was replicated),
  the checkpoints (where each group resumes) and the offset map behind them. The source is asked
  for its ends only to tell the RPO, and only if it answers.
* **planned** (A is up; stopping A's producers is the operator's step): drain first -- sync the
  topics, replicate until the lag is 0 (or `max_drain_runs` runs), checkpoint once more -- so the
  groups resume exactly where they stopped on A.

Both: a preflight report (per partition: replicated up to, source end when reachable, offsets not
replicated and how old the last replicated record is = the RPO; per group: where it resumes on B,
groups left alone because they have active members on B), a confirmation (the CLI asks unless
--yes; the DAG has an approval step), then: commit the checkpointed offsets on B for the chosen
groups (never backwards, never a group with active members -- groups.offset_sync), set the flow to
`stopped`, and write a failover record (time, per-partition target ends, per-group offsets) to the
target's state. A second failover of a stopped, failed-over flow is a no-op that says so.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, MirrorflowError, StateError
from mirrorflow.groups.checkpoint import CheckpointStore, emit_checkpoints
from mirrorflow.groups.offset_sync import GroupSyncRun, sync_group_offsets
from mirrorflow.groups.render import render_group_sync
from mirrorflow.kafka.topics import list_offsets
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.verify import VerifyReport, verify_flow
from mirrorflow.replication.planner import source_offsets
from mirrorflow.replication.runner import run_once
from mirrorflow.state.flow_state import flow_state, read_control, set_flow_state, write_control
from mirrorflow.state.lease import FlowLease, local_owner, whoami
from mirrorflow.state.store import StateStore

MODES = ("planned", "unplanned")


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


@dataclass
class FailoverReport:
    flow: str
    target: str
    mode: str
    dry_run: bool
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    source_error: str | None = None  # why the source could not tell its ends (unplanned)
    drain: list[str] = field(default_factory=list)  # what the planned drain did
    partitions: list[PartitionRPO] = field(default_factory=list)
    groups: GroupSyncRun | None = None
    verify: VerifyReport | None = None  # planned mode: the target checked against the source
    done: bool = False  # the groups were committed and the flow stopped
    note: str | None = None  # why nothing was done (already failed over, not confirmed, dry run)

    @property
    def not_replicated(self) -> int | None:
        values = [p.not_replicated for p in self.partitions]
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    def lines(self) -> list[str]:
        nr = self.not_replicated
        out = [
            f"failover of flow {self.flow} to cluster {self.target!r} ({self.mode}"
            + (", dry run" if self.dry_run else "")
            + "): "
            + ("DONE, the flow is stopped" if self.done else (self.note or "preflight"))
        ]
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
        if self.groups is not None:
            out += ["  " + line for line in render_group_sync(self.groups).lines]
            for g in self.groups.plans:
                for x in g.partitions:
                    if x.action in ("write", "skip-equal", "skip-ahead"):
                        resume = max(x.checkpoint_offset, x.target_offset or -1)
                        out.append(f"    {g.group} resumes {x.topic}[{x.partition}] at {resume}")
        return out

    def render(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "target": self.target,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "at_ms": self.at_ms,
            "done": self.done,
            "note": self.note,
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
) -> FailoverReport:
    """Preflight, confirm, commit (see the module docstring). Never raises for a refusal the
    report can explain (already failed over, not confirmed); raises MirrorflowError for bad input.
    `drain` (planned mode; default: unless a dry run): the DAG drains in its preflight task, so the
    approval sees the drained state, and not again in its commit task."""
    if mode not in MODES:
        raise ConfigError([("--mode", f"expected planned or unplanned, got {mode!r}")])
    pattern = _group_pattern(groups)
    report = FailoverReport(flow.name, flow.target, mode, dry_run)
    with FlowClients(cfg, flow) as clients:
        done = read_control(clients, "failover")
        if done is not None and flow_state(clients).state == "stopped":
            report.note = (
                f"nothing to do: flow {flow.name} was already failed over to {flow.target!r} at "
                f"{_iso(int(done.get('at', 0)))} ({done.get('mode')}) and is stopped"
            )
            return report
    if mode == "planned" and (not dry_run if drain is None else drain):
        _drain(cfg, flow, report, copy_mode, max_drain_runs, log)
    with FlowClients(cfg, flow) as clients:
        _preflight(clients, report, pattern)
        if mode == "planned":
            report.verify = verify_flow(clients)  # shown before the confirmation / approval
        if dry_run:
            report.note = "dry run: nothing changed"
            return report
        if not confirm(report):
            report.note = "not confirmed: nothing changed"
            return report
        lease = FlowLease(clients, *local_owner("mirrorflow failover")).acquire()
        try:
            _commit(cfg, clients, report, pattern)
        finally:
            lease.release()
    return report


def _group_pattern(groups: str | None) -> re.Pattern[str] | None:
    if not groups:
        return None
    try:
        return re.compile(groups)
    except re.error as exc:
        raise ConfigError([("--groups", f"not a valid regular expression ({exc}): {groups!r}")]) from None


def _drain(
    cfg: Config, flow: FlowConfig, report: FailoverReport, copy_mode: str, max_runs: int, log: Callable[[str], None]
) -> None:
    """Planned mode: last topic sync, replicate until lag 0 (bounded), last checkpoint."""
    sync = sync_flow(cfg, flow, ["topics"])
    report.drain.append(f"topic sync: {len(sync.changes)} change(s)")
    for i in range(1, max_runs + 1):
        rep = run_once(cfg, flow, mode=copy_mode, log=log)
        if not rep.ok:
            raise MirrorflowError(
                f"planned failover of {flow.name}: replication failed, nothing changed:\n{rep.render()}"
            )
        report.drain.append(f"replicate run {i}: {rep.records:,} records, lag {rep.lag:,}")
        if rep.lag == 0:
            break
    run = emit_checkpoints(cfg, flow)
    if run.errors:
        raise MirrorflowError(f"planned failover of {flow.name}: checkpoints failed for {sorted(run.errors)}")
    report.drain.append(f"checkpoints: {len(run.emitted)} emitted for {len(run.groups)} group(s)")


def _preflight(clients: FlowClients, report: FailoverReport, pattern: re.Pattern[str] | None) -> None:
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
    try:
        ends = source_offsets(clients, keys, OffsetSpec.latest())
    except MirrorflowError as exc:
        if report.mode == "planned":
            raise
        report.source_error = str(exc)
    report.partitions = [
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
    ]
    report.groups = sync_group_offsets(
        clients.cfg, flow, groups=_chosen_groups(clients, pattern), dry_run=True, clients=clients, failover=True
    )


def _chosen_groups(clients: FlowClients, pattern: re.Pattern[str] | None) -> list[str] | None:
    if pattern is None:
        return None
    return [g for g in CheckpointStore.load(clients).groups() if pattern.fullmatch(g)]


def _commit(cfg: Config, clients: FlowClients, report: FailoverReport, pattern: re.Pattern[str] | None) -> None:
    flow = clients.flow
    report.groups = sync_group_offsets(
        cfg, flow, groups=_chosen_groups(clients, pattern), clients=clients, failover=True
    )
    if report.groups.errors:
        raise MirrorflowError(
            f"failover of {flow.name}: committing the offsets failed for "
            + "; ".join(f"{g}: {e}" for g, e in sorted(report.groups.errors.items()))
            + " (the flow is not stopped; fix and run the failover again: it never moves an offset backwards)"
        )
    committed = {
        g.group: {f"{x.topic}:{x.partition}": x.checkpoint_offset for x in g.writes} for g in report.groups.plans
    }
    write_control(
        clients,
        "failover",
        {
            "at": report.at_ms,
            "mode": report.mode,
            "by": whoami(),
            "target_ends": {f"{p.target_topic}:{p.partition}": p.target_end for p in report.partitions},
            "replicated_to": {f"{p.topic}:{p.partition}": p.replicated_to for p in report.partitions},
            "groups": committed,
            "left_alone": [g.group for g in report.groups.plans if g.action == "left-alone"],
        },
    )
    set_flow_state(clients, "stopped", f"failed over to {flow.target!r} ({report.mode})", whoami())
    report.done = True


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")
