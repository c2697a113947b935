"""Disaster-recovery drill of a flow A->B: what a failover would do now, measured, with nothing moved.

A failover is rehearsed on a healthy system so its numbers are known before the worst day:

1. **plan**: the unplanned failover's preflight (`ops.dr.failover_preflight.plan_failover`, no drain): per
   partition what was replicated, the source's end and the RPO (offsets not replicated, seconds
   behind), per group the exact target offsets it would commit (where each group resumes on B).
   It takes no lease and commits nothing: the flow's runs go on meanwhile.
2. **verify**: `ops.verify.verify.verify_flow` bounded to a recent window (`verify_from`: default the
   last hour of source records, by their timestamps), so a drill takes seconds on a large estate.
3. **shadow** (optional, `shadow_suffix`): the offsets where each group would resume are committed
   to shadow groups `<group><suffix>` on B -- never the real groups -- so an application can be
   started against B with the shadow group, as it would be after the failover.
4. **client switch**: the flow's `client.switch.failover` steps (ops.dr.client_switch), each run as a
   dry run (it checks what it would do and says so; nothing changes), each timed. A step that fails
   its dry run is a problem of the drill.

The time of each step and their sum (the measured RTO of the failover's own steps and of moving the
applications; the approval wait is the operator's) are reported. A `drill` control record (the
last drill, for `mirrorflow status` and the status page) and a history line are written on B;
nothing else changes: no consumer group of the flow, no flow state.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, MirrorflowError, StateError
from mirrorflow.groups.group_offsets import list_groups
from mirrorflow.groups.offset_sync import (
    SAFE_STATES,
    GroupSyncPlan,
    PartitionSync,
    commit_group_plans,
    describe_target_groups,
)
from mirrorflow.groups.render import resume_note
from mirrorflow.ops.dr.caller import Caller
from mirrorflow.ops.dr.client_switch import ClientSwitchError, SwitchReport, run_client_switch
from mirrorflow.ops.dr.failover_drain import Drain
from mirrorflow.ops.dr.failover_plan import FailoverPlan
from mirrorflow.ops.dr.failover_preflight import plan_failover
from mirrorflow.ops.dr.inputs import DRILL
from mirrorflow.ops.verify.verify import VerifyReport, verify_flow
from mirrorflow.params import checked, named
from mirrorflow.replication.plan.when import WHEN_HELP, When
from mirrorflow.reporting import Report
from mirrorflow.state.flow_state import flow_state, read_control, write_control
from mirrorflow.state.history import record_operation
from mirrorflow.state.lease import whoami

DEFAULT_VERIFY_FROM = "1h"  # the verify window: records of the last hour
_DURATION = re.compile(r"^(\d+)\s*([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
RESUMING = ("write", "skip-equal", "skip-ahead")  # partitions a failover leaves at a known offset


def verify_start(verify_from: str | None, now_ms: int, key: str = "--verify-from") -> str:
    """The verify window's start as `verify_flow` takes it: a duration back from now (`90s`, `15m`,
    `1h`, `2d`) becomes an ISO time; `earliest`, `latest` (verify nothing), `start`, `offset:N` and
    ISO times pass. ConfigError naming the input (`key`) otherwise."""
    text = (verify_from or DEFAULT_VERIFY_FROM).strip()
    m = _DURATION.fullmatch(text)
    if m:
        at = datetime.fromtimestamp(now_ms / 1000, tz=UTC) - timedelta(seconds=int(m[1]) * _UNITS[m[2]])
        return at.isoformat(timespec="milliseconds")
    try:
        When.parse(text, key)
    except ConfigError as exc:
        if not exc.problems[0][1].startswith("expected"):  # e.g. a time without a zone: said as is
            raise
        raise ConfigError(
            [(key, f"expected a duration back from now (90s, 15m, 1h, 2d), {WHEN_HELP}; got {text!r}")]
        ) from None
    return text


@dataclass
class DrillReport(Report):
    flow: str
    target: str
    by: str
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    state: str = ""  # the flow's state during the drill (it keeps running)
    plan: FailoverPlan | None = None
    source_error: str | None = None  # the source could not tell its ends: RPO unknown
    verify_from: str = ""
    verify: VerifyReport | None = None
    verify_error: str | None = None  # the verify could not run
    shadow_suffix: str | None = None
    shadow: dict[str, dict[str, int]] = field(default_factory=dict)  # shadow group -> {"topic:partition": offset}
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds (plan, verify, shadow commit, switches)
    switch: SwitchReport | None = None  # the client-switch steps' dry run (None: the flow has none)

    @property
    def rto_s(self) -> float:
        return sum(self.steps.values())

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        """Time `step` into `steps` (what the RTO adds up)."""
        began = time.monotonic()
        try:
            yield
        finally:
            self.steps[step] = time.monotonic() - began

    def figures(self) -> dict[str, Any]:
        """What the operations history keeps of the drill (an unknown RPO, no shadow groups: left out)."""
        figures = {
            "RPO offsets": self.not_replicated,
            "RPO s": None if self.seconds_behind is None else round(self.seconds_behind, 1),
            "RTO s": round(self.rto_s, 2),
            "groups": len(self.resumes()),
            "verify": self.verify_verdict,
            "shadow suffix": self.shadow_suffix,
            "client switch": self.switch_verdict,
        }
        return {k: v for k, v in figures.items() if v is not None}

    @property
    def not_replicated(self) -> int | None:
        values = [p.not_replicated for p in self.plan.partitions] if self.plan else []
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    @property
    def seconds_behind(self) -> float | None:
        """The oldest replicated partition's lag in seconds (None: unknown)."""
        values = [p.seconds_behind(self.at_ms) for p in self.plan.partitions] if self.plan else []
        if any(v is None for v in values):
            return None
        return max((v for v in values if v is not None), default=0.0)

    def resumes(self) -> dict[str, dict[str, int]]:
        """group -> {"topic:partition": target offset} where each group would resume after the failover
        (its translated checkpoint, or its offset on B where that is ahead: never backwards)."""
        out: dict[str, dict[str, int]] = {}
        for g in self.plan.groups if self.plan else ():
            if g.action == "left-alone":
                continue
            parts = {
                f"{x.topic}:{x.partition}": max(x.checkpoint_offset, x.target_offset or -1)
                for x in g.partitions
                if x.action in RESUMING
            }
            if parts:
                out[g.group] = parts
        return out

    def left_alone(self) -> dict[str, str]:
        return {g.group: g.reason for g in self.plan.groups if g.action == "left-alone"} if self.plan else {}

    @property
    def verify_verdict(self) -> str:
        if self.verify_error:
            return f"not run ({self.verify_error})"
        if self.verify is None:
            return "not run"
        if self.verify.ok:
            return "ok"
        return f"MISMATCH in {len(self.verify.mismatched)} partition(s)"

    @property
    def ok(self) -> bool:
        """The failover rehearsed would work: its plan can be committed and the verify found no mismatch."""
        return (
            self.plan is not None
            and self.plan.blocked is None
            and self.verify_error is None
            and (self.verify is None or self.verify.ok)
            and (self.switch is None or self.switch.ok)
        )

    @property
    def switch_verdict(self) -> str | None:
        """The client switch's dry run in words (None: the flow has no steps)."""
        if self.switch is None:
            return None
        if self.switch.ok:
            return f"{len(self.switch.steps)} step(s) ok"
        failed = next((s.name for s in self.switch.steps if not s.ok), "?")
        return f"FAILED at step {failed!r}"

    def summary(self) -> str:
        nr, behind = self.not_replicated, self.seconds_behind
        rpo = "unknown" if nr is None else f"{nr:,} offsets not replicated"
        if behind is not None:
            rpo += f" ({behind:.0f} s behind)"
        shadow = f", shadow groups <group>{self.shadow_suffix}" if self.shadow else ""
        return (
            f"RPO {rpo}, RTO {self.rto_s:.1f} s, {len(self.resumes())} group(s) would resume"
            + (f" ({len(self.left_alone())} left alone)" if self.left_alone() else "")
            + f", verify {self.verify_verdict}{shadow}"
            + (f", client switch {self.switch_verdict}" if self.switch_verdict else "")
        )

    def lines(self) -> list[str]:
        head = f"drill of flow {self.flow} (failover to {self.target!r}, unplanned; nothing moved): "
        out = [head + ("ok" if self.ok else "PROBLEMS (see below)"), f"  {self.summary()}"]
        if self.plan is not None:
            out.append(
                f"  plan: {self.plan.id}" + (f", CANNOT be committed: {self.plan.blocked}" if self.plan.blocked else "")
            )
        out.append(f"  flow state during the drill: {self.state} (not changed)")
        out.append(
            "  steps: "
            + ", ".join(f"{k} {v:.2f} s" for k, v in self.steps.items())
            + f"; total (RTO) {self.rto_s:.2f} s"
        )
        if self.source_error:
            out.append(f"  source: {self.source_error} (offsets not replicated: unknown)")
        for p in self.plan.partitions if self.plan else ():
            behind = p.seconds_behind(self.at_ms)
            out.append(
                f"  {p.topic}[{p.partition}] -> {p.target_topic}[{p.partition}]: replicated up to {p.replicated_to}"
                + ("" if p.source_end is None else f", source end {p.source_end}, {p.not_replicated:,} not replicated")
                + ("" if behind is None else f", {behind:.0f} s behind")
            )
        groups = self.plan.groups if self.plan else ()
        notes = {(g.group, f"{x.topic}:{x.partition}"): resume_note(x) for g in groups for x in g.partitions}
        for g, parts in sorted(self.resumes().items()):
            out += [
                f"  {g} would resume {tp.rsplit(':', 1)[0]}[{tp.rsplit(':', 1)[1]}] at {o}" + notes.get((g, tp), "")
                for tp, o in parts.items()
            ]
        out += [f"  {g}: left alone ({why})" for g, why in sorted(self.left_alone().items())]
        if self.plan is not None:
            out += [f"  {g}: CANNOT be read on the target: {e}" for g, e in sorted(self.plan.errors.items())]
        out.append(f"  verify from {self.verify_from}: {self.verify_verdict}")
        if self.verify is not None:
            out += ["    " + line for line in self.verify.lines()]
        for g, parts in sorted(self.shadow.items()):
            out.append(
                f"  shadow group {g} committed on {self.target!r}: " + ", ".join(f"{k}={v}" for k, v in parts.items())
            )
        if self.switch is not None:
            out += ["  " + line for line in self.switch.lines()]
        return out

    def record(self) -> dict[str, Any]:
        """The `drill` control record: what the status page shows of the last drill. Its RTO is the sum of its
        steps as rounded here: rounded apart, the steps of a drill added up to a millisecond more than its RTO."""
        steps = {k: round(v, 3) for k, v in self.steps.items()}
        return {
            "at": self.at_ms,
            "by": self.by,
            "plan": self.plan.id if self.plan else None,
            "ok": self.ok,
            "summary": self.summary(),
            "not_replicated": self.not_replicated,
            "seconds_behind": self.seconds_behind,
            "rto_s": round(sum(steps.values()), 3),
            "steps": steps,
            "groups": len(self.resumes()),
            "left_alone": sorted(self.left_alone()),
            "verify": self.verify_verdict,
            "verify_from": self.verify_from,
            "shadow_suffix": self.shadow_suffix,
            "shadow_groups": sorted(self.shadow),
            "client_switch": self.switch_verdict,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.record(),
            "flow": self.flow,
            "target": self.target,
            "state": self.state,
            "source_error": self.source_error,
            "blocked": self.plan.blocked if self.plan else None,
            "partitions": [
                {**asdict(p), "not_replicated": p.not_replicated, "seconds_behind": p.seconds_behind(self.at_ms)}
                for p in (self.plan.partitions if self.plan else ())
            ],
            "resumes": self.resumes(),
            "left_alone": self.left_alone(),
            "errors": dict(self.plan.errors) if self.plan else {},
            "verify_report": self.verify.to_dict() if self.verify else None,
            "verify_error": self.verify_error,
            "shadow": self.shadow,
            "client_switch_report": self.switch.to_dict() if self.switch else None,
        }


