"""The flow's operations history: one record per operation, appended, never compacted.

The control records (flow state, failover, failback, takeover) keep only the latest record of each
kind, which is what runs need; people asking "who paused this flow last Tuesday, and why?" need
every operation. So each pause, resume, stop, failover, failback, takeover, reseed (and drill, and
each client-switch step a failover or failback ran: ops.dr.client_switch) also appends one
`OperationRecord` to `mirrorflow.<flow.id>.operations.internal` on the TARGET: who, when, through
which door (cli, airflow, status-page), the reason, a one-line summary and the operation's key
figures. Nothing replication does reads it, so its retention (a year, and a size bound, see
state.state_topics) can only shorten the story people read, never change what is copied.
The promotion of a read-only mirror at a failover (metadata.read_only) appends a `promote` line.
Format: docs/state.md.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.errors import ClusterError, ConfigError, StateError
from mirrorflow.state.names import history_topic
from mirrorflow.state.state_writer import write_acknowledged

FORMAT_VERSION = 1
# the kinds the operations write (mirrorflow.ops.registry, which this layer cannot import:
# tests/unit/test_operation_registry.py fails when the two disagree)
KINDS = (
    "pause",
    "resume",
    "stop",
    "failover",
    "failback",
    "takeover",
    "reseed",
    "drill",
    "promote",
    "client-switch",
    "translate",
    "schemas",
)
MAX_TEXT = 2000  # characters of a reason or summary kept (a record stays far below the message size)


@dataclass(frozen=True)
class OperationRecord:
    """One operation on one flow, as people read it back."""

    flow: str
    kind: str  # one of KINDS
    at: int  # wall clock ms
    by: str  # who: an Airflow user name, or user@host pid N from the CLI
    via: str = ""  # the door: cli | airflow | status-page
    reason: str = ""  # why, as the operator gave it
    summary: str = ""  # what it did, in one line
    figures: dict[str, Any] = field(default_factory=dict)  # the operation's key numbers (partitions, groups, RPO...)

    def to_json(self) -> bytes:
        return json.dumps({"v": FORMAT_VERSION, **asdict(self)}, separators=(",", ":"), default=str).encode()

    @classmethod
    def from_json(cls, raw: bytes | None) -> OperationRecord | None:
        """None for a record this version cannot read (a newer format, garbage): skipped, not fatal."""
        try:
            d = json.loads(raw or b"")
            if int(d.get("v", 0)) != FORMAT_VERSION:
                return None
            return cls(
                str(d["flow"]),
                str(d["kind"]),
                int(d["at"]),
                str(d.get("by", "")),
                str(d.get("via", "")),
                str(d.get("reason", "")),
                str(d.get("summary", "")),
                dict(d.get("figures") or {}),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def when(self) -> str:
        return datetime.fromtimestamp(self.at / 1000, tz=UTC).isoformat(timespec="seconds")

    def details(self) -> str:
        """Why and what, in one line: the reason, the summary and the key figures."""
        words = [w for w in (self.reason, self.summary) if w]
        figures = ", ".join(f"{k} {v}" for k, v in self.figures.items())
        return "; ".join([*words, figures] if figures else words)

    def line(self) -> str:
        """`2027-01-15T08:00:00+00:00 pause by alice (airflow): maintenance window`"""
        via = f" ({self.via})" if self.via else ""
        by = f" by {self.by}" if self.by else ""
        details = self.details()
        return f"{self.when()} {self.kind}{by}{via}" + (f": {details}" if details else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_operation(
    clients: FlowClients,
    kind: str,
    by: str,
    *,
    via: str = "",
    reason: str = "",
    summary: str = "",
    figures: dict[str, Any] | None = None,
    at: int | None = None,
) -> OperationRecord:
    """Append one operation of `clients.flow` to its history on the target (idempotent producer,
    acks=all, written again up to broker.outage.max.seconds when unacknowledged). StateError when
    it cannot be written: an operation is never reported as recorded unless the target has it."""
    if kind not in KINDS:
        raise ConfigError([("kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")])
    record = OperationRecord(
        clients.flow.name,
        kind,
        int(time.time() * 1000) if at is None else at,
        by,
        via,
        reason[:MAX_TEXT],
        summary[:MAX_TEXT],
        dict(figures or {}),
    )
    topic = history_topic(clients.flow)
    try:
        if not clients.partitions("target", topic):
            from mirrorflow.state.state_topics import ensure_state_topics

            ensure_state_topics(clients)  # state topics from before the history existed
        write_acknowledged(
            clients, topic, [(kind.encode(), record.to_json(), record.at)], 0, f"writing the {kind} to the history"
        )
    except ClusterError as exc:
        raise StateError(f"cannot record the {kind} of flow {clients.flow.name} in its history: {exc}") from None
    return record


def read_history(clients: FlowClients, limit: int = 50) -> list[OperationRecord]:
    """The newest `limit` operations of `clients.flow`, oldest first ([] before the first one)."""
    if limit < 1:
        raise ConfigError([("limit", f"expected a positive number of operations, got {limit}")])
    topic = history_topic(clients.flow)
    if not clients.partitions("target", topic):
        return []
    reader = clients.reader("target")
    try:
        raw = [m.value() for m in reader.read(topic, {0: None}, clients.admin_timeout, last=limit)]
    finally:
        clients.release(reader.consumer)
    return [r for r in (OperationRecord.from_json(v) for v in raw) if r is not None]
