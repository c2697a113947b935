"""A flow's operating state: running, paused or stopped (Strimzi's `state`; MM2's pause/stop/resume).

* `paused`: no copy and no topic sync; checkpoints, group offset sync and heartbeats go on (a paused
  flow keeps its consumer groups ready for a failover).
* `stopped`: nothing runs (no copy, no sync, no checkpoint, no heartbeat); nothing is removed.
  A failover leaves its flow stopped.

The state is a record in the flow's progress topic on the TARGET, under a control key the
progress readers skip, so the CLI, every DAG and the status page agree without the Airflow
database. The config may declare a state too (the flow property `state`, what `config import`
maps Strimzi's connector `state` to); the stronger of the two applies (stopped > paused > running).
"""

from __future__ import annotations

import json
import time
import uuid
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.errors import ClusterError, ConfigError, StateError
from mirrorflow.kafka.log_reader import LogReader
from mirrorflow.state.history import record_operation
from mirrorflow.state.names import STATE_READER, dag_id, progress_topic, reader_group
from mirrorflow.state.state_writer import write_acknowledged

STATES = ("running", "paused", "stopped")
# which steps each state lets run
ALLOWED = {
    "running": {"copy", "sync", "checkpoint"},
    "paused": {"checkpoint"},
    "stopped": set(),
}
STEP_NAMES = {"copy": "copying", "sync": "topic sync", "checkpoint": "checkpoints and group sync"}


@dataclass(frozen=True)
class FlowState:
    state: str = "running"
    reason: str = ""
    by: str = ""
    at: int = 0  # ms
    declared_in: str = "target"  # target (set by `mirrorflow flow ...`) | config (the `state` property) | standby
    cause: str = ""  # "failover": stopped by the flow's failover (ops.dr.failover), not by a person's stop
    rev: str = ""  # the identity of the stored record it was read from ("": none; see `revision`)

    @property
    def failed_over(self) -> bool:
        return self.state == "stopped" and self.cause == "failover"

    def left_by(self, failover: Mapping[str, Any] | None) -> bool:
        """Whether this is the state the failover record `failover` left: the record outlives its
        failover (after a round trip the flow runs again with it, and a person may stop it then; that
        stop is no failover). `cause: failover` says so, or, written by a release before causes, a stop
        whose reason names the record's plan."""
        if failover is None:
            return False
        plan = failover.get("plan")
        older = self.state == "stopped" and not self.cause and bool(plan) and f"plan {plan} " in self.reason
        return self.failed_over or older

    def allows(self, step: str) -> bool:
        return step in ALLOWED[self.state]

    def describe(self) -> str:
        if self.state == "running":
            return "running"
        where = {"config": "in the config (state property)", "standby": "in the config (standby: true)"}.get(
            self.declared_in, "on the target"
        )
        since = (
            f" since {datetime.fromtimestamp(self.at / 1000, tz=UTC).isoformat(timespec='seconds')}" if self.at else ""
        )
        by = f" by {self.by}" if self.by else ""
        why = f": {self.reason}" if self.reason else ""
        return f"{self.state}{by}{since} ({where}){why}"

    def next_step(self, flow_name: str) -> str | None:
        """What the operator does to get the flow copying again, through every door (None: it is
        running). After a failover that is the failback, never a resume: a resume would start
        copying from the lost source again while the applications write to the target."""
        if self.state == "running":
            return None
        source, target = flow_name.split("->", 1)
        flow_id, reverse = f"{source}-{target}", f"{target}->{source}"
        if self.declared_in == "config":
            return f"remove the flow's `state: {self.state}` from the config (a resume cannot lift it)"
        if self.declared_in == "standby":
            return (
                f"none while {reverse} runs: this flow starts with the failback of {reverse} "
                f"(`mirrorflow failback --flow {reverse}`), after {reverse} was failed over"
            )
        if self.failed_over:
            return (
                f"fail back once {source} is back: `mirrorflow failback --flow {flow_name}` or the DAG "
                f"{dag_id('failback', flow_id)} (it starts {reverse}, so what was written on {target} reaches "
                f"{source}); not a resume. {flow_name} itself runs again after a planned failover of {reverse} "
                "and its failback"
            )
        return (
            f"resume it when ready: `mirrorflow flow resume --flow {flow_name}`, the DAG {dag_id('control', flow_id)} "
            "(action resume) or the Resume button on the status page"
        )

    def skip_reason(self, flow_name: str, step: str) -> str | None:
        """Why `step` must not run now, and the next step (None: it may run)."""
        if self.allows(step):
            return None
        return f"flow {flow_name} is {self.describe()}: no {STEP_NAMES[step]}. Next step: {self.next_step(flow_name)}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("rev")
        return d