def drill(
    cfg: Config,
    flow: FlowConfig,
    groups: str | None = None,
    verify_from: str | None = None,
    shadow_suffix: str | None = None,
    by: str | None = None,
    via: str = "cli",
    log: Callable[[str], None] = lambda s: None,
) -> DrillReport:
    """Rehearse the failover of `flow` (module docstring). MirrorflowError for bad input (a bad
    regex, window or suffix, named as the door `via` calls it: before anything is read or written) or a
    flow already failed over."""
    given = checked(DRILL, {"groups": groups, "verify_from": verify_from, "shadow_suffix": shadow_suffix}, via)
    groups, verify_from, shadow_suffix = given["groups"], given["verify_from"], given["shadow_suffix"]
    report = DrillReport(flow.name, flow.target, by or whoami(), shadow_suffix=shadow_suffix)
    report.verify_from = verify_start(verify_from, report.at_ms, named("verify_from", via))
    log("plan: the failover's preflight (unplanned, no drain, no lease)")
    with report.timed("plan"):
        pre = plan_failover(cfg, flow, "unplanned", groups, drain=Drain(enabled=False), caller=Caller(dry_run=True))
    if pre.plan is None or pre.plan.moves_after:  # already failed over: its plans move groups left alone
        why = pre.note or f"flow {flow.name} was already failed over (failover {pre.plan and pre.plan.moves_after})"
        raise StateError(f"drill of {flow.name}: {why}; drill the flow that replicates now instead")
    report.plan, report.source_error = pre.plan, pre.source_error
    report.at_ms = pre.plan.at_ms
    with FlowClients(cfg, flow) as clients:
        shadows = _shadow_names(clients, report, named("shadow_suffix", via)) if shadow_suffix else {}
        log(f"verify from {report.verify_from}")
        with report.timed("verify"):
            try:
                report.verify = verify_flow(clients, None, report.verify_from, "latest")
            except MirrorflowError as exc:
                report.verify_error = str(exc)
        if shadows:
            log(f"shadow groups: committing {len(shadows)} on {flow.target!r}")
            with report.timed("shadow commit"):
                _commit_shadows(clients, report, shadows)
        _rehearse_switch(cfg, flow, report, via, log)
        report.state = flow_state(clients).describe()
        write_control(clients, "drill", report.record())
        summary = f"drill of the failover to {flow.target!r}, plan {report.plan.id}: nothing moved"
        record_operation(clients, "drill", report.by, via=via, summary=summary, figures=report.figures())
    return report


