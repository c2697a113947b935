"""Group offset sync (`sync.group.offsets.enabled`): commit checkpointed offsets on the target.

Like MirrorCheckpointTask.syncGroupOffset (Kafka's `connect/mirror`), with two deliberate
differences that make it safe by construction instead of by broker rejection:

* a group with active members on the target is left alone and reported (MM2 sends the commit and
  lets the broker reject it); a group in an unknown state is left alone too;
* every partition is compared with the target's committed offset, also for groups MM2 treats as
  "new" after a failed describe, so a target offset never moves backwards.

The checkpoints come from the checkpoints topic on the target (the CheckpointStore), so this step
needs nothing but the target cluster. A dry run (the plan people read: a failover's, a drill's, the
status page's) also says per partition at most how many records the group reads again when it
resumes at its checkpoint (`PartitionSync.reread`, from the offset map on the target): 0 where the
checkpoint is exact, more where the map's bound made it an earlier position.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from mirrorflow.clients import FlowClients, flow_clients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.groups.checkpoint_store import CheckpointStore
from mirrorflow.groups.group_offsets import fetch_group_offsets
from mirrorflow.groups.translation import load_maps, upstream_of
from mirrorflow.kafka.connection import ClusterConnection, kafka_error
from mirrorflow.kafka.retry import Outage, StepRetry, backoff_s, failure, transient_error
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.mm2.formats import Checkpoint
from mirrorflow.reporting import Report
from mirrorflow.state.flow_state import flow_state

# Target group states as this module sees them.
EMPTY = "empty"  # exists, no members: safe to commit
MISSING = "missing"  # does not exist (DEAD / GROUP_ID_NOT_FOUND): safe, the commit creates it
ACTIVE = "active"  # has members (Stable, rebalancing): left alone
UNKNOWN = "unknown"  # state could not be told: left alone
SAFE_STATES = (EMPTY, MISSING)


@dataclass(frozen=True)
class TargetGroup:
    """A consumer group as the target cluster describes it."""

    group: str
    state: str
    members: int = 0
    offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)  # committed target offsets


@dataclass(frozen=True)
class PartitionSync:
    topic: str  # downstream topic
    partition: int
    checkpoint_offset: int
    target_offset: int | None  # None: the group has no offset for this partition on the target
    action: str  # write | skip-equal | skip-ahead | skip-active | skip-no-topic
    metadata: str = ""
    # at most this many records already read (on the source) are read again from the checkpoint:
    # 0 exact; None the offset map does not place the checkpoint (MirrorMaker 2 wrote it, or an older
    # mirrorflow pruned the map there); a sync that commits (not a dry run) does not ask, and says 0
    reread: int | None = 0


@dataclass(frozen=True)
class GroupSyncPlan:
    group: str
    state: str
    members: int
    action: str  # sync | up-to-date | left-alone
    partitions: tuple[PartitionSync, ...]
    reason: str = ""

    @property
    def writes(self) -> list[PartitionSync]:
        return [p for p in self.partitions if p.action == "write"]


def plan_group_sync(
    target: TargetGroup,
    checkpoints: Mapping[tuple[str, int], Checkpoint],
    target_partitions: set[tuple[str, int]] | None = None,
    rereads: Mapping[tuple[str, int], int | None] | None = None,
) -> GroupSyncPlan:
    """Decide, per partition, whether to commit the checkpointed offset on the target (pure).

    With `target_partitions` (what exists on the target), partitions of missing topics are
    skipped (`skip-no-topic`) instead of failing the whole commit. `rereads`: per partition, what
    resuming at its checkpoint reads again (PartitionSync.reread)."""
    again = rereads or {}
    if target.state not in SAFE_STATES:
        why = (
            f"{target.members} active member(s) on the target"
            if target.state == ACTIVE
            else "its state on the target could not be determined"
        )
        parts = tuple(
            PartitionSync(
                t, p, c.downstream_offset, target.offsets.get((t, p)), "skip-active", c.metadata, again.get((t, p), 0)
            )
            for (t, p), c in sorted(checkpoints.items())
        )
        return GroupSyncPlan(target.group, target.state, target.members, "left-alone", parts, why)
    parts_l: list[PartitionSync] = []
    for (t, p), c in sorted(checkpoints.items()):
        cur = target.offsets.get((t, p))
        if cur is not None and cur < 0:
            cur = None  # reset to -1 by a non-Java client: treat as no offset (KAFKA-15607)
        if target_partitions is not None and (t, p) not in target_partitions:
            action = "skip-no-topic"
        elif cur is None or cur < c.downstream_offset:
            action = "write"
        elif cur == c.downstream_offset:
            action = "skip-equal"
        else:
            action = "skip-ahead"  # never move a target offset backwards
        parts_l.append(PartitionSync(t, p, c.downstream_offset, cur, action, c.metadata, again.get((t, p), 0)))
    parts = tuple(parts_l)
    action = "sync" if any(x.action == "write" for x in parts) else "up-to-date"
    return GroupSyncPlan(target.group, target.state, target.members, action, parts)


def classify_state(state: Any, members: int) -> str:
    """Our view of a ConsumerGroupState: members always mean active."""
    if members > 0:
        return ACTIVE
    if state == ConsumerGroupState.EMPTY:
        return EMPTY
    if state == ConsumerGroupState.DEAD:
        return MISSING
    if state in (
        ConsumerGroupState.STABLE,
        ConsumerGroupState.PREPARING_REBALANCING,
        ConsumerGroupState.COMPLETING_REBALANCING,
    ):
        return ACTIVE
    return UNKNOWN


@dataclass
class GroupSyncRun(Report):
    """What one group offset sync did: per group, what was committed on the target and what was kept."""

    flow: str
    plans: list[GroupSyncPlan] = field(default_factory=list)
    committed: dict[str, int] = field(default_factory=dict)  # group -> partitions written
    errors: dict[str, str] = field(default_factory=dict)
    skipped_reason: str | None = None
    state_skip: str | None = None  # the flow's state stopped the sync: why, and the next step (FlowState)

    def lines(self) -> list[str]:
        if self.skipped_reason:
            return [f"{self.flow}: group offset sync skipped: {self.skipped_reason}"]
        out = [
            f"{self.flow}: group offset sync on the target: {sum(self.committed.values())} offset(s) committed "
            f"for {len(self.committed)} group(s)"
        ]
        for p in self.plans:
            if p.action == "left-alone":
                out.append(f"  {p.group}: left alone ({p.reason})")
                continue
            line = f"  {p.group}: {len(p.writes)} partition(s) committed" if p.writes else f"  {p.group}: up to date"
            ahead = [x for x in p.partitions if x.action == "skip-ahead"]
            if ahead:
                line += f"; kept {len(ahead)} target offset(s) that are ahead: " + ", ".join(
                    f"{x.topic}[{x.partition}] {x.target_offset} > {x.checkpoint_offset}" for x in ahead
                )
            no_topic = [x for x in p.partitions if x.action == "skip-no-topic"]
            if no_topic:
                line += "; not on the target (run `mirrorflow sync`): " + ", ".join(
                    f"{x.topic}[{x.partition}]" for x in no_topic
                )
            out.append(line)
        return out

    def brief(self) -> dict[str, Any]:
        return {"committed": self.committed, "left_alone": [p.group for p in self.plans if p.action == "left-alone"]}

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "skipped_reason": self.skipped_reason,
            "errors": self.errors,
            "committed": self.committed,
            "groups": [{**asdict(p), "partitions": [asdict(x) for x in p.partitions]} for p in self.plans],
        }


def describe_target_groups(
    admin: Any, conn: ClusterConnection, groups: list[str], timeout: float
) -> tuple[dict[str, TargetGroup], dict[str, str]]:
    """State, member count and committed offsets of `groups` on the target. A group whose describe
    fails transiently (its coordinator moving or loading, a connection reset) is asked again, with
    a backoff, up to `timeout`; then that group's error."""
    described: dict[str, TargetGroup] = {}
    errors: dict[str, str] = {}
    pending, deadline, failures = list(groups), time.monotonic() + timeout, 0
    while pending:
        retry = []
        futures: dict[str, Future] = admin.describe_consumer_groups(pending, request_timeout=timeout)
        for g, fut in futures.items():
            try:
                d = fut.result(timeout + 5)
            except KafkaException as exc:
                err = kafka_error(exc)
                code = err.code() if err is not None else None
                if code == KafkaError.GROUP_ID_NOT_FOUND:
                    described[g] = TargetGroup(g, MISSING)
                elif code in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN):
                    raise failure(conn, exc) from None
                elif transient_error(err) and time.monotonic() < deadline:
                    retry.append(g)
                else:
                    errors[g] = f"describe failed: {err.str() if err is not None else exc}"
                continue
            members = len(d.members or [])
            described[g] = TargetGroup(g, classify_state(d.state, members), members)
        pending = retry
        if pending:
            failures += 1
            time.sleep(backoff_s(failures))
    need = [g for g, t in described.items() if t.state in SAFE_STATES]
    # their coordinators answered the DescribeGroups above: not asked a second time
    offsets, off_errors = fetch_group_offsets(admin, conn, need, timeout, described=True)
    for g, err in off_errors.items():
        errors[g] = f"cannot read its target offsets: {err}"
        described.pop(g, None)
    for g, offs in offsets.items():
        t = described[g]
        described[g] = TargetGroup(g, t.state, t.members, {(o.topic, o.partition): o.offset for o in offs})
    return described, errors


