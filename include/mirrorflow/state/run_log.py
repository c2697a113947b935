"""The flow's run log: a summary of each replication run and checkpoint pass, kept on the target.

Why on the target: a run started from the CLI and one started by a DAG must both show on the status
page and in the Prometheus exposition, which run in Airflow's API server and read only the target
(the Airflow database knows the DAG runs only). One record per run in
`mirrorflow.<flow.id>.runs.internal` (one partition, kept a week): small enough to read the newest
few hundred for a chart. Writing it is best effort: a run whose copy committed is not failed because
its summary could not be written (the copy's state is already exact; the summary is for people),
though a write the target does not acknowledge is written again up to broker.outage.max.seconds.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from confluent_kafka import KafkaException

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError
from mirrorflow.state.names import runs_topic
from mirrorflow.state.state_writer import write_acknowledged

log = logging.getLogger(__name__)
FORMAT_VERSION = 1
MAX_ERRORS = 10  # per record: the first errors in plain words, the full report is the run's log


@dataclass
class PartitionRun:
    """What one run did on one partition (only partitions that copied, lost or failed something)."""

    topic: str
    partition: int
    target_topic: str
    status: str
    records: int = 0
    byte_count: int = 0
    lag: int | None = 0  # None: unknown (the source's end could not be read)
    lost: int = 0
    latency_ms: tuple[int, int, int] = (-1, -1, -1)  # replication-latency-ms min, avg, max
    age_ms: tuple[int, int, int] = (-1, -1, -1)  # record-age-ms min, avg, max


@dataclass
class GroupCheckpoints:
    """What one checkpoint pass emitted for one group: its checkpoint latency (MM2's
    checkpoint-latency-ms: acknowledged minus checkpoint record timestamp) per partition."""

    group: str
    topic: str  # the downstream (remote) topic, as MM2 tags it
    partition: int
    latency_ms: int


@dataclass
class RunRecord:
    kind: str  # replicate | checkpoint
    at: int  # wall clock ms when the run ended
    ok: bool
    duration_s: float = 0.0
    copy_phase_s: float = 0.0
    records: int = 0
    byte_count: int = 0
    lag: int | None = 0  # None: unknown (the source's end could not be read)
    lost: int = 0
    failed_units: int = 0
    stopped_partitions: int = 0
    skipped: str | None = None
    errors: list[str] = field(default_factory=list)
    partitions: list[PartitionRun] = field(default_factory=list)
    checkpoints: list[GroupCheckpoints] = field(default_factory=list)

    def to_json(self) -> bytes:
        d = {
            "v": FORMAT_VERSION,
            "kind": self.kind,
            "at": self.at,
            "ok": self.ok,
            "duration_s": self.duration_s,
            "copy_phase_s": self.copy_phase_s,
            "records": self.records,
            "bytes": self.byte_count,
            "lag": self.lag,
            "lost": self.lost,
            "failed_units": self.failed_units,
            "stopped_partitions": self.stopped_partitions,
            "skipped": self.skipped,
            "errors": self.errors,
            "partitions": [
                [
                    p.topic,
                    p.partition,
                    p.target_topic,
                    p.status,
                    p.records,
                    p.byte_count,
                    p.lag,
                    p.lost,
                    *p.latency_ms,
                    *p.age_ms,
                ]
                for p in self.partitions
            ],
            "checkpoints": [[c.group, c.topic, c.partition, c.latency_ms] for c in self.checkpoints],
        }
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes | None) -> RunRecord | None:
        """None for a record this version cannot read (newer format, garbage): skipped, not fatal."""
        try:
            d = json.loads(raw or b"")
            if d.get("v") != FORMAT_VERSION:
                return None
            parts = [
                PartitionRun(t, int(p), tt, st, r, b, lag, lost, (l0, l1, l2), (a0, a1, a2))
                for t, p, tt, st, r, b, lag, lost, l0, l1, l2, a0, a1, a2 in d.get("partitions", [])
            ]
            cps = [GroupCheckpoints(g, t, int(p), int(ms)) for g, t, p, ms in d.get("checkpoints", [])]
            return cls(
                d["kind"],
                int(d["at"]),
                bool(d["ok"]),
                float(d.get("duration_s", 0)),
                float(d.get("copy_phase_s", 0)),
                int(d.get("records", 0)),
                int(d.get("bytes", 0)),
                None if d.get("lag", 0) is None else int(d.get("lag", 0)),
                int(d.get("lost", 0)),
                int(d.get("failed_units", 0)),
                int(d.get("stopped_partitions", 0)),
                d.get("skipped"),
                list(d.get("errors", [])),
                parts,
                cps,
            )
        except (ValueError, KeyError, TypeError):
            return None


def append(clients: FlowClients, record: RunRecord, once: bool = False) -> bool:
    """Write one run's summary; False (logged) when it could not be written: never fails the run.
    `once`: one short try, not a ride through an outage (the run gave up on the target already)."""
    topic = runs_topic(clients.flow)
    try:
        if not clients.partitions("target", topic):
            return False  # state topics from before the run log: created by the next run's ensure
        write_acknowledged(
            clients,
            topic,
            [(record.kind.encode(), record.to_json(), record.at)],
            0,
            "writing the run summary",
            bound_s=0.0 if once else None,
            attempt_s=clients.admin_timeout,
        )
        return True
    except (MirrorflowError, KafkaException) as exc:  # e.g. a record over the broker's message size
        log.warning("flow %s: the run summary was not written to %s: %s", clients.flow.name, topic, exc)
        return False


def recent(clients: FlowClients, last: int = 200, kind: str | None = None) -> list[RunRecord]:
    """The newest `last` run records (oldest first), of one kind if given; [] before the first run."""
    topic = runs_topic(clients.flow)
    if not clients.partitions("target", topic):
        return []
    reader = clients.reader("target")
    try:
        out = [RunRecord.from_json(m.value()) for m in reader.read(topic, {0: None}, clients.admin_timeout, last=last)]
    finally:
        clients.release(reader.consumer)
    return [r for r in out if r is not None and (kind is None or r.kind == kind)]


def last_run(clients: FlowClients, kind: str = "replicate") -> RunRecord | None:
    runs = recent(clients, 50, kind)
    return runs[-1] if runs else None
