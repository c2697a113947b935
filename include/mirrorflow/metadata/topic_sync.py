"""Topic sync for one flow: create remote topics, add partitions, sync topic configs.

As MM2's MirrorSourceConnector does it (createNewTopics, syncTopicConfigs).

Planning is pure (`plan_topics`, `plan_configs` over plain data), so the MM2 rules are unit
tested without brokers; `TopicSync` reads both clusters, plans, and applies unless it is a dry
run. Nothing on the target is ever deleted or shrunk: orphaned remote topics and targets with
more partitions are reported as findings. Configs go through IncrementalAlterConfigs only, so a
target-side override of an excluded property (say `min.insync.replicas`) survives every sync.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from mirrorflow.errors import ClusterError
from mirrorflow.metadata.sync_report import (
    ADD_PARTITIONS,
    CREATE_TOPIC,
    DELETE_CONFIG,
    MORE_PARTITIONS,
    ORPHAN,
    SET_CONFIG,
    SyncReport,
    settle,
)
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.mm2.policy import IdentityReplicationPolicy

log = logging.getLogger(__name__)

STATIC_BROKER = "STATIC_BROKER_CONFIG"
DEFAULT = "DEFAULT_CONFIG"
TOPIC_OVERRIDE = "DYNAMIC_TOPIC_CONFIG"


@dataclass(frozen=True)
class Entry:
    """A topic config entry as MM2 looks at it (a plain copy of confluent-kafka's ConfigEntry)."""

    name: str
    value: str | None
    source: str  # a ConfigSource name: DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, ...
    read_only: bool = False
    sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT

    @property
    def is_topic_override(self) -> bool:
        return self.source == TOPIC_OVERRIDE

    @classmethod
    def of(cls, e: ConfigEntry) -> Entry:
        # confluent-kafka hands out the source as a plain int in describe_configs results
        src = ConfigSource(e.source).name if isinstance(e.source, int) else getattr(e.source, "name", str(e.source))
        return cls(e.name, e.value, src, bool(e.is_read_only), bool(e.is_sensitive))


@dataclass(frozen=True)
class ConfigOp:
    name: str
    op: str  # "SET" | "DELETE"
    value: str | None
    target_value: str | None  # what the target has now (for the report)


def read_error(alias: str, what: str, exc: KafkaException) -> ClusterError:
    """A failed read names the cluster and the request (e.g. a principal without DESCRIBE rights)."""
    err = exc.args[0] if exc.args else exc
    text = err.str() if hasattr(err, "str") else str(err)
    name = f" ({err.name()})" if hasattr(err, "name") else ""
    return ClusterError(alias, f"{what} failed: {text}{name}")


def skip_reason(filters: FlowFilters, topic: str) -> str | None:
    """Why `topic` is not replicated by the flow (None: it is). Same order as MM2's checks."""
    if filters.policy.is_internal_topic(topic):
        return "internal topic"
    if filters.policy.is_cycle(topic, filters.target):
        return f"came from {filters.target} (replicating it back would be a cycle)"
    if not filters.should_replicate_topic(topic):
        return "not selected by topics / topics.exclude"
    return None


def selected_topics(filters: FlowFilters, source_topics: Iterable[str]) -> list[tuple[str, str]]:
    """(source topic, remote topic) of each source topic the flow replicates, sorted."""
    return sorted((t, filters.remote_topic(t)) for t in source_topics if skip_reason(filters, t) is None)


def syncable(entry: Entry, filters: FlowFilters) -> bool:
    """MM2 targetConfig's entry test, minus the default check: not read-only, not sensitive,
    not a static broker setting, not excluded by config.properties.exclude."""
    return (
        not entry.read_only
        and not entry.sensitive
        and entry.value is not None
        and entry.source != STATIC_BROKER
        and filters.configs.should_replicate_config_property(entry.name)
    )


def creation_configs(source_entries: Iterable[Entry], filters: FlowFilters) -> dict[str, str]:
    """Configs for a new remote topic: the source's non-default (or, with use.defaults.from=source,
    all), syncable entries. Values from dynamic broker defaults are not `default` and are copied."""
    out: dict[str, str] = {}
    for e in source_entries:
        if (not e.is_default or filters.configs.should_replicate_source_default(e.name)) and syncable(e, filters):
            out[e.name] = e.value  # type: ignore[assignment]
    return dict(sorted(out.items()))


def plan_configs(
    source_entries: Iterable[Entry], target_entries: dict[str, Entry], filters: FlowFilters
) -> list[ConfigOp]:
    """Incremental ops that make an existing remote topic's configs follow the source.

    MM2 semantics: a default-valued source entry DELETEs the target override (use.defaults.from
    =target) so the target's own default applies; any other entry is SET to the source value.
    Unlike MM2 we emit only ops that change something, so a second sync is a no-op.
    """
    ops: list[ConfigOp] = []
    for e in sorted(source_entries, key=lambda x: x.name):
        if not syncable(e, filters):
            continue
        t = target_entries.get(e.name)
        if e.is_default and not filters.configs.should_replicate_source_default(e.name):
            if t is not None and t.is_topic_override:
                ops.append(ConfigOp(e.name, "DELETE", None, t.value))
        elif t is None or not t.is_topic_override or t.value != e.value:
            ops.append(ConfigOp(e.name, "SET", e.value, t.value if t else None))
    return ops


@dataclass
class TopicPlanInput:
    """What the planner needs to know about both clusters (partition counts by topic)."""

    source_partitions: dict[str, int]
    target_partitions: dict[str, int]


def plan_topics(
    filters: FlowFilters,
    state: TopicPlanInput,
    report: SyncReport,
    replication_factor: int,
    source_configs: dict[str, dict[str, str]],
    detect_orphans: bool = True,
    unreadable: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    """Adds create / add-partitions changes and findings to `report`; returns the replicated
    (source topic, remote topic) pairs whose remote topic already exists.

    A topic whose source configs could not be read (`unreadable`) is not created: created with
    broker defaults it could, say, delete what should be compacted (KAFKA-12254)."""
    existing: list[tuple[str, str]] = []
    for topic in sorted(state.source_partitions):
        remote = _plan_topic(filters, state, report, topic, replication_factor, source_configs, unreadable)
        if remote is not None:
            existing.append((topic, remote))
    if detect_orphans:
        _find_orphans(filters, state, report)
    return existing


def _plan_topic(
    filters: FlowFilters,
    state: TopicPlanInput,
    report: SyncReport,
    topic: str,
    replication_factor: int,
    source_configs: dict[str, dict[str, str]],
    unreadable: frozenset[str],
) -> str | None:
    """One source topic's change or finding in `report`; its remote topic when that exists on the target."""
    why = skip_reason(filters, topic)
    if why:
        report.skip("topics", topic, why)
        return None
    remote = filters.remote_topic(topic)
    n = state.source_partitions[topic]
    have = state.target_partitions.get(remote)
    if have is None and topic in unreadable:
        report.skip("topics", topic, "its configs could not be read, so it is not created without them (see the log)")
        return None
    if have is None:
        cfgs = source_configs.get(topic, {})
        rf = "broker default" if replication_factor == -1 else str(replication_factor)
        shown = ", ".join(f"{k}={v}" for k, v in cfgs.items()) or "none"
        report.change(
            "topics", CREATE_TOPIC, remote, f"{n} partitions, replication factor {rf}, configs: {shown} (from {topic})"
        )
        return None
    if have < n:
        report.change("topics", ADD_PARTITIONS, remote, f"{have} -> {n} partitions (source {topic} has {n})")
    elif have > n:
        report.find(
            "topics",
            MORE_PARTITIONS,
            remote,
            f"the target has {have} partitions, the source {topic} has {n}; partitions are never removed",
        )
    return remote


def _find_orphans(filters: FlowFilters, state: TopicPlanInput, report: SyncReport) -> None:
    """Remote topics on the target whose source topic is gone: reported, never deleted."""
    for remote in sorted(state.target_partitions):
        up = orphan_source(filters, remote)
        if up is not None and up not in state.source_partitions:
            report.find(
                "topics", ORPHAN, remote, f"its source topic {up!r} no longer exists on {filters.source}; left in place"
            )


T = TypeVar("T")
# topics per DescribeConfigs request: one request of 2,000 topics spent most of a 2,000-topic sync
# waiting (30 of 38 s, profiled under load), as one ListOffsets request of 10,000 partitions does
# (kafka.topic_admin.LIST_OFFSETS_CHUNK)
DESCRIBE_CHUNK = 200

# KRaft refuses a request that makes its controller write more than 10,000 records
# (max.records.per.user.op: "Unable to perform excessively large batch operation"); a topic costs one
# record, plus one per partition and per config. Requests stay well below that.
CONTROLLER_RECORDS_PER_REQUEST = 5000


def controller_chunks(
    items: list[T], cost: Callable[[T], int], limit: int = CONTROLLER_RECORDS_PER_REQUEST
) -> list[list[T]]:
    """`items` cut into consecutive requests of at most `limit` controller records each (an item
    over the limit goes alone: the broker then names it in its answer)."""
    chunks: list[list[T]] = []
    used = 0
    for item in items:
        c = cost(item)
        if not chunks or used + c > limit:
            chunks.append([])
            used = 0
        chunks[-1].append(item)
        used += c
    return chunks


def orphan_source(filters: FlowFilters, remote: str) -> str | None:
    """The upstream topic a target topic was replicated from by this flow (None: not ours).

    Only names tell where a topic came from, so the identity policy cannot find orphans."""
    p = filters.policy
    if isinstance(p, IdentityReplicationPolicy) and not p.is_heartbeats_topic(remote):
        return None
    if p.is_internal_topic(remote) or p.is_checkpoints_topic(remote):
        return None
    if p.topic_source(remote) != filters.source:
        return None
    return p.upstream_topic(remote)


class TopicSync:
    """Reads both clusters, plans with the functions above, applies unless dry run."""

    def __init__(
        self, filters: FlowFilters, source: AdminClient, target: AdminClient, replication_factor: int, timeout: float
    ) -> None:
        self.filters, self.source, self.target = filters, source, target
        self.replication_factor, self.timeout = replication_factor, timeout

    # -- reading --------------------------------------------------------------------------------
    def _alias(self, admin: AdminClient) -> str:
        return self.filters.source if admin is self.source else self.filters.target

    def partitions(self, admin: AdminClient) -> dict[str, int]:
        try:
            md = admin.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise read_error(self._alias(admin), "listing topics", exc) from None
        return {name: len(t.partitions) for name, t in md.topics.items() if t.partitions}

    def describe(self, admin: AdminClient, topics: list[str]) -> dict[str, dict[str, Entry]]:
        if not topics:
            return {}
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        futures = {}
        try:
            for i in range(0, len(resources), DESCRIBE_CHUNK):  # all in flight before any answer is awaited
                futures.update(admin.describe_configs(resources[i : i + DESCRIBE_CHUNK], request_timeout=self.timeout))
        except KafkaException as exc:
            raise read_error(self._alias(admin), "describing topic configs", exc) from None
        out: dict[str, dict[str, Entry]] = {}
        for res, fut in futures.items():
            try:
                out[res.name] = {name: Entry.of(e) for name, e in fut.result(self.timeout).items()}
            except KafkaException as exc:
                log.warning("describe configs of %s failed: %s", res.name, exc)
        return out

    # -- the two concerns -------------------------------------------------------------------------
    def sync_topics(self, report: SyncReport, dry_run: bool) -> None:
        src_parts, tgt_parts = self.partitions(self.source), self.partitions(self.target)
        report.topics = selected_topics(self.filters, src_parts)
        state = TopicPlanInput(src_parts, tgt_parts)
        missing = [
            t
            for t in src_parts
            if skip_reason(self.filters, t) is None and self.filters.remote_topic(t) not in tgt_parts
        ]
        described = self.describe(self.source, missing)
        cfgs = {t: creation_configs(described[t].values(), self.filters) for t in missing if t in described}
        before = len(report.changes)
        plan_topics(
            self.filters,
            state,
            report,
            self.replication_factor,
            cfgs,
            unreadable=frozenset(t for t in missing if t not in described),
        )
        if dry_run:
            return
        changes = report.changes[before:]
        by_remote = {self.filters.remote_topic(t): t for t in src_parts if skip_reason(self.filters, t) is None}
        creates = [c for c in changes if c.kind == CREATE_TOPIC]
        if creates:
            new = [
                NewTopic(
                    c.resource,
                    src_parts[by_remote[c.resource]],
                    self.replication_factor,
                    config=cfgs[by_remote[c.resource]],
                )
                for c in creates
            ]
            futures = {}
            for chunk in controller_chunks(new, lambda t: 1 + t.num_partitions + len(t.config or {})):
                futures.update(
                    self.target.create_topics(chunk, request_timeout=self.timeout, operation_timeout=self.timeout)
                )
            for c in creates:
                settle(c, futures[c.resource], self.timeout)
        adds = [c for c in changes if c.kind == ADD_PARTITIONS]
        if adds:
            parts = [NewPartitions(c.resource, src_parts[by_remote[c.resource]]) for c in adds]
            futures = {}
            for chunk in controller_chunks(parts, lambda n: n.new_total_count):
                futures.update(
                    self.target.create_partitions(chunk, request_timeout=self.timeout, operation_timeout=self.timeout)
                )
            for c in adds:
                settle(c, futures[c.resource], self.timeout)

    def sync_configs(self, report: SyncReport, dry_run: bool) -> None:
        src_parts, tgt_parts = self.partitions(self.source), self.partitions(self.target)
        pairs = [
            (t, self.filters.remote_topic(t))
            for t in sorted(src_parts)
            if skip_reason(self.filters, t) is None and self.filters.remote_topic(t) in tgt_parts
        ]
        if not pairs:
            return
        src_cfg = self.describe(self.source, [t for t, _ in pairs])
        tgt_cfg = self.describe(self.target, [r for _, r in pairs])
        planned: dict[str, list[tuple[ConfigOp, Any]]] = {}
        for topic, remote in pairs:
            if topic not in src_cfg or remote not in tgt_cfg:
                report.skip("configs", remote, "its configs could not be read (see the log)")
                continue
            for op in plan_configs(src_cfg[topic].values(), tgt_cfg[remote], self.filters):
                if op.op == "SET":
                    detail = f"{op.name} = {op.value}" + (
                        f" (target had {op.target_value})" if op.target_value is not None else ""
                    )
                    change = report.change("configs", SET_CONFIG, remote, detail)
                else:
                    change = report.change(
                        "configs",
                        DELETE_CONFIG,
                        remote,
                        f"{op.name} (target override {op.target_value} removed: the source uses the default)",
                    )
                planned.setdefault(remote, []).append((op, change))
        if dry_run or not planned:
            return
        resources = []
        for remote, ops in planned.items():
            entries = [
                ConfigEntry(
                    op.name,
                    op.value if op.op == "SET" else None,
                    incremental_operation=AlterConfigOpType.SET if op.op == "SET" else AlterConfigOpType.DELETE,
                )
                for op, _ in ops
            ]
            resources.append(ConfigResource(ResourceType.TOPIC, remote, incremental_configs=entries))
        futures = self.target.incremental_alter_configs(resources, request_timeout=self.timeout)
        for res, fut in futures.items():
            for _, change in planned[res.name]:
                settle(change, fut, self.timeout)