@dataclass
class Commits:
    """What committing plans on the target did: partitions written per group, each group's error,
    and the groups whose commit failed for a reason a broker coming back cures (`again`: the
    exception), which a sync that rides out outages describes, plans and commits once more."""

    committed: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    again: dict[str, BaseException] = field(default_factory=dict)


def send_commits(admin: Any, plans: Iterable[GroupSyncPlan], timeout: float) -> Commits:
    """Commit the `write` partitions of `plans` on the target, exactly as planned, all requests in
    flight at once (see Commits)."""
    out = Commits()
    futures: dict[str, tuple[GroupSyncPlan, Future]] = {}
    for plan in plans:
        if plan.writes:
            tps = [TopicPartition(p.topic, p.partition, p.checkpoint_offset, p.metadata or "") for p in plan.writes]
            fut = admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(plan.group, tps)], request_timeout=timeout
            )[plan.group]
            futures[plan.group] = (plan, fut)
    for g, (plan, fut) in futures.items():
        try:
            res = fut.result(timeout + 5)
        except KafkaException as exc:
            err = kafka_error(exc)
            code = err.code() if err is not None else None
            if code in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS):
                out.errors[g] = "members joined the group on the target during the sync; left alone"
            elif transient_error(err):
                out.again[g] = exc
            else:
                out.errors[g] = commit_error(exc)
            continue
        failed = [tp for tp in res.topic_partitions if tp.error]
        if failed and all(transient_error(tp.error) for tp in failed):
            out.again[g] = KafkaException(failed[0].error)
            continue
        if failed:
            out.errors[g] = "commit failed for " + ", ".join(
                f"{tp.topic}[{tp.partition}]: {tp.error.str()}" for tp in failed
            )
        out.committed[g] = len(plan.writes) - len(failed)
    return out


