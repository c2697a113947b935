"""The failover record a failover's commit writes to the target (a control record, docs/state.md):
whether the flow is failed over, what a plan moving groups after it is bound to, the groups it
moved, and the note that says it was done. Read again by the preflight and the commit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.reporting import iso
from mirrorflow.state.flow_state import flow_state, read_control


def failed_over(clients: FlowClients) -> dict[str, Any] | None:
    """The flow's failover record when the flow is failed over (stopped with a record), else None."""
    done = read_control(clients, "failover")
    return dict(done) if done is not None and flow_state(clients).state == "stopped" else None


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
