"""Planning a replication run: which source offset ranges to copy, cut into work units.

`plan_units` is pure: from each source partition's offsets (log start, end = last stable offset)
and its committed progress (or the flow's initial position) it plans the ranges not yet covered
by the ledger, cut into units of at most `unit.max.records`, grouped into at most `tasks.max`
tasks: a partition's units go to the task of its SLOT (state.task_slots: the flow's partitions
dealt round-robin, MM2's assignment), in order, so every attempt at a partition commits with the
same transactional producer.
`unit.max.bytes` cannot be known before reading (Kafka has no cheap per-range size), so the
copier enforces it: a unit that reaches it stops early and the next run plans the rest.

`gather_inputs` is the thin I/O part: one metadata call, the task layout (its generation, recorded
on the target), batched `AdminClient.list_offsets` calls (all partitions in one request each) and
one read of the progress topic.

The plan is advisory: each unit re-reads its progress before copying.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import ConfigError
from mirrorflow.kafka.retry import retry_call
from mirrorflow.kafka.topic_admin import list_offsets, topic_ids
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.replication.plan.run_plan import Plan, Unit
from mirrorflow.state.fencing import ensure_layout, fence_open_transactions
from mirrorflow.state.lease import FlowLease
from mirrorflow.state.names import progress_topic
from mirrorflow.state.offset_map import subtract_ranges
from mirrorflow.state.records import Progress
from mirrorflow.state.state_drift import first_committed, fresh_remotes, only_kept, unexplained_remote
from mirrorflow.state.store import StateStore
from mirrorflow.state.task_slots import TaskLayout, deal, provisional, read_layout

Key = tuple[str, int]


@dataclass(frozen=True)
class PartitionInput:
    topic: str
    partition: int
    target_topic: str
    log_start: int
    end: int  # high watermark, or the last stable offset when reading committed
    progress: Progress | None = None
    initial: int | None = None  # start offset from the initial position (when there is no progress)
    topic_id: str = ""  # the source topic's ID
    target_topic_id: str = ""  # the remote topic's ID ("": it does not exist yet)
    target_end: int = -1  # the remote partition's high watermark (-1: not asked)
    target_partitions: int = -1  # partitions of the remote topic on the target (0: missing; -1: not asked)
    target_first: int = -1  # without progress: the remote partition's first committed record (-1: none, not asked)


def plan_units(
    inputs: Iterable[PartitionInput],
    max_records: int,
    parallelism: int,
    flow_name: str = "A->B",
    partition_limit: int | None = None,
    slot_of: dict[Key, int] | None = None,
) -> tuple[list[list[Unit]], list[dict]]:
    """Pure planning: (tasks of units, per-partition summary).

    At most `parallelism` tasks: a partition's units go, together and in order, to the task of its
    slot (`slot_of`; default: the inputs dealt round-robin, state.task_slots.deal), tasks in slot
    order. One task copies all its partitions with one transactional producer, many partitions'
    batches per transaction, so a partition with one new record costs a share of a transaction,
    not a Spark job. `partition_limit`: at most this many offsets of each partition in this run
    (the next run continues from where it stopped).
    """
    max_records = max(1, int(max_records))
    inputs = sorted(inputs, key=lambda x: (x.topic, x.partition))
    slot_of = slot_of if slot_of is not None else deal([(pi.topic, pi.partition) for pi in inputs], parallelism)
    per_partition: list[list[Unit]] = []
    summary: list[dict] = []
    for pi in inputs:
        units, entry = _partition_units(pi, max_records, flow_name, partition_limit)
        summary.append(entry)
        if units:
            per_partition.append(units)
    return group_by_slot(per_partition, slot_of), summary


def group_by_slot(per_partition: list[list[Unit]], slot_of: dict[Key, int]) -> list[list[Unit]]:
    """The units of each slot that has any, as one task per slot (in slot order); each partition's
    units stay together and in order."""
    by_slot: dict[int, list[Unit]] = {}
    for units in per_partition:
        by_slot.setdefault(slot_of[(units[0].topic, units[0].partition)], []).extend(units)
    return [by_slot[s] for s in sorted(by_slot)]


def task_slots(tasks: list[list[Unit]], slot_of: dict[Key, int]) -> list[int]:
    """The slot of each task (the slot of its first unit's partition: a task holds one slot)."""
    return [slot_of[(t[0].topic, t[0].partition)] for t in tasks]


def identity_problem(pi: PartitionInput) -> str | None:
    """Why the partition's committed progress cannot describe the topics as they are now: a source
    or target topic recreated (new topic ID), the remote topic renamed (policy change), a source end
    below the progress, a target end below what the flow wrote. None: it can."""
    prog = pi.progress
    if prog is None or prog.next < 0:
        return unexplained_remote(pi.topic, pi.partition, pi.target_topic, prog, pi.target_first)
    why = prog.identity_problem(pi.topic_id, pi.target_topic, pi.target_topic_id)
    t = f"{pi.topic}[{pi.partition}]"
    if why is None and pi.end < prog.high:
        why = (
            f"source partition {t} ends at offset {pi.end}, below the {prog.high} already replicated "
            "(the topic was recreated or truncated)"
        )
    if why is None and 0 <= pi.target_end < prog.tgt_end:
        why = (
            f"target partition {pi.target_topic}[{pi.partition}] ends at offset {pi.target_end}, below the "
            f"{prog.tgt_end} this flow wrote (the topic was truncated or recreated)"
        )
    return why


def stopped_message(why: str, flow_name: str, topic: str, target_topic: str) -> str:
    return (
        f"{why}: replication of this partition is stopped. Re-seed the topic with `mirrorflow reseed "
        f"--flow {flow_name} --topic {topic}` (copies the source topic from its start into "
        f"{target_topic!r} under a new offset-map epoch)"
    )


def _summary(
    pi: PartitionInput, start: int, units: list[Unit], todo: list[tuple[int, int]] | None = None, **extra: Any
) -> dict[str, Any]:
    """The report's view of one planned partition (`extra`: `waiting` or `stopped` with why).
    `todo`: the source ranges it owns and has not copied, up to the source end planned from (the
    report's lag counts what of them the run did not copy, holes included)."""
    prog = pi.progress
    has_progress = prog is not None and prog.next >= 0
    gone = sum(min(b, pi.log_start) - a for a, b in todo or [] if a < pi.log_start)
    if todo is not None:
        extra.setdefault("uncopied", sum(b - a for a, b in todo))
        extra.setdefault("planned_end", pi.end)
    return {
        "topic": pi.topic,
        "partition": pi.partition,
        "target_topic": pi.target_topic,
        "log_start": pi.log_start,
        "end": pi.end,
        "start": start,
        "planned": sum(u.records for u in units),
        "units": len(units),
        "lost_expected": gone if has_progress else 0,
        "has_progress": has_progress,
        **extra,
    }


def _partition_units(
    pi: PartitionInput, max_records: int, flow_name: str, limit: int | None = None
) -> tuple[list[Unit], dict]:
    """The units of one partition (ranges the ledger does not cover, cut at max_records) and its summary."""
    prog = pi.progress
    has_progress = prog is not None and prog.next >= 0
    if 0 <= pi.target_partitions <= pi.partition:  # a new topic or partition the sync has not created yet
        what = (
            f"target topic {pi.target_topic!r} does not exist yet"
            if pi.target_partitions == 0
            else f"target topic {pi.target_topic!r} has {pi.target_partitions} partitions"
        )
        sync = f"the sync DAG or `mirrorflow sync --flow {flow_name}` creates it"
        start = prog.next if has_progress and prog is not None else -1
        return [], _summary(pi, start, [], lost_expected=0, waiting=f"waiting for sync: {what} ({sync})")
    why = identity_problem(pi)
    if why is not None:
        stopped = stopped_message(why, flow_name, pi.topic, pi.target_topic)
        return [], _summary(pi, prog.next if prog is not None else -1, [], lost_expected=0, stopped=stopped)
    if has_progress and prog is not None:
        # from the first offset not accounted for: the holes below the highest copied offset first
        start, covered = prog.next, prog.accounted()
    else:
        start, covered = (pi.initial if pi.initial is not None else pi.log_start), []
    units: list[Unit] = []
    left = limit if limit is not None else 1 << 62
    todo = subtract_ranges(start, pi.end, covered) if pi.end > start else []
    for a, b in todo:
        s = a
        while s < b and left > 0:
            e = min(b, s + max_records, s + left)
            left -= e - s
            units.append(
                Unit(pi.topic, pi.partition, pi.target_topic, s, e, pi.log_start, pi.topic_id, pi.target_topic_id)
            )
            s = e
    if not units and not has_progress and pi.initial is not None and start >= pi.end:
        # a fresh partition whose initial position is its end (latest, or a timestamp past the last
        # record): an empty unit anchors the progress there, so the next run continues from it
        units.append(
            Unit(pi.topic, pi.partition, pi.target_topic, start, start, pi.log_start, pi.topic_id, pi.target_topic_id)
        )
    return units, _summary(pi, start, units, todo)


# -- gathering the inputs (I/O) -------------------------------------------------------------------
def parse_initial_position(value: str) -> tuple[str, int | None]:
    """earliest | latest | a timestamp (ms since epoch or ISO-8601) -> (kind, timestamp_ms)."""
    v = str(value).strip()
    if v in ("earliest", "latest"):
        return v, None
    if v.lstrip("-").isdigit():
        return "timestamp", int(v)
    try:
        dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError([("initial.position", f"expected earliest, latest or a timestamp, got {value!r}")]) from None
    return "timestamp", int(dt.timestamp() * 1000)


def source_partitions(flow: FlowConfig, admin: Any, bound_s: float = 30.0) -> list[tuple[str, int, str]]:
    """(topic, partition, target topic) of every source partition the flow replicates (a source
    broker restart is waited out for up to `bound_s`: a run passes broker.outage.max.seconds)."""
    filters = FlowFilters.for_flow(flow)
    md = retry_call(lambda: admin.list_topics(timeout=min(bound_s, 30.0)), flow.source, "listing topics", bound_s)
    out = []
    for name, t in md.topics.items():
        if t.error or not filters.should_replicate_topic(name):
            continue
        remote = filters.remote_topic(name)
        out += [(name, p, remote) for p in sorted(t.partitions)]
    return sorted(out)


def source_offsets(
    clients: FlowClients, tps: list[tuple[str, int]], spec: Any, committed: bool = True
) -> dict[tuple[str, int], int]:
    """Batched offsets of source partitions (`committed`: last stable offsets)."""
    return list_offsets(
        clients.admin("source"), clients.connection("source"), tps, spec, committed, clients.outage_timeout
    )


def target_partitions(clients: FlowClients) -> dict[str, int]:
    """Partitions of every topic on the target, from one metadata request (asking FlowClients per
    remote topic would send one request per partition of each topic the target does not have yet:
    10,000 new partitions took 10 s)."""
    admin, conn = clients.admin("target"), clients.connection("target")
    try:
        md = admin.list_topics(timeout=clients.admin_timeout)
    except KafkaException as exc:
        raise conn.describe_failure(exc) from None
    return {t: len(m.partitions) for t, m in md.topics.items() if m.error is None and m.partitions}


def ran_before(clients: FlowClients) -> bool:
    """Whether the flow was copied before this run (state.fencing.ensure_layout asks it once, when
    the flow has no task layout yet): its progress topic holds records, or the oldest record of its
    lease topic is not by the run holding the lease now."""
    topic = progress_topic(clients.flow)
    n = clients.partitions("target", topic)
    if n:
        tps = [(topic, p) for p in range(n)]
        ends = list_offsets(
            clients.admin("target"),
            clients.connection("target"),
            tps,
            OffsetSpec.latest(),
            False,
            clients.outage_timeout,
        )
        if any(e > 0 for e in ends.values()):
            return True
    lease = FlowLease(clients, "history", "history", 1)
    try:
        holder = lease.read_holder()
    finally:
        lease.close_reader()
    return lease.first is not None and (holder is None or lease.first.owner != holder.owner)


def wait_for_clusters(clients: FlowClients, bound_s: float | None = None) -> None:
    """Both clusters of the flow answer. A broker restarting as a run starts is waited for up to
    `bound_s` (default broker.outage.max.seconds; 0: one try), then one BrokerUnavailableError
    naming the cluster and the last error; a refused login or TLS handshake fails at once."""
    bound = clients.outage_timeout if bound_s is None else bound_s
    for side in ("target", "source"):
        retry_call(partial(clients.admin, side), clients.alias(side), "connecting", bound)


@dataclass
class Inputs:
    """What a plan is made from: every partition of the flow, and the task slots to copy them with."""

    partitions: list[PartitionInput]
    layout: TaskLayout
    slot_of: dict[Key, int]


def gather_inputs(clients: FlowClients, progress: dict[tuple[str, int], Progress] | None = None) -> Inputs:
    """Everything `plan_units` needs, read in a few batched calls (see the module docstring).
    Without `progress` (a run under the flow's lease) the task layout is ensured (a new generation
    recorded when the deal changed, state.fencing.ensure_layout) and open copy transactions are
    fenced before the progress is read; with it (a dry run) nothing is written."""
    flow = clients.flow
    bound = clients.outage_timeout  # a broker restart during planning is waited out, as during the copy
    # the run's first call to the source: a source broker restarting is waited for, not failed
    admin = retry_call(lambda: clients.admin("source"), flow.source, "connecting", bound)
    parts = source_partitions(flow, admin, bound)
    tps = [(t, p) for t, p, _ in parts]
    # the reads that do not depend on each other go at once (each a round trip or a few; in a row
    # they were half of an idle run's plan); the layout, fencing and progress read stay in order
    with ThreadPoolExecutor(max_workers=5, thread_name_prefix="mirrorflow-plan") as pool:
        starts_f = pool.submit(source_offsets, clients, tps, OffsetSpec.earliest())
        ends_f = pool.submit(source_offsets, clients, tps, OffsetSpec.latest())
        src_ids_f = pool.submit(topic_ids, admin, clients.connection("source"), {t for t, _, _ in parts}, bound)
        tgt_ids_f = pool.submit(
            topic_ids, clients.admin("target"), clients.connection("target"), {r for _, _, r in parts}, bound
        )
        tgt_parts_f = pool.submit(target_partitions, clients)
        if progress is None:
            prior = read_layout(clients)  # None: this is the flow's first run (or it ran before slots)
            layout = ensure_layout(clients, parts, lambda: ran_before(clients), current=prior)
            fence_open_transactions(clients, tps, layout)
            progress = StateStore(clients).progress()
            started = prior is not None or bool(progress)
        else:
            layout = provisional(tps, flow.parallelism)
            started = bool(progress) or read_layout(clients) is not None
        starts, ends = starts_f.result(), ends_f.result()
        src_ids, tgt_ids, tgt_parts = src_ids_f.result(), tgt_ids_f.result(), tgt_parts_f.result()
    fresh = [tp for tp in tps if tp not in progress or progress[tp].next < 0]
    initial = _initial_positions(clients, fresh, started, starts, ends)
    tgt_ends, firsts = _on_target(clients, parts, progress, tgt_ids, tgt_parts)
    partitions = [
        PartitionInput(
            t,
            p,
            remote,
            starts[(t, p)],
            ends[(t, p)],
            progress.get((t, p)),
            initial.get((t, p)),
            src_ids.get(t, ""),
            tgt_ids.get(remote, ""),
            tgt_ends.get((remote, p), -1),
            tgt_parts.get(remote, 0),
            firsts.get((remote, p), -1),
        )
        for t, p, remote in parts
    ]
    return Inputs(partitions, layout, deal(tps, layout.slots))


def _on_target(
    clients: FlowClients,
    parts: list[tuple[str, int, str]],
    progress: dict[tuple[str, int], Progress],
    tgt_ids: dict[str, str],
    tgt_parts: dict[str, int],
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """Per remote (topic, partition): the end of those the flow copied to, and `unexplained_firsts`."""
    copied = [
        (remote, p)
        for t, p, remote in parts
        if (t, p) in progress and progress[(t, p)].tgt_end >= 0 and remote in tgt_ids and p < tgt_parts.get(remote, 0)
    ]
    tgt_ends = list_offsets(
        clients.admin("target"),
        clients.connection("target"),
        copied,
        OffsetSpec.latest(),
        False,
        clients.outage_timeout,
    )
    return tgt_ends, unexplained_firsts(clients, parts, progress, tgt_parts)


def unexplained_firsts(
    clients: FlowClients,
    parts: list[tuple[str, int, str]],
    progress: Mapping[tuple[str, int], Progress],
    tgt_parts: Mapping[str, int],
) -> dict[tuple[str, int], int]:
    """Per remote (topic, partition) of `parts` without progress, the offset of its first committed record
    (`PartitionInput.target_first`, which `identity_problem` stops): its state was lost, or another writer
    filled it. Not asked of an at-least-once flow (its copies commit records before their progress), and
    not one that holds only what a failback kept apart there (a partition its source got afterwards)."""
    if not clients.flow.exactly_once:
        return {}
    firsts = first_committed(clients, fresh_remotes(parts, progress, tgt_parts))
    for k in only_kept(clients, firsts):
        del firsts[k]
    return firsts


def _initial_positions(
    clients: FlowClients,
    fresh: list[tuple[str, int]],
    started: bool,
    starts: dict[tuple[str, int], int],
    ends: dict[tuple[str, int], int],
) -> dict[tuple[str, int], int]:
    """Where each partition without progress starts. initial.position is where the flow's first run starts
    what exists then; a partition or topic that appears later (`started`) is copied from its beginning, as
    MirrorMaker 2 does (also when it waited for the sync to create its remote copy)."""
    kind, ts = parse_initial_position(clients.flow.props["initial.position"])
    if started or kind == "earliest":
        return {tp: starts[tp] for tp in fresh}
    if kind == "latest":
        return {tp: ends[tp] for tp in fresh}
    if not fresh:
        return {}
    found = source_offsets(clients, fresh, OffsetSpec.for_timestamp(ts))
    # no record at or after the timestamp: start at the end
    return {tp: (off if off >= 0 else ends[tp]) for tp, off in found.items()}


def new_plan(clients: FlowClients, inputs: Inputs, tasks: list[list[Unit]], summary: list[dict[str, Any]]) -> Plan:
    """A plan of the flow of `clients` copying `tasks` with the task slots of `inputs`."""
    path = str(clients.cfg.path) if clients.cfg.path else None
    return Plan(clients.flow.name, path, tasks, summary, layout=inputs.layout, slots=task_slots(tasks, inputs.slot_of))


def make_plan(clients: FlowClients, topics: str | None = None, partition_limit: int | None = None) -> Plan:
    """Plan the flow's next run from what the clusters hold now. `topics`: only the flow's source
    topics this regex fully matches; `partition_limit`: at most this many offsets per partition."""
    flow = clients.flow
    inputs = gather_inputs(clients)
    parts = inputs.partitions
    if topics:
        subset = re.compile(topics)
        parts = [pi for pi in parts if subset.fullmatch(pi.topic)]
    tasks, summary = plan_units(
        parts, flow.props["unit.max.records"], flow.parallelism, flow.name, partition_limit, inputs.slot_of
    )
    return new_plan(clients, inputs, tasks, summary)