def commit_group_plans(
    admin: Any, plans: Iterable[GroupSyncPlan], timeout: float
) -> tuple[dict[str, int], dict[str, str]]:
    """Commit the `write` partitions of `plans` on the target, exactly as planned (a failover commits
    the plan that was approved). Returns (group -> partitions written, group -> error)."""
    done = send_commits(admin, plans, timeout)
    done.errors.update({g: commit_error(exc) for g, exc in done.again.items()})
    return done.committed, done.errors


def commit_error(exc: BaseException) -> str:
    err = kafka_error(exc)
    return f"commit failed: {err.str() if err is not None else exc}"


def sync_group_offsets(
    cfg: Config,
    flow: FlowConfig,
    store: CheckpointStore | None = None,
    groups: Iterable[str] | None = None,
    dry_run: bool = False,
    clients: FlowClients | None = None,
    failover: bool = False,
) -> GroupSyncRun:
    """Commit the latest checkpoints of the flow's groups on the target where that is safe. A
    `failover` commits whatever sync.group.offsets.enabled and the flow state say (same safety).
    A sync that commits rides out broker outages up to broker.outage.max.seconds (StepRetry);
    a dry run reports the first failure."""
    with flow_clients(cfg, flow, clients) as c:
        return _sync(c, store, groups, dry_run, failover)


def _sync(
    clients: FlowClients,
    store: CheckpointStore | None,
    groups: Iterable[str] | None,
    dry_run: bool,
    failover: bool = False,
) -> GroupSyncRun:
    flow = clients.flow
    run = GroupSyncRun(flow.name)
    if not failover and not flow.props.get("sync.group.offsets.enabled", False):
        run.skipped_reason = "sync.group.offsets.enabled=false"
        return run
    if not flow.enabled:
        run.skipped_reason = "the flow is disabled (enabled=false)"
        return run
    steps = StepRetry(f"group offset sync of flow {flow.name}", 0 if dry_run else clients.outage_timeout)
    if not failover:
        state_skip = steps.run(
            flow.target, "reading the flow's state", lambda: flow_state(clients).skip_reason(flow.name, "checkpoint")
        )
        if state_skip:
            run.skipped_reason = run.state_skip = state_skip
            return run
    if store is None:
        store = steps.run(flow.target, "reading the checkpoints", lambda: CheckpointStore.load(clients))
    wanted = _wanted(flow, store, groups)
    if not wanted:
        return run
    rereads = _rereads(clients, wanted) if dry_run else {}
    _check_and_commit(clients, steps, run, wanted, rereads, dry_run)
    return run


