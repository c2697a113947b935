"""Heartbeats in MM2's format, and the replication latency they reveal.

MM2 (MirrorHeartbeatTask in Kafka's `connect/mirror`) runs one heartbeat task per herder X->Y, which
writes key (X, Y) with the current time to topic `heartbeats` on Y. With only A->B configured MM2 still runs the
reverse herder B->A for heartbeats alone, so A's `heartbeats` holds (B, A) records; flow A->B
then replicates A's `heartbeats` to B as `A.heartbeats` like any other topic.

mirrorflow has no herders, so one emission for flow A->B writes both records MM2's two herders
would write: (A, B) into B's `heartbeats` and (B, A) into A's `heartbeats`. The reverse record
is skipped when the config also has flow B->A with heartbeats on, because that flow's own
emission writes it. The copy of `heartbeats` to `A.heartbeats` is the data plane's job (heartbeats
topics pass FlowFilters.should_replicate_topic, cycles such as `B.A.heartbeats` back to A do not).

Replication latency of A->B = now - the newest heartbeat timestamp found in `A.heartbeats` on B.

MM2's heartbeat task emits every `emit.heartbeats.interval.seconds` (1 s) for as long as it runs;
`emit_heartbeats_for` does the same for the length of one scheduled run (the CLI), so the cadence
holds across runs without a task that never ends. The heartbeat DAG emits the first heartbeat of
a window in its task and the rest from a trigger on Airflow's triggerer (mirrorflow_airflow.triggers),
both through `HeartbeatSender`, so a flow at rest holds no worker slot between heartbeats.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import KafkaException

from mirrorflow.clients import FlowClients, flow_clients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ClusterError, TopicError
from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.kafka.topic_admin import ensure_compacted_topic, produce_all
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.mm2.formats import FormatError, Heartbeat

log = logging.getLogger(__name__)

TAIL = 64  # records read from the end of each partition of a replicated heartbeats topic


@dataclass(frozen=True)
class Emission:
    cluster: str
    topic: str
    source: str
    target: str
    timestamp: int


def heartbeats_planned(cfg: Config, flow: FlowConfig, now_ms: int) -> list[Emission]:
    """The heartbeats one emission of `flow` writes (pure given the config)."""
    if not flow.props.get("emit.heartbeats.enabled", True):
        return []
    topic = FlowFilters.for_flow(flow).policy.heartbeats_topic()
    out = [Emission(flow.target, topic, flow.source, flow.target, now_ms)]
    reverse = cfg.flows.get(f"{flow.target}->{flow.source}")
    if reverse is None or not reverse.props.get("emit.heartbeats.enabled", True):
        out.append(Emission(flow.source, topic, flow.target, flow.source, now_ms))
    return out


def emit_heartbeats(
    cfg: Config, flow: FlowConfig, now_ms: int | None = None, clients: FlowClients | None = None
) -> list[Emission]:
    """Write this flow's heartbeats (creating `heartbeats` compacted with 1 partition, with
    `heartbeats.topic.replication.factor`, if needed)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    planned = heartbeats_planned(cfg, flow, now)
    rf = int(flow.props.get("heartbeats.topic.replication.factor", -1))
    emitted = []
    with flow_clients(cfg, flow, clients) as c:
        for e in planned:
            side = c.side(e.cluster)
            conn = c.connection(side)
            try:
                ensure_compacted_topic(c.admin(side), conn, e.topic, rf, timeout=c.admin_timeout)
                hb = Heartbeat(e.source, e.target, e.timestamp)
                produce_all(
                    conn,
                    e.topic,
                    [(hb.key(), hb.value(), e.timestamp)],
                    producer_conf=c.overrides(side, "producer"),
                    timeout=c.admin_timeout,
                )
            except (ClusterError, TopicError) as exc:
                # DR-safe: the source may be read-only (the recommended principal); MM2's reverse
                # heartbeat into it is then skipped, never a failed run
                if side != "source" or "authoriz" not in str(exc).lower():
                    raise
                log.warning(
                    "flow %s: no heartbeat written to source %s (read-only principal): %s", flow.name, e.cluster, exc
                )
                continue
            emitted.append(e)
    return emitted


