"""The Kafka clients of one flow, owned by one object: `FlowClients`.

Every step of a run (plan, copy, state, checkpoint, sync, status) asks the flow's `FlowClients`
for a client instead of building one: it knows which cluster is the source and which the target,
applies the flow's `admin.*` / `consumer.*` / `producer.*` overrides to the right client kind, and
keeps the settings a step needs for correctness (isolation level, transactional id, idempotence)
on top of them. Admin clients are built once per cluster and reused; consumers and producers are
tracked and closed by `close()` (use it as a context manager). Nothing else builds a Kafka client.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from mirrorflow.config import ClusterConfig, Config, FlowConfig
from mirrorflow.kafka.connection import ClusterConnection
from mirrorflow.kafka.log_reader import ENDS_SETTINGS, READER_SETTINGS, LogReader
from mirrorflow.kafka.retry import retry_call
from mirrorflow.mm2.policy import DefaultReplicationPolicy, flow_policy
from mirrorflow.mm2.remote_cluster import MirrorClient

Side = Literal["source", "target"]
ClientKind = Literal["admin", "consumer", "producer"]


def cluster_connection(cluster: ClusterConfig) -> ClusterConnection:
    """A connection to a configured cluster, its secrets resolved now (and never logged)."""
    where = cluster.bootstrap_servers or f"(connection {cluster.airflow_conn_id})"
    return ClusterConnection(cluster.alias, cluster.client_config(), where)


def mirror_client(cfg: Config, alias: str, timeout: float = 30.0) -> MirrorClient:
    """MM2's MirrorClient on configured cluster `alias`, with the policy of the flows that target it."""
    flows = [f for f in cfg.flows.values() if f.target == alias]
    policy = flow_policy(flows[0]) if flows else DefaultReplicationPolicy()
    if hasattr(policy, "source_cluster_alias"):  # clients configure no source alias
        policy = type(policy)(policy.separator, policy.internal_separator_enabled)
    return MirrorClient(cluster_connection(cfg.cluster(alias)), policy, timeout)


