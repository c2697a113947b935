"""A failover's preflight (`plan_failover`): the drain (planned mode), then its plan read from the
target (`build_plan`, which the commit reads again), the source's ends for the RPO, the planned
mode's verify; on a flow already failed over, the plan moving the groups still to move. Changes no
group and no flow state."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, MirrorflowError, StateError
from mirrorflow.groups.checkpoint import CheckpointStore
from mirrorflow.groups.offset_sync import GroupSyncRun, sync_group_offsets
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.metadata.read_only import check_target, promote
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.dr.caller import CLI, Caller
from mirrorflow.ops.dr.failover_drain import PLANNED, Drain, drain_flow
from mirrorflow.ops.dr.failover_plan import FailoverPlan, PartitionRPO
from mirrorflow.ops.dr.failover_record import done_note, failed_over, moved_groups, record_id
from mirrorflow.ops.dr.failover_report import FailoverReport
from mirrorflow.ops.dr.lease_takeover import held_by, take_over_flow
from mirrorflow.ops.verify.verify import verify_flow
from mirrorflow.replication.plan.planner import source_partitions
from mirrorflow.schemas.replicate import has_registries, missing_schemas
from mirrorflow.state.lease import whoami
from mirrorflow.state.store import StateStore

MODES = ("planned", "unplanned")


def plan_failover(
    cfg: Config,
    flow: FlowConfig,
    mode: str = "unplanned",
    groups: str | None = None,
    *,
    drain: Drain = PLANNED,
    take_over: bool = False,
    caller: Caller = CLI,
) -> FailoverReport:
    """The preflight: drain (planned mode, unless a dry run or `drain.enabled` is False; more than
    `drain.max_lag` offsets left, default 0, stop it with MirrorflowError), then the report and its plan
    (planned mode: verified). Changes no group and no flow state. On a flow already failed over, with
    `groups`: the plan moving the groups still to move (no drain, no verify); `report.plan` is None when
    there is nothing to do (`report.note` says so and names the groups still to move). A run holding the
    flow's lease or another deployment owning it stops it (LeaseError / DeploymentConflictError naming
    `--take-over`) unless `take_over`: then the plan takes the flow over at its commit (a planned drain
    takes it over first, as `caller.via` and this process)."""
    dry_run, via, log, max_lag = caller.dry_run, caller.via, caller.log, drain.max_lag
    if mode not in MODES:
        raise ConfigError([("--mode", f"expected planned or unplanned, got {mode!r}")])
    if max_lag is not None and (isinstance(max_lag, bool) or not isinstance(max_lag, int) or max_lag < 0):
        raise ConfigError([("--max-lag", f"expected a number of offsets >= 0, got {max_lag!r}")])
    pattern = group_pattern(groups)
    report = FailoverReport(flow.name, flow.target, mode, dry_run)
    draining = drain.runs_in(mode, dry_run)
    with FlowClients(cfg, flow) as clients:
        done = failed_over(clients)
        if done is not None:
            if not dry_run:  # mirror.read.only: finish a promotion an interrupted commit left
                report.promoted = promote(clients, whoami(), via)
            _plan_after(clients, report, done, groups, pattern)
            return report
        check_target(clients, probe=False)  # mirror.read.only: the commit must be able to lift the DENY
        report.take_over = held_by(clients, take_over, dry_run)
        if take_over and draining:  # the drain's runs need the flow: take it over now
            lease, report.take_over = take_over_flow(clients, whoami(), via, "planned failover's drain")
            lease.release()
    if draining:
        drain_flow(cfg, flow, report, drain, log)
    with FlowClients(cfg, flow) as clients:
        report.plan = replace(build_plan(clients, mode, groups, pattern, report), take_over=take_over)
        if mode == "planned":
            # what was copied since the last verify that passed (its 'verified up to' marks), recorded
            # for the next one: bounded by what changed, not by the flow's history
            report.verify = verify_flow(clients, since_last=True, record=not dry_run, by=whoami())
            report.plan = replace(report.plan, verify_ok=report.verify.ok)
    if has_registries(cfg, flow):  # schemas the target's registry lacks are lost too
        report.schemas_missing, report.schemas_note = missing_schemas(cfg, flow)
    return report


def build_plan(
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
            ends = _source_ends(clients, keys, mode)
        except MirrorflowError as exc:
            if mode == "planned":
                raise
            report.source_error = str(exc)
    run = _group_plans(clients, pattern, exclude)
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
        source_ends={f"{t}:{p}": end for (t, p), end in sorted(ends.items())},
    )


def _group_plans(clients: FlowClients, pattern: re.Pattern[str] | None, exclude: frozenset[str]) -> GroupSyncRun:
    """What group sync would commit at the failover (a dry run), for the groups `pattern` matches but `exclude`."""
    store = CheckpointStore.load(clients)
    chosen = (
        None
        if pattern is None and not exclude
        else [g for g in store.groups() if (pattern is None or pattern.fullmatch(g)) and g not in exclude]
    )
    return sync_group_offsets(
        clients.cfg, clients.flow, store, groups=chosen, dry_run=True, clients=clients, failover=True
    )


# Unplanned: the source is presumed lost and its ends only tell the RPO, so it is asked briefly
# (a dead cluster otherwise costs the connection check's 10 s, and a half-dead one the outage bound).
LOST_SOURCE_PROBE_S = 5.0


def _source_ends(clients: FlowClients, keys: list[tuple[str, int]], mode: str) -> dict[tuple[str, int], int]:
    """The source's ends (last stable offsets) of `keys` and of every other source partition the flow's
    filter matches now (never copied yet): the failover record keeps them, so the failback tells the
    records the source held at this moment (the divergence) from those it accepted after (the split
    brain) by their offsets, not by timestamps producers choose. Unplanned: asked briefly, since the
    source is presumed lost."""
    bound = clients.outage_timeout if mode == "planned" else LOST_SOURCE_PROBE_S
    admin = clients.admin("source", check_timeout=min(bound, 10.0))
    tps = sorted({*keys, *((t, p) for t, p, _ in source_partitions(clients.flow, admin, bound))})
    return list_offsets(admin, clients.connection("source"), tps, OffsetSpec.latest(), True, bound)


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
    plan = replace(build_plan(clients, mode, groups, pattern, None, moved_groups(done)), moves_after=record_id(done))
    note = done_note(clients, done)
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


def group_pattern(groups: str | None) -> re.Pattern[str] | None:
    if not groups:
        return None
    try:
        return re.compile(groups)
    except re.error as exc:
        raise ConfigError([("--groups", f"not a valid regular expression ({exc}): {groups!r}")]) from None
