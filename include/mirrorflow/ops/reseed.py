"""Re-seeding a topic whose state no longer describes it: a recreated source or target topic, a
truncated target, a replication-policy change (see planner.identity_problem).

Such a partition is stopped by every run until it is re-seeded: nothing is guessed. A re-seed
writes, for every partition of the source topic as it is now, a new progress that starts at the
source's log start with an empty ledger, records the topics' current IDs and remote name, and opens
a new offset-map epoch (an entry with no range marks it; translation uses the newest epoch only).
The next run copies the source topic from its start into the remote topic: those records land
after whatever the remote topic already holds. Each partition's state is written in one
transaction with the partition's transactional.id (a copy still running for it is fenced), under
the flow's lease.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import StateError, TopicError
from mirrorflow.kafka.topic_admin import list_offsets, topic_ids
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.dr.failover_record import failed_over
from mirrorflow.ops.inputs import RESEED
from mirrorflow.params import checked, named
from mirrorflow.replication.plan.planner import PartitionInput, identity_problem, source_offsets, unexplained_firsts
from mirrorflow.state.history import record_operation
from mirrorflow.state.lease import local_owner, whoami
from mirrorflow.state.names import offset_map_topic, progress_topic
from mirrorflow.state.offset_map import MapEntry
from mirrorflow.state.records import Progress
from mirrorflow.state.run_lease import take_lease
from mirrorflow.state.state_topics import ensure_state_topics
from mirrorflow.state.state_writer import StateWriter, write_partition_state
from mirrorflow.state.store import StateStore


@dataclass(frozen=True)
class ReseedPartition:
    topic: str
    partition: int
    target_topic: str
    start: int  # the next run copies from here (the source's log start)
    end: int  # the source's end now
    target_end: int  # the remote partition's end: copied records land after it
    epoch: int  # the new offset-map epoch
    old_next: int  # the progress being replaced (-1: none)
    old_topic_id: str
    topic_id: str
    target_topic_id: str
    copied: int = 0  # records the flow copied of the partition under the state being replaced
    problem: str = ""  # why its state no longer describes the partition (planner.identity_problem; "": it does)

    def line(self) -> str:
        was = f"was at {self.old_next}" if self.old_next >= 0 else "no progress yet"
        why = f"; stopped: {self.problem}" if self.problem else ""
        return (
            f"{self.topic}[{self.partition}] -> {self.target_topic}[{self.partition}]: copy source offsets "
            f"{self.start}..{self.end} ({max(0, self.end - self.start):,} offsets) after target offset "
            f"{self.target_end}, map epoch {self.epoch} ({was}{why})"
        )


def plan_reseed(clients: FlowClients, topic: str) -> list[ReseedPartition]:
    """What re-seeding `topic` writes, per partition of the source topic as it is now."""
    flow = clients.flow
    filters = FlowFilters.for_flow(flow)
    if not filters.should_replicate_topic(topic):
        raise TopicError(f"flow {flow.name} does not replicate topic {topic!r} (topics / topics.exclude)")
    n = clients.partitions("source", topic, refresh=True)
    if n == 0:
        raise TopicError(f"topic {topic!r} does not exist on cluster {flow.source!r}")
    remote = filters.remote_topic(topic)
    m = clients.partitions("target", remote, refresh=True)
    if m < n:
        raise TopicError(
            f"target topic {remote!r} on cluster {flow.target!r} has {m} partitions, source {topic!r} has {n}: "
            "run `mirrorflow sync` first"
        )
    keys = [(topic, p) for p in range(n)]
    starts = source_offsets(clients, keys, OffsetSpec.earliest())
    ends = source_offsets(clients, keys, OffsetSpec.latest())
    target_ends = list_offsets(
        clients.admin("target"),
        clients.connection("target"),
        [(remote, p) for p in range(n)],
        OffsetSpec.latest(),
        committed=False,
    )
    src_id = topic_ids(clients.admin("source"), clients.connection("source"), [topic]).get(topic, "")
    tgt_id = topic_ids(clients.admin("target"), clients.connection("target"), [remote]).get(remote, "")
    progress = StateStore(clients).progress(keys)
    firsts = unexplained_firsts(clients, [(topic, p, remote) for p in range(n)], progress, {remote: m})
    out = []
    for p in range(n):
        old = progress.get((topic, p))
        now = PartitionInput(
            topic, p, remote, starts[(topic, p)], ends[(topic, p)], old, None, src_id, tgt_id,
            target_ends[(remote, p)], m, firsts.get((remote, p), -1),
        )  # fmt: skip
        out.append(
            ReseedPartition(
                topic,
                p,
                remote,
                starts[(topic, p)],
                ends[(topic, p)],
                target_ends[(remote, p)],
                (old.epoch + 1) if old is not None else 1,
                old.next if old is not None else -1,
                old.topic_id if old is not None else "",
                src_id,
                tgt_id,
                old.records if old is not None else 0,
                identity_problem(now) or "",
            )
        )
    return out


def needless(topic: str, flow: str, plan: list[ReseedPartition]) -> str | None:
    """Why re-seeding `topic` is refused without `force` (None: it is not): no partition's state needs it
    and the flow copied records of it, which a re-seed copies again (a misclick must not duplicate a topic)."""
    copied = sum(r.copied for r in plan)
    if any(r.problem for r in plan) or not copied:
        return None
    return (
        f"nothing to re-seed: the state of every partition of {topic!r} still describes it (no partition is "
        f"stopped), and a re-seed would copy the {copied:,} records flow {flow} copied of it again, after what the "
        "target holds (duplicates there). Re-seed a topic a run stopped (recreated, truncated, renamed), or force "
        "it if copying it again is what you want"
    )


def after_failover(flow: str) -> str:
    """Why a failed-over flow is never re-seeded, forced or not: its progress is what its failback reads to
    tell the records it copied to the target from those the applications wrote there after the failover; a
    re-seed's progress from the source's log start would make the failback copy the flow's own copies back."""
    source, target = flow.split("->", 1)
    return (
        f"flow {flow} was failed over to {target!r}: its progress tells its failback which records on {target!r} "
        f"it copied from {source!r}; a re-seed would replace that, and it copies nothing before the failback. "
        f"Nothing written. Next step: `mirrorflow failback --flow {flow}` (with `--reseed` when {source!r} was "
        "rebuilt empty), then re-seed the topic if a run of the flow stops it"
    )


