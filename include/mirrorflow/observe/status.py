"""Each flow at a glance: per-partition progress and lag, read from the target's state topics.

The status page (mirrorflow_airflow/plugins/status.py) and `mirrorflow status` show this. It reads only
what replication itself wrote (the progress topic) plus the source's end offsets, so it is right
even when the Airflow database is gone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka.topic_admin import list_offsets, topic_ids
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.observe.rpo import RpoVerdict, measure, objective_s
from mirrorflow.replication.plan.planner import PartitionInput, identity_problem, source_offsets, stopped_message
from mirrorflow.reporting import as_dict
from mirrorflow.state.flow_state import flow_state, read_controls
from mirrorflow.state.lease import current_holder
from mirrorflow.state.records import Progress
from mirrorflow.state.store import StateStore


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    next: int  # next source offset to copy (-1: nothing copied yet)
    end: int  # source end (last stable offset); -1: unknown (see `note`)
    records: int
    lost: int
    note: str | None = None  # why the source end is unknown, or why the partition is stopped
    stopped: bool = False  # its state does not describe its topics any more (see planner.identity_problem)
    last_timestamp: int = -1  # source timestamp (ms) of the newest record copied
    target_topic: str = ""  # the remote topic (as the progress recorded it; "" in older state)
    ahead: int = 0  # offsets copied above `next` (its first hole): the lag leaves them out

    @property
    def lag(self) -> int | None:
        """Offsets not copied yet, holes included; None when the source end is unknown or the
        partition is stopped (never a made-up 0)."""
        return None if self.end < 0 or self.stopped else max(0, self.end - max(self.next, 0) - self.ahead)

    def lag_seconds(self, now_ms: int) -> float | None:
        """Seconds of lag (the RPO): 0 when nothing is behind; else the age of the newest copied
        record, an upper bound of the age of the oldest record not copied yet (reading that record
        would cost a fetch per partition). None when unknown."""
        lag = self.lag
        if lag is None:
            return None
        if lag == 0:
            return 0.0
        return max(0.0, (now_ms - self.last_timestamp) / 1000) if self.last_timestamp > 0 else None


@dataclass
class FlowStatus:
    flow: str
    enabled: bool
    exactly_once: bool
    partitions: list[PartitionStatus] = field(default_factory=list)
    last_copy_ms: int = 0
    error: str | None = None  # the state on the target could not be read
    source_error: str | None = None  # the source could not be asked for its ends
    running: str | None = None  # who holds the flow's lease (a run in progress) and since when
    state: str = "running"  # running | paused | stopped (state.flow_state), described
    next_step: str | None = None  # what gets the flow copying again (FlowState.next_step); None: running
    failed_over: bool = False  # stopped by its failover: the next step is the failback
    operations: list[str] = field(default_factory=list)  # the last failover, failback, takeover, in words
    rpo: RpoVerdict | None = None  # the RPO verdict (observe.rpo); None: no objective, or stopped

    @property
    def lag(self) -> int | None:
        lags = [p.lag for p in self.partitions]
        return None if any(x is None for x in lags) else sum(x for x in lags if x is not None)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    def to_dict(self) -> dict:
        d = as_dict(self, "lag", "records", parts={"partitions": ("lag",)})
        d["rpo"] = self.rpo.to_dict() if self.rpo is not None else None
        return d


def flow_status(cfg: Config, flow: FlowConfig) -> FlowStatus:
    """Progress (from the target) vs. source end for every partition the flow has copied. Errors are
    reported, not raised: an unreachable target is the flow's error; an unreachable source or a
    deleted source topic leaves the progress readable and the lag unknown."""
    status = FlowStatus(flow.name, flow.enabled, flow.exactly_once)
    with FlowClients(cfg, flow) as clients:
        try:
            progress = StateStore(clients).progress(timeout=30)
        except MirrorflowError as exc:
            status.error = str(exc)
            return status
        ends, notes = _source_ends(clients, sorted(progress), status)
        try:
            controls = read_controls(clients, ("flow-state", *OPERATIONS))  # one read for all of them
            state = flow_state(clients, controls)
            status.state, status.next_step = state.describe(), state.next_step(flow.name)
            status.failed_over = state.failed_over
            status.operations = operations({k: v for k, v in controls.items() if k in OPERATIONS})
            holder = current_holder(clients)
        except MirrorflowError as exc:
            status.running = f"unknown ({exc})"
        else:
            status.running = holder.run_line() if holder is not None else None
        stopped = _stopped(clients, progress, ends, status)
    for (topic, partition), p in sorted(progress.items()):
        key = (topic, partition)
        note = stopped.get(key) or notes.get(key)
        status.partitions.append(
            PartitionStatus(
                topic,
                partition,
                p.next,
                ends.get(key, -1),
                p.records,
                p.lost,
                note,
                key in stopped,
                p.last_timestamp,
                p.target_topic,
                sum(b - a for a, b in p.accounted() if a >= p.next),
            )
        )
        status.last_copy_ms = max(status.last_copy_ms, p.updated)
    if objective_s(flow) and flow.enabled and not status.state.startswith("stopped") and not status.failed_over:
        with FlowClients(cfg, flow) as clients:
            status.rpo = measure(clients, status.partitions)
    return status


def _stopped(
    clients: FlowClients,
    progress: dict[tuple[str, int], Progress],
    ends: dict[tuple[str, int], int],
    status: FlowStatus,
) -> dict[tuple[str, int], str]:
    """The partitions a run would stop (the planner's own check), with why. The source's topic IDs
    are asked only when the source answered for its ends; the target's always."""
    if not progress:
        return {}
    filters = FlowFilters.for_flow(clients.flow)
    remote = {t: filters.remote_topic(t) for t, _ in progress}
    try:
        src_ids = topic_ids(clients.admin("source"), clients.connection("source"), remote) if ends else {}
        tgt_ids = topic_ids(clients.admin("target"), clients.connection("target"), remote.values())
        written = [(remote[t], p) for (t, p), pr in progress.items() if pr.tgt_end >= 0 and remote[t] in tgt_ids]
        tgt_ends = list_offsets(
            clients.admin("target"), clients.connection("target"), written, OffsetSpec.latest(), committed=False
        )
    except MirrorflowError as exc:
        status.source_error = status.source_error or str(exc)
        return {}
    out = {}
    for (t, p), pr in progress.items():
        pi = PartitionInput(
            t,
            p,
            remote[t],
            0,
            ends.get((t, p), 1 << 62),
            pr,
            None,
            src_ids.get(t, ""),
            tgt_ids.get(remote[t], ""),
            tgt_ends.get((remote[t], p), -1),
        )
        why = identity_problem(pi)
        if why is not None:
            out[(t, p)] = stopped_message(why, clients.flow.name, t, remote[t])
    return out


def _source_ends(
    clients: FlowClients, keys: list[tuple[str, int]], status: FlowStatus
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], str]]:
    if not keys:
        return {}, {}
    try:
        counts = {t: clients.partitions("source", t) for t in {t for t, _ in keys}}
        notes = {(t, p): f"source topic {t!r} partition {p} no longer exists" for t, p in keys if p >= counts[t]}
        ends = source_offsets(clients, [k for k in keys if k not in notes], OffsetSpec.latest())
        return ends, notes
    except MirrorflowError as exc:
        status.source_error = str(exc)
        return {}, {k: "source unreachable" for k in keys}


