"""The failover record a failover's commit writes to the target (a control record, docs/state.md):
whether the flow is failed over, what a plan moving groups after it is bound to, the groups it
moved, and the note that says it was done. Read again by the preflight and the commit, and by the
failback: the source's ends when the plan was made (`source_ends`) and where the flow's last copy
lies on the target with its leader epoch (`last_copies`), to tell later whether the target still
holds what the flow wrote."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.reporting import iso
from mirrorflow.state.flow_state import flow_state, read_controls
from mirrorflow.state.records import Progress


def failed_over(clients: FlowClients) -> dict[str, Any] | None:
    """The flow's failover record when its failover stopped it, else None (`FlowState.left_by`: a
    person's stop after a round trip is no failover, and a failover of the flow then is a new one;
    taken as "already failed over", it committed nothing and said so, found by the model-based search)."""
    controls = read_controls(clients, ["failover", "flow-state"])  # one read of both records
    done = controls.get("failover")
    return dict(done) if done is not None and flow_state(clients, controls).left_by(done) else None


def record_id(done: Mapping[str, Any]) -> str:
    """What a plan moving groups after the failover is bound to: the failover's plan id (its time for a
    record written before plans had ids)."""
    return str(done.get("plan") or done.get("at"))


def moved_groups(done: Mapping[str, Any]) -> frozenset[str]:
    """The groups the failover committed (never planned again after it)."""
    return frozenset(done.get("groups") or {})


def done_note(clients: FlowClients, done: Mapping[str, Any]) -> str:
    return (
        f"nothing to do: flow {clients.flow.name} was already failed over to {clients.flow.target!r} at "
        f"{iso(int(done.get('at', 0)))} ({done.get('mode')})"
        + (f", plan {done['plan']}" if done.get("plan") else "")
        + (f" approved by {done['approved_by']}" if done.get("approved_by") else "")
        + " and is stopped"
    )


def offsets(record: Mapping[str, Any], name: str) -> dict[tuple[str, int], int]:
    """A failover record's "topic:partition" -> offset mapping, keyed by (topic, partition)."""
    out: dict[tuple[str, int], int] = {}
    for k, v in dict(record.get(name) or {}).items():
        topic, _, part = str(k).rpartition(":")
        out[(topic, int(part))] = int(v)
    return out


def last_copies(clients: FlowClients, progress: Mapping[tuple[str, int], Progress]) -> dict[str, list[int]]:
    """Per source partition "topic:partition", [offset, leader epoch] of the last record the flow wrote
    on the target (its progress's `tgt_end` - 1), read there (read_committed). Kafka stamps every batch
    with the epoch of the leader that appended it and epochs only grow, so a later record at or below
    that offset with a higher epoch means the partition was truncated and written again (an unclean
    leader election) since; none there (below the high watermark) means it was truncated or compacted.
    Partitions whose last copy is not found (compacted away, the topic gone) are left out."""
    filters = FlowFilters.for_flow(clients.flow)
    wanted: dict[str, dict[int, int]] = {}
    sources: dict[str, str] = {}
    for (t, p), prog in progress.items():
        if prog.tgt_end > 0 and prog.records > 0:
            sources[filters.remote_topic(t)] = t
            wanted.setdefault(filters.remote_topic(t), {})[p] = prog.tgt_end - 1
    out: dict[str, list[int]] = {}
    reader = clients.reader("target")
    try:
        for remote, lasts in sorted(wanted.items()):
            if not clients.partitions("target", remote):
                continue
            for m in reader.read(remote, lasts, stops={p: o + 1 for p, o in lasts.items()}):
                epoch = m.leader_epoch()
                if epoch is not None and m.offset() == lasts[m.partition()]:
                    out[f"{sources[remote]}:{m.partition()}"] = [m.offset(), int(epoch)]
    finally:
        clients.release(reader.consumer)
    return out