def revision(value: Mapping[str, Any] | None) -> str:
    """The identity of a stored control record: its `id` (older releases wrote none: its time)."""
    if not value:
        return ""
    return str(value.get("id") or f"at:{value.get('at', 0)}")


def applies(current: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Whether record `new` replaces `current` when the log is read in order: a conditional record
    (`after`: the revision its writer read) only over that revision; any other always (pure). Two
    writers that read the same state and race each other: the first one's record applies, the
    second's is ignored by every reader, and its writer, reading back, says it was not applied."""
    if new is None or "after" not in new:
        return True
    return str(new["after"]) == revision(current)


def control_key(name: str) -> bytes:
    """The key of a flow-wide control record (flow state, failover) in the progress topic: progress
    readers skip it (it names no topic and partition)."""
    return json.dumps({"control": name}, separators=(",", ":")).encode()


def _partition(key: bytes, n: int) -> int:
    return zlib.crc32(key) % max(1, n)


def read_control(clients: FlowClients, name: str) -> dict[str, Any] | None:
    """The latest control record `name` of the flow on the target (None: there is none)."""
    return read_controls(clients, [name]).get(name)


def read_controls(clients: FlowClients, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The latest control record of each of `names` that the flow has on the target, in one read."""
    topic = progress_topic(clients.flow)
    n = clients.partitions("target", topic)
    if not n or not names:
        return {}
    by_key = {control_key(name): name for name in names}
    # read_uncommitted: control records are never written in a transaction, and the copy units'
    # transactions share their partitions; a crashed copy's open transaction (or records a killed
    # broker left pending, see state.fencing) would otherwise block this read, which every run makes
    # before it takes the lease and can clean that up (the chaos test's run timed out here)
    reader: LogReader = clients.reader("target", group=reader_group(clients.flow, STATE_READER), committed=False)
    found: dict[str, dict[str, Any] | None] = {}
    try:
        parts = sorted({_partition(key, n) for key in by_key})
        for m in reader.read(topic, parts, timeout=60, keys=set(by_key)):
            name = by_key[m.key()]
            value = None if m.value() is None else json.loads(m.value())
            if applies(found.get(name), value):
                found[name] = value
    except ValueError as exc:
        what = " or ".join(names)
        raise StateError(f"flow {clients.flow.name}: unreadable {what} record on the target: {exc}") from None
    finally:
        clients.release(reader.consumer)
    return {name: value for name, value in found.items() if value is not None}


def write_control(clients: FlowClients, name: str, value: dict[str, Any]) -> None:
    """Record control record `name` on the target (idempotent producer, acks=all). A write the
    target does not acknowledge (a broker restarting, a leadership move) is written again, up to
    broker.outage.max.seconds; StateError past it or on any other failure: never reported as done
    unless acknowledged. (Writing the same record twice is harmless: the latest one counts.)"""
    from mirrorflow.state.state_topics import ensure_state_topics

    ensure_state_topics(clients)
    topic, key = progress_topic(clients.flow), control_key(name)
    n = clients.partitions("target", topic)
    record = (key, json.dumps({"v": 1, **value}).encode(), int(time.time() * 1000))
    try:
        write_acknowledged(
            clients, topic, [record], _partition(key, n), f"writing the {name} of flow {clients.flow.name}"
        )
    except ClusterError as exc:
        raise StateError(f"cannot record the {name} of flow {clients.flow.name}: {exc}") from None


def stored_state(clients: FlowClients, controls: Mapping[str, dict[str, Any]] | None = None) -> FlowState:
    """The state recorded on the target (running when none is); from `controls` when the caller has
    read the control records already (read_controls with "flow-state" among the names)."""
    d = read_control(clients, "flow-state") if controls is None else controls.get("flow-state")
    if d is None:
        return FlowState()
    try:
        return FlowState(
            str(d["state"]),
            str(d.get("reason", "")),
            str(d.get("by", "")),
            int(d.get("at", 0)),
            cause=str(d.get("cause", "")),
            rev=revision(d),
        )
    except (KeyError, ValueError) as exc:
        raise StateError(f"flow {clients.flow.name}: unreadable flow state record on the target: {exc}") from None


def flow_state(clients: FlowClients, controls: Mapping[str, dict[str, Any]] | None = None) -> FlowState:
    """The state that applies: the stronger of the config's `state` and the target's record."""
    stored = stored_state(clients, controls)
    if clients.flow.props.get("standby") and not stored.at:  # never started by a failback
        reverse = f"{clients.flow.target}->{clients.flow.source}"
        why = f"standby: the failback path of {reverse}, started by `mirrorflow failback --flow {reverse}`"
        return FlowState("stopped", why, declared_in="standby")
    declared = str(clients.flow.props.get("state", "running"))
    if STATES.index(declared) > STATES.index(stored.state):
        return FlowState(declared, "declared in the config", declared_in="config")
    return stored


# the operation that moves a flow into each state, as the history names it (state.history)
OPERATION = {"paused": "pause", "running": "resume", "stopped": "stop"}


def set_flow_state(
    clients: FlowClients,
    state: str,
    reason: str = "",
    by: str = "",
    *,
    via: str = "",
    cause: str = "",
    summary: str = "",
    expect: FlowState | None = None,
) -> FlowState:
    """Record `state` on the target (idempotent producer, acks=all) and append the pause/resume/stop to
    the flow's operations history (state.history) with who, through which door (`via`) and why, so every
    door (CLI, DAG, status page, a failback) leaves the same trail. `cause` "failover": the flow's failover
    stopped it (its next step is the failback, not a resume); the failover's own history entry says so,
    not a stop of its own.
    `summary`: what the history line says it did beyond the state (e.g. a forced resume).
    `expect`: the stored state the caller decided on (a pause, resume or stop): the record applies
    only over it, so a failover that committed in between is never overwritten (StateError: nothing
    changed); without it (a failover, a failback: under the flow's lease) it applies whatever came
    before. Returns the state that applies. The state is written first: a history write the target
    does not acknowledge is a StateError that says the state itself was recorded."""
    if state not in STATES:
        raise ConfigError([("state", f"expected one of {', '.join(STATES)}, got {state!r}")])
    at = int(time.time() * 1000)
    rev = uuid.uuid4().hex[:16]
    value = {"state": state, "reason": reason, "by": by, "at": at, "id": rev, **({"cause": cause} if cause else {})}
    if expect is not None:
        value["after"] = expect.rev
    write_control(clients, "flow-state", value)
    if expect is not None:
        now = stored_state(clients)
        if now.rev != rev:  # another change came between our read and our write: it stands
            raise StateError(
                f"flow {clients.flow.name} changed state while this {OPERATION[state]} was being recorded "
                f"(it is {now.describe()} now): nothing changed. Look at the flow again before acting"
            )
    if cause != "failover":
        try:
            record_operation(clients, OPERATION[state], by, via=via, reason=reason, summary=summary, at=at)
        except StateError as exc:
            raise StateError(f"flow {clients.flow.name} is now {state}, but {exc}") from None
    return flow_state(clients)