def _wanted(
    flow: FlowConfig, store: CheckpointStore, groups: Iterable[str] | None
) -> dict[str, dict[tuple[str, int], Checkpoint]]:
    """The checkpoints to sync per group: the flow's groups (of `groups`, if given), only on topics the
    flow replicates now (the topic filter may have changed since), decided once per downstream topic."""
    filters = FlowFilters.for_flow(flow)
    names = [
        g
        for g in (store.groups() if groups is None else sorted(set(groups) & set(store.groups())))
        if filters.should_replicate_group(g)
    ]
    verdicts: dict[str, bool] = {}

    def replicated(downstream: str) -> bool:
        if downstream not in verdicts:
            u = upstream_of(filters.policy, flow.source, downstream)
            verdicts[downstream] = u is not None and filters.should_replicate_topic(u)
        return verdicts[downstream]

    wanted: dict[str, dict[tuple[str, int], Checkpoint]] = {}
    for g in names:
        cps = {k: c for k, c in store.for_group(g).items() if replicated(k[0])}
        if cps:
            wanted[g] = cps
    return wanted


def _check_and_commit(
    clients: FlowClients,
    steps: StepRetry,
    run: GroupSyncRun,
    wanted: Mapping[str, Mapping[tuple[str, int], Checkpoint]],
    rereads: Mapping[str, Mapping[tuple[str, int], int | None]],
    dry_run: bool,
) -> None:
    """Describe the groups on the target, plan each, and (unless `dry_run`) commit the plans. A group
    whose commit failed transiently is described, planned and committed again (never committed
    unchecked: it may have members now, or the commit may have landed), until the outage bound."""
    admin, conn, timeout, target = (
        clients.admin("target"),
        clients.connection("target"),
        clients.admin_timeout,
        clients.flow.target,
    )
    plans: dict[str, GroupSyncPlan] = {}
    tried: dict[str, set[tuple[str, int, int]]] = {}  # commits sent whose outcome is unknown
    outage = Outage(steps.bound_s)
    todo = sorted(wanted)
    while todo:
        described, errors = steps.run(
            target, f"describing {len(todo)} group(s)", partial(describe_target_groups, admin, conn, todo, timeout)
        )
        existing = steps.run(target, "listing the topics", lambda: _target_partitions(admin, conn, timeout))
        run.errors.update(errors)
        now = {g: plan_group_sync(described[g], wanted[g], existing, rereads.get(g)) for g in todo if g in described}
        plans.update(now)
        if dry_run:
            break
        done = send_commits(admin, now.values(), timeout)
        run.errors.update(done.errors)
        for g, plan in now.items():
            landed = {(x.topic, x.partition, x.checkpoint_offset) for x in plan.partitions if x.action == "skip-equal"}
            earlier = len(tried.get(g, set()) & landed)  # a commit whose answer was lost, found landed
            if g in done.committed or earlier:
                run.committed[g] = done.committed.get(g, 0) + earlier
        for g in done.again:
            tried.setdefault(g, set()).update((x.topic, x.partition, x.checkpoint_offset) for x in now[g].writes)
        todo = sorted(done.again)
        if todo:
            first = todo[0]
            if steps.bound_s <= 0:
                run.errors.update({g: commit_error(done.again[g]) for g in todo})
                break
            outage.wait(target, f"{steps.operation}: committing the offsets of group {first!r}", done.again[first])
    run.plans = [plans[g] for g in sorted(plans)]


def _target_partitions(admin: Any, conn: ClusterConnection, timeout: float) -> set[tuple[str, int]]:
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise failure(conn, exc) from None
    return {(t, p) for t, m in md.topics.items() if m.error is None for p in m.partitions}


def checkpoint_rereads(
    cfg: Config, flow: FlowConfig, group: str, clients: FlowClients | None = None
) -> dict[tuple[str, int], int | None]:
    """(downstream topic, partition) -> at most how many records `group` reads again when it resumes
    at its checkpoint there (None: the offset map does not place it): from the target alone."""
    with flow_clients(cfg, flow, clients) as c:
        cps = CheckpointStore.load(c).for_group(group)
        return _rereads(c, {group: cps}).get(group, {}) if cps else {}


def _rereads(
    clients: FlowClients, wanted: Mapping[str, Mapping[tuple[str, int], Checkpoint]]
) -> dict[str, dict[tuple[str, int], int | None]]:
    """group -> (downstream topic, partition) -> at most how many records resuming at the checkpoint
    reads again (None: the offset map does not place the checkpoint's upstream offset)."""
    flow = clients.flow
    policy = FlowFilters.for_flow(flow).policy
    source_of = {t: upstream_of(policy, flow.source, t) for cps in wanted.values() for t, _ in cps}
    maps = load_maps(clients, {(u, p) for cps in wanted.values() for t, p in cps if (u := source_of[t]) is not None})
    out: dict[str, dict[tuple[str, int], int | None]] = {}
    for g, cps in wanted.items():
        for (t, p), c in cps.items():
            up = source_of[t]
            pm = maps.get((up, p)) if up is not None else None
            if pm is None or pm.translate(c.upstream_offset).target_offset is None:
                out.setdefault(g, {})[(t, p)] = None
            else:
                out.setdefault(g, {})[(t, p)] = pm.rereads(c.upstream_offset, c.downstream_offset)
    return out