def _rehearse_switch(cfg: Config, flow: FlowConfig, report: DrillReport, via: str, log: Callable[[str], None]) -> None:
    """The client-switch steps as a dry run, each step's time in the RTO (ops.dr.client_switch)."""
    if not flow.props.get("client.switch.failover"):
        return
    log("client switch: the failover's steps as a dry run")
    try:
        plan_id = report.plan.id if report.plan else None
        report.switch = run_client_switch(cfg, flow, "failover", Caller(via, report.by, plan_id, dry_run=True))
    except ClientSwitchError as exc:
        report.switch = exc.report
    except MirrorflowError as exc:  # a step that cannot be imported: the failover would refuse it
        report.switch = SwitchReport(flow.name, "failover", flow.target, True, error=str(exc))
    for step in report.switch.steps:
        report.steps[f"client switch {step.name}"] = step.seconds


def _shadow_names(clients: FlowClients, report: DrillReport, key: str) -> dict[str, str]:
    """group -> its shadow group, checked before anything is written: a shadow may not be one of the
    flow's groups, another group existing on the target (only a previous drill's shadow may be
    reused), or have active members (an application of a previous drill still running). ConfigErrors
    name the suffix as `key`."""
    suffix = report.shadow_suffix or ""
    names = {g: g + suffix for g in report.resumes()}
    real = {g.group for g in report.plan.groups} if report.plan else set()
    previous = set((read_control(clients, "drill") or {}).get("shadow_groups") or [])
    admin, conn = clients.admin("target"), clients.connection("target")
    existing = set(list_groups(admin, conn, clients.admin_timeout))
    clash = sorted(s for s in names.values() if s in real or (s in existing and s not in previous))
    if clash:
        raise ConfigError(
            [
                (
                    key,
                    f"{suffix!r} names groups that exist on {clients.flow.target!r} and are not "
                    f"shadows of a drill: {', '.join(clash[:10])}; choose another suffix (nothing was committed)",
                )
            ]
        )
    described, errors = describe_target_groups(admin, conn, sorted(names.values()), clients.admin_timeout)
    busy = sorted(f"{g} ({t.members} member(s))" for g, t in described.items() if t.state not in SAFE_STATES)
    if busy or errors:
        raise StateError(
            f"drill of {clients.flow.name}: shadow groups cannot be committed (nothing was): "
            + "; ".join(
                [*(f"{b} active on the target" for b in busy), *(f"{g}: {e}" for g, e in sorted(errors.items()))]
            )
            + ". Stop the applications of the previous drill first."
        )
    return names


def _commit_shadows(clients: FlowClients, report: DrillReport, names: dict[str, str]) -> None:
    resumes = report.resumes()
    plans = [
        GroupSyncPlan(
            shadow,
            "shadow",
            0,
            "sync",
            tuple(PartitionSync(*_tp(key), offset, None, "write") for key, offset in sorted(resumes[group].items())),
        )
        for group, shadow in sorted(names.items())
    ]
    committed, errors = commit_group_plans(clients.admin("target"), plans, clients.admin_timeout)
    if errors:
        raise StateError(
            f"drill of {clients.flow.name}: committing the shadow groups failed for "
            + "; ".join(f"{g}: {e}" for g, e in sorted(errors.items()))
            + f" (committed: {', '.join(sorted(committed)) or 'none'}; the real groups were not touched)"
        )
    report.shadow = {names[g]: dict(sorted(resumes[g].items())) for g in sorted(names)}


def _tp(key: str) -> tuple[str, int]:
    """("topic", partition) of a "topic:partition" key."""
    topic, partition = key.rsplit(":", 1)
    return topic, int(partition)