def reseed(
    clients: FlowClients,
    topic: str | None,
    dry_run: bool = False,
    by: str | None = None,
    via: str = "cli",
    force: bool = False,
) -> list[ReseedPartition]:
    """Re-seed `topic` (see the module docstring); with `dry_run`, only say what it would write. The
    operations history names `by` (default: who runs this process) and the door. A topic no partition
    of which needs it is refused (StateError, nothing written: `needless`) unless `force`; a failed-over
    flow's always (`after_failover`)."""
    given = checked(RESEED, {"topic": topic, "force": force}, via)
    topic = given["topic"]
    flow = clients.flow
    ensure_state_topics(clients)
    lease = take_lease(clients, *local_owner("mirrorflow reseed"))
    try:
        if failed_over(clients) is not None:
            raise StateError(after_failover(flow.name))
        plan = plan_reseed(clients, topic)
        why = None if given["force"] else needless(topic, flow.name, plan)
        if why is not None:
            raise StateError(f"{why} ({named('force', via)})")
        if dry_run:
            return plan
        writer = StateWriter(
            flow,
            clients.partitions("target", progress_topic(flow)),
            clients.partitions("target", offset_map_topic(flow)),
        )
        for r in plan:
            _write(clients, writer, r)
        summary = f"re-seeded {topic}"
        record_operation(clients, "reseed", by or whoami(), via=via, summary=summary, figures=_figures(plan))
        return plan
    finally:
        lease.release()


def _write(clients: FlowClients, writer: StateWriter, r: ReseedPartition) -> None:
    progress = Progress(
        r.topic,
        r.partition,
        r.start,
        (),
        r.target_end,
        updated=int(time.time() * 1000),
        topic_id=r.topic_id,
        target_topic=r.target_topic,
        target_topic_id=r.target_topic_id,
        epoch=r.epoch,
    )
    marker = MapEntry(r.topic, r.partition, r.start, r.start, (), r.target_end, 0, r.epoch)
    write_partition_state(clients, writer, progress, marker)


def _figures(plan: list[ReseedPartition]) -> dict[str, Any]:
    """A re-seed's key figures for the operations history."""
    return {"partitions": len(plan), "offsets to copy": sum(max(0, r.end - r.start) for r in plan)}


def to_dicts(plan: list[ReseedPartition]) -> list[dict[str, Any]]:
    return [asdict(r) for r in plan]


def lines(flow: str, topic: str, plan: list[ReseedPartition], dry_run: bool) -> list[str]:
    """What a re-seed did (or would do), as the CLI prints it and the DAG logs it."""
    head = f"{'would re-seed' if dry_run else 're-seeded'} {topic} of flow {flow}; the next run copies:"
    return [head, *(f"  {r.line()}" for r in plan)]