class FlowClients:
    """Builds, caches and closes the clients of one flow run."""

    def __init__(self, cfg: Config, flow: FlowConfig) -> None:
        self.cfg, self.flow = cfg, flow
        self._connections: dict[Side, ClusterConnection] = {}
        self._admins: dict[Side, AdminClient] = {}
        self._owned: list[Consumer | Producer] = []
        self._partitions: dict[Side, dict[str, int]] = {}
        self._reached: set[Side] = set()  # clusters that answered: their outages are waited out
        self._ends: dict[tuple[Side, str], Consumer] = {}  # readers' high-watermark consumers
        self._lock = threading.RLock()  # a task may copy several units at once (copier.copy_units)
        # one topic listing per cluster at a time: the tasks a Spark task copies at once
        # (task_copier.copy_together) each listed the whole cluster as they started
        self._listing: dict[Side, threading.Lock] = {"source": threading.Lock(), "target": threading.Lock()}

    # -- lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> FlowClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every consumer this object built (producers are flushed by their users)."""
        with self._lock:
            owned, self._owned = self._owned, []
        for c in owned:
            if isinstance(c, Consumer):
                try:
                    c.close()
                except RuntimeError:  # already closed by its user
                    pass
        self._admins.clear()
        self._ends.clear()

    def detach(self, client: Consumer | Producer) -> None:
        """Stop owning a client without closing it: a cache outliving these clients owns it now
        (a copy task's producer and lane consumers, kept for the next run in the process)."""
        with self._lock:
            self._owned = [c for c in self._owned if c is not client]

    def release(self, client: Consumer | Producer) -> None:
        """Close a consumer now (or forget a producer), before the run ends."""
        with self._lock:
            if any(c is client for c in self._owned):
                self._owned = [c for c in self._owned if c is not client]
        if isinstance(client, Consumer):
            try:
                client.close()
            except RuntimeError:
                pass

    # -- what to build ----------------------------------------------------------------------------
    def alias(self, side: Side) -> str:
        return self.flow.source if side == "source" else self.flow.target

    def side(self, alias: str) -> Side:
        """Which side of the flow cluster `alias` is."""
        if alias == self.flow.source:
            return "source"
        if alias == self.flow.target:
            return "target"
        raise ValueError(f"cluster {alias!r} is not part of flow {self.flow.name}")

    def connection(self, side: Side) -> ClusterConnection:
        with self._lock:
            if side not in self._connections:
                self._connections[side] = cluster_connection(self.cfg.cluster(self.alias(side)))
            return self._connections[side]

    def overrides(self, side: Side, kind: ClientKind) -> dict[str, str]:
        """The flow's client overrides for this cluster and client kind (`consumer.*` etc.)."""
        return self.flow.client_overrides(side, kind)

    def _conf(
        self, side: Side, kind: ClientKind, defaults: Mapping[str, Any] | None, required: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        # defaults < the user's overrides < what the step needs to be correct
        return {**(defaults or {}), **self.overrides(side, kind), **(required or {})}

    def reached(self, *sides: Side) -> None:
        """The clusters answered this run before these clients existed (a planned copy task: the
        run's planning reached both): their outages are waited out, as after a first answer here."""
        with self._lock:
            self._reached.update(sides)

    def admin(self, side: Side, check: bool = True, check_timeout: float = 10.0) -> AdminClient:
        """The cluster's AdminClient (one per cluster and run); `check` proves it answers first
        (within `check_timeout`; up to broker.outage.max.seconds for a cluster that answered the
        run before: a broker restarting as a copy task starts is waited for)."""
        with self._lock:
            known, reached = self._admins.get(side), side in self._reached
        if known is not None:
            return known
        if reached:
            check_timeout = max(check_timeout, self.outage_timeout)
        # outside the lock: another thread's client must not wait behind this one's wait for a broker
        admin = self.connection(side).admin(
            self.overrides(side, "admin"), check_timeout=check_timeout if check else None
        )
        with self._lock:
            if check:
                self._reached.add(side)
            return self._admins.setdefault(side, admin)

    def consumer(
        self, side: Side, defaults: Mapping[str, Any] | None = None, required: Mapping[str, Any] | None = None
    ) -> Consumer:
        c = self.connection(side).consumer(self._conf(side, "consumer", defaults, required))
        with self._lock:
            self._owned.append(c)
        return c

    def producer(
        self, side: Side, defaults: Mapping[str, Any] | None = None, required: Mapping[str, Any] | None = None
    ) -> Producer:
        p = self.connection(side).producer(self._conf(side, "producer", defaults, required))
        with self._lock:
            self._owned.append(p)
        return p

    def reader(self, side: Side, group: str | None = None, committed: bool = True) -> LogReader:
        """A LogReader (assign-mode, read_committed) on one of the flow's clusters. `committed=False`
        reads read_uncommitted: only for records never written in a transaction (control records),
        which a transaction left open on their partition must not hold back."""
        required = dict(READER_SETTINGS)
        if group:
            required["group.id"] = group
        if not committed:
            required["isolation.level"] = "read_uncommitted"
        return LogReader(
            self.connection(side),
            self.consumer(side, required=required),
            lambda: self._ends_consumer(side, required),
            silent_s=self.outage_timeout,
        )

    def _ends_consumer(self, side: Side, reader: Mapping[str, Any]) -> Consumer:
        """The read_uncommitted consumer that answers the high watermarks ending the reads of
        readers with these settings: one per cluster and group, shared (it never fetches), closed
        by `close()`."""
        key = (side, str(reader["group.id"]))
        with self._lock:
            if key not in self._ends:
                required = {**reader, "isolation.level": ENDS_SETTINGS["isolation.level"]}
                self._ends[key] = self.consumer(side, required=required)
            return self._ends[key]

    def partitions(self, side: Side, topic: str, refresh: bool = False) -> int:
        """How many partitions `topic` has on the cluster (0: it does not exist), from one metadata
        request per cluster and run, asked again for a topic it did not hold or with `refresh`
        (a task checks its units' topics without a request per unit). Once the cluster has answered
        these clients, transient failures (a broker restarting, a leadership move) are retried up to
        broker.outage.max.seconds; a cluster that never answered is reported at once (a one-off
        command; a run waits for it first: planner.wait_for_clusters)."""
        with self._lock:
            known = self._partitions.get(side)
            if not refresh and known is not None and topic in known:
                return known[topic]
            listed = self._partitions.get(side)
        with self._listing[side]:  # outside the lock: other calls must not queue behind a wait for a broker
            with self._lock:
                known = self._partitions.get(side)
                if known is not None and known is not listed and topic in known:
                    return known[topic]  # listed by another thread while this one waited
            return self._list_partitions(side, topic)

    def partition_counts(self, side: Side) -> dict[str, int]:
        """Every topic's partition count on the cluster, listed now: one request for a caller that
        asks about many topics at once (`partitions(..., refresh=True)` per key listed the whole
        cluster once per key)."""
        with self._listing[side]:
            self._list_partitions(side, "")
            with self._lock:
                return dict(self._partitions[side])

    def _list_partitions(self, side: Side, topic: str) -> int:
        admin, conn = self.admin(side, check=False), self.connection(side)
        try:
            if side in self._reached:  # it answered before: a restart or leadership move, waited out
                md = retry_call(
                    lambda: admin.list_topics(timeout=10).topics, conn.alias, "listing topics", self.outage_timeout
                )
            else:  # never answered: a wrong address or a cluster down is reported at once
                md = admin.list_topics(timeout=10).topics
        except KafkaException as exc:
            raise conn.describe_failure(exc) from None
        fresh = {t: len(m.partitions) for t, m in md.items() if m.error is None and m.partitions}
        with self._lock:
            self._partitions[side] = fresh
            self._reached.add(side)
        return fresh.get(topic, 0)

    @property
    def outage_timeout(self) -> float:
        """broker.outage.max.seconds: how long a run's calls ride through a broker restart."""
        return float(self.flow.props.get("broker.outage.max.seconds", 300))

    @property
    def admin_timeout(self) -> float:
        """MM2's admin.timeout.ms, in seconds, at most broker.outage.max.seconds: no one call waits on a
        cluster that does not answer longer than a run rides out an outage (the defaults, 60 s and 300 s,
        are not changed by it; a black-holed target kept a run planning 34 s past a 4 s bound)."""
        return max(1.0, min(int(self.flow.props.get("admin.timeout.ms", 60000)) / 1000.0, self.outage_timeout))

    @property
    def step_timeout(self) -> float:
        """admin.timeout.ms, at most a quarter of broker.outage.max.seconds: for a call that a step
        retries up to that bound (kafka.retry.StepRetry), so a request whose answer is lost (a reset
        connection the client did not see) is asked again within the bound instead of using it up.
        The defaults (60 s, 300 s) are not changed by it."""
        return max(1.0, min(self.admin_timeout, self.outage_timeout / 4))


@contextmanager
def flow_clients(cfg: Config, flow: FlowConfig, clients: FlowClients | None = None) -> Iterator[FlowClients]:
    """`clients` when the caller shares its own (one run, several steps), else new ones closed on exit."""
    if clients is not None:
        yield clients
        return
    with FlowClients(cfg, flow) as own:
        yield own