def emit_heartbeats_for(
    cfg: Config,
    flow: FlowConfig,
    duration_s: float,
    clients: FlowClients | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[Emission]:
    """Emit the flow's heartbeats every `emit.heartbeats.interval.seconds` for `duration_s`: at
    0, I, 2I, ... < duration_s (at least once). The first emission creates the topics; later ones
    reuse one producer per cluster. Returns every emission (empty: heartbeats are disabled)."""
    interval = float(flow.props["emit.heartbeats.interval.seconds"])
    count = heartbeat_count(flow, duration_s)
    emitted: list[Emission] = []
    with flow_clients(cfg, flow, clients) as c:
        start = clock()
        first = emit_heartbeats(cfg, flow, clients=c)
        if not first:
            return []
        emitted += first
        sender = HeartbeatSender(cfg, flow, c, {x.cluster for x in first})
        for i in range(1, count):
            sleep(max(0.0, start + i * interval - clock()))
            emitted += sender.send()
    return emitted


def heartbeat_count(flow: FlowConfig, duration_s: float) -> int:
    """Emissions at 0, I, 2I, ... < duration_s (at least one), I = emit.heartbeats.interval.seconds."""
    return max(1, math.ceil(duration_s / float(flow.props["emit.heartbeats.interval.seconds"])))


class HeartbeatSender:
    """The emissions after the first (which created the topics) into the clusters the first one
    wrote to (a read-only source is skipped there), one idempotent producer per cluster; each
    heartbeat acknowledged before the next is due. Blocking: the trigger calls it in a thread."""

    def __init__(self, cfg: Config, flow: FlowConfig, clients: FlowClients, clusters: set[str]) -> None:
        self.cfg, self.flow, self.clients, self.clusters = cfg, flow, clients, clusters
        self.producers: dict[str, Any] = {}

    def send(self) -> list[Emission]:
        sent = []
        for e in heartbeats_planned(self.cfg, self.flow, int(time.time() * 1000)):
            if e.cluster not in self.clusters:
                continue
            side = self.clients.side(e.cluster)
            if side not in self.producers:
                self.producers[side] = self.clients.producer(side, required={"enable.idempotence": True, "acks": "all"})
            _send(self.producers[side], self.clients, side, e)
            sent.append(e)
        return sent


def _send(producer: Any, clients: FlowClients, side: Any, e: Emission) -> None:
    """One heartbeat record, acknowledged before the next one is due."""
    hb = Heartbeat(e.source, e.target, e.timestamp)
    errors: list[str] = []
    producer.produce(
        e.topic,
        key=hb.key(),
        value=hb.value(),
        partition=0,
        timestamp=e.timestamp,
        on_delivery=lambda err, _msg: errors.append(err.str()) if err is not None else None,
    )
    left = producer.flush(clients.admin_timeout)
    if left or errors:
        why = errors[0] if errors else f"not acknowledged within {clients.admin_timeout:.0f}s"
        raise ClusterError(clients.connection(side).alias, f"writing a heartbeat to {e.topic!r} failed: {why}")


@dataclass(frozen=True)
class Latency:
    """Replication latency of a flow as seen from its replicated heartbeats."""

    flow: str
    topic: str  # the replicated heartbeats topic on the target, e.g. A.heartbeats
    newest_heartbeat_ms: int | None
    latency_ms: int | None  # None: no replicated heartbeat yet
    emitter: tuple[str, str] | None = None  # (source, target) key of that heartbeat

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HeartbeatRun:
    """One heartbeat emission of a flow and the replication latency measured after it."""

    flow: str
    target: str
    emitted: list[Emission]  # empty: emit.heartbeats.enabled=false
    latency: Latency
    upstream_clusters: list[str] | None = None  # of the target, from its heartbeats topics; None: not looked up


def newest_heartbeat(records: list[Any]) -> Heartbeat | None:
    """The heartbeat with the highest timestamp among raw records; undecodable ones are skipped."""
    best: Heartbeat | None = None
    for r in records:
        try:
            hb = Heartbeat.decode(r.key, r.value)
        except FormatError:
            continue
        if best is None or hb.timestamp > best.timestamp:
            best = hb
    return best


def replication_latency(
    cfg: Config, flow: FlowConfig, now_ms: int | None = None, clients: FlowClients | None = None
) -> Latency:
    """now - timestamp of the newest heartbeat that reached the target through this flow."""
    filters = FlowFilters.for_flow(flow)
    topic = filters.remote_topic(filters.policy.heartbeats_topic())
    records: list[Any] = []
    with flow_clients(cfg, flow, clients) as c:
        conn = c.connection("target")
        try:
            md = c.admin("target").list_topics(topic, timeout=10).topics.get(topic)
        except KafkaException as exc:
            raise conn.describe_failure(exc) from None
        if md is not None and md.error is None:
            for p in sorted(md.partitions):
                try:
                    records.extend(
                        read_partition(
                            conn, topic, p, timeout=30, last=TAIL, consumer_conf=c.overrides("target", "consumer")
                        )
                    )
                except TopicError:
                    continue
    best = newest_heartbeat(records)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if best is None:
        return Latency(flow.name, topic, None, None)
    return Latency(flow.name, topic, best.timestamp, max(0, now - best.timestamp), (best.source, best.target))
