"""A failback's preflight (`plan_failback`): the checks that refuse bad input, then its plan read from
both clusters (`build_plan`, which the start reads again under the reverse flow's lease). Changes
nothing."""

from __future__ import annotations

import time
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, StateError
from mirrorflow.metadata.read_only import PROPERTY, check_target, is_read_only
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.dr.failback_divergence import read_divergence
from mirrorflow.ops.dr.failback_plan import FailbackPlan, Inverse, Key, divergence_from, seed_from
from mirrorflow.ops.dr.failback_report import FailbackReport
from mirrorflow.ops.dr.failback_seeds import TargetRead, plan_reseed, read_seeds
from mirrorflow.reporting import iso
from mirrorflow.state.flow_state import flow_state, read_control


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


def is_identity(flow: FlowConfig) -> bool:
    return FlowFilters.for_flow(flow).remote_topic("t") == "t"


def checked_reverse(cfg: Config, flow: FlowConfig, reseed: bool) -> FlowConfig:
    """The reverse flow, once the pair may fail back at all (ConfigError / StateError saying why not)."""
    rev = reverse_flow(cfg, flow)
    if is_identity(flow) != is_identity(rev):
        raise ConfigError(
            [
                (
                    f"flows.{rev.name}.replication.policy.class",
                    f"the reverse flow must use the same replication policy as {flow.name} (identity on one side "
                    "only would copy what the target got from the source back to it, under another name)",
                )
            ]
        )
    if is_read_only(flow) != is_read_only(rev):
        raise ConfigError(
            [
                (
                    f"flows.{rev.name}.{PROPERTY}",
                    f"the reverse flow must set {PROPERTY} as {flow.name} does ({str(is_read_only(flow)).lower()}): "
                    f"the failback makes {flow.source!r} the mirror, and it is read-only exactly when {rev.name} is",
                )
            ]
        )
    if not reseed and not flow.props["exactly.once"]:
        raise ConfigError(
            [
                (
                    f"flows.{flow.name}.exactly.once",
                    f"failback of {flow.name}: the flow copies at least once (exactly.once: false), so a batch it "
                    f"copied again after a failure may be on {flow.target!r} twice while its offset map names one "
                    "copy (or none, when the failure came before its entry was written); the failback would take "
                    f"the other copy for a record written on {flow.target!r} and put it on {flow.source!r} twice. "
                    f"A failback needs exactly-once copies: copy what was written on {flow.target!r} back by other "
                    f"means, or, with {flow.source!r} rebuilt empty, `--reseed` (it copies all of "
                    f"{flow.target!r}, as it is)",
                )
            ]
        )
    return rev


def plan_failback(
    cfg: Config, flow: FlowConfig, reseed: bool = False, accept_loss: bool = False, dry_run: bool = False
) -> FailbackReport:
    """The preflight: the report and its plan (`report.plan` None when there is nothing to do: the
    reverse flow was already started by a failback of this failover, `report.note` says so). Raises a
    MirrorflowError for bad input (no failover yet, flow not stopped, source unreachable, --reseed into
    a source that holds records or under the default policy, an at-least-once flow)."""
    rev = checked_reverse(cfg, flow, reseed)
    report = FailbackReport(flow.name, rev.name, is_identity(flow), dry_run, reseed=reseed)
    with FlowClients(cfg, flow) as fc, FlowClients(cfg, rev) as rc:
        record = failover_record(fc, rev.name)
        report.failover_at = int(record.get("at", 0))
        if already_done(rc, report):
            return report
        require_stopped(fc, rev.name)
        check_target(rc, probe=True)  # mirror.read.only: the side that becomes the mirror can carry the DENY
        report.show(build_plan(fc, rc, record, reseed, accept_loss)[0])
    return report


def failover_record(fc: FlowClients, rev: str) -> dict[str, Any]:
    """The failed-over flow's failover record (StateError when it was never failed over)."""
    flow = fc.flow
    record = read_control(fc, "failover")
    if record is None:
        raise StateError(
            f"flow {flow.name} was never failed over (no failover record on cluster {flow.target!r}): "
            f"failback starts {rev} from that record; run `mirrorflow failover --flow {flow.name}` first"
        )
    return record


def require_stopped(fc: FlowClients, rev: str) -> None:
    """StateError unless the failed-over flow is stopped (both running would copy records back and forth)."""
    state = flow_state(fc)
    if state.state != "stopped":
        raise StateError(
            f"flow {fc.flow.name} is {state.describe()}: a failback starts {rev}, and both running would copy "
            f"records back and forth; fail it over first (`mirrorflow failover --flow {fc.flow.name}`)"
        )


def already_done(rc: FlowClients, report: FailbackReport) -> bool:
    """A failback of the same failover started the reverse flow already: the report says so and shows it."""
    previous = read_control(rc, "failback")
    if previous is None or int(previous.get("failover_at", -1)) != report.failover_at:
        return False
    report.note = (
        f"nothing to do: {report.reverse} was already started by a failback of {report.flow} at "
        f"{iso(int(previous.get('at', 0)))}"
        + (f", plan {previous['plan']} approved by {previous.get('approved_by')}" if previous.get("plan") else "")
    )
    report.divergence = [divergence_from(d) for d in previous.get("divergence", [])]
    report.split_brain = [divergence_from(d) for d in previous.get("split_brain", [])]
    report.seeds = [seed_from(s) for s in previous.get("seeds", [])]
    return True


def build_plan(
    fc: FlowClients,
    rc: FlowClients,
    record: dict[str, Any],
    reseed: bool,
    accept_loss: bool,
    read_to: dict[str, int] | None = None,
) -> tuple[FailbackPlan, dict[Key, Inverse]]:
    """Read what a failback plan is made of (the module docstrings of failback_divergence and
    failback_seeds), and the inverse offset map its start writes."""
    identity = is_identity(fc.flow)
    at = int(record.get("at", 0))

    def plan(**parts: Any) -> FailbackPlan:
        return FailbackPlan(
            fc.flow.name,
            rc.flow.name,
            at,
            str(record.get("plan") or ""),
            identity,
            reseed=reseed,
            accept_loss=accept_loss,
            at_ms=int(time.time() * 1000),
            **parts,
        )

    if reseed:
        rebuilt = plan_reseed(rc, read_to)
        return plan(seeds=tuple(rebuilt.seeds), read_to=rebuilt.read_to), {}
    divergence, split, how = read_divergence(fc, record, at)
    kept = {(d.topic, d.partition) for d in (*divergence, *split)}
    target: TargetRead = read_seeds(fc, rc, record, identity, read_to, kept)
    made = plan(
        divergence=tuple(divergence),
        split_brain=tuple(split),
        seeds=tuple(target.seeds),
        losses=tuple(target.losses),
        inverse=target.digest(),
        read_to=dict(target.read_to),
        split_by=how,
    )
    return made, target.inverse