def render_text(statuses: list[FlowStatus], now_ms: int | None = None) -> str:
    now_ms = now_ms or int(time.time() * 1000)
    lines = []
    for s in statuses:
        age = f"{(now_ms - s.last_copy_ms) / 1000:.0f}s ago" if s.last_copy_ms else "never"
        mode = "exactly-once" if s.exactly_once else "at-least-once"
        state = "" if s.error else f", {s.state}"  # unknown when the target cannot be read
        head = f"{s.flow}: {'enabled' if s.enabled else 'disabled'}{state}, {mode}"
        if s.error:
            lines.append(f"{head}, ERROR: {s.error}")
            continue
        lag = "unknown" if s.lag is None else s.lag
        lines.append(f"{head}, {s.records} records copied, lag {lag}, last copy {age}")
        if s.rpo is not None:
            lines.append(f"  {s.rpo.line()}")
        if s.next_step:
            lines.append(f"  next step: {s.next_step}")
        if s.running:
            lines.append(f"  running: {s.running}")
        if s.operations:
            lines.append(f"  operations: {'; '.join(s.operations)}")
        if s.source_error:
            lines.append(f"  source: {s.source_error}")
        for p in s.partitions:
            lost = f", {p.lost} lost to source retention" if p.lost else ""
            note = f" ({'STOPPED: ' if p.stopped else ''}{p.note})" if p.note else ""
            end = "?" if p.end < 0 else p.end
            plag = "?" if p.lag is None else p.lag
            lines.append(f"  {p.topic}-{p.partition}: next {p.next}, end {end}, lag {plag}{lost}{note}")
    return "\n".join(lines)


OPERATIONS = ("failover", "failback", "takeover", "drill")  # control records an operator should see on the status


def operations(records: dict[str, dict[str, Any]]) -> list[str]:
    """The flow's recorded disaster-recovery operations in words, oldest first."""
    out = []
    for name, r in sorted(records.items(), key=lambda kv: int(kv[1].get("at", 0))):
        when = datetime.fromtimestamp(int(r.get("at", 0)) / 1000, tz=UTC).isoformat(timespec="seconds")
        what = {
            "failover": f"{r.get('mode', '')} failover".strip(),
            "failback": f"started by the failback of {r.get('of', '?')}",
            "takeover": f"took over from MirrorMaker 2 ({r.get('partitions', '?')} partitions)",
            "drill": "last drill",
        }.get(name, name)
        by = f" by {r['by']}" if r.get("by") else ""
        if r.get("approved_by"):  # a failover: who approved its plan (the Airflow user, or the CLI's)
            by += f", plan {r.get('plan', '?')} approved by {r['approved_by']}"
        if name == "drill":  # ops.dr.drill: RPO, RTO, groups, verify
            by += f": {r.get('summary', '')}"
        out.append(f"{what} at {when}{by}")
    return out
