"""Checkpoints: committed source group offsets, translated exactly, written in MM2's format.

Per flow A->B this does what MM2's MirrorCheckpointTask does (Kafka's `connect/mirror`), except that
the translation comes from mirrorflow's offset map (exact) instead of sparse offset syncs (+1 rule):

1. list the groups on the source that pass `groups`/`groups.exclude`, fetch their committed
   offsets (all requests in flight at once), keep groups with an offset on a topic the flow
   replicates;
2. translate each offset through the offset map (`PartitionMap.translate`): exactly, or where the
   map forgot (bounded by `offset.map.max.runs`) an earlier position (`reread`), never a later one;
3. read the previous checkpoints back from `<source>.checkpoints.internal` on the target and
   apply MM2's monotonicity guard (a checkpoint never moves back unless the source group rewound);
4. write the new ones (1 partition, compacted, created on first use) with the listing time as
   the record timestamp; the key topic is the downstream (renamed) topic.

Everything needed next time is on the target: the checkpoints topic is the store.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from mirrorflow.clients import FlowClients, flow_clients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError, TopicError
from mirrorflow.groups.group_offsets import CommittedOffset, fetch_group_offsets, list_groups
from mirrorflow.groups.map_upkeep import fold_after_checkpoint
from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.kafka.topic_admin import ensure_compacted_topic, produce_all
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.mm2.formats import Checkpoint, FormatError
from mirrorflow.mm2.policy import DefaultReplicationPolicy
from mirrorflow.state import run_log
from mirrorflow.state.compaction import look_at_map
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.run_log import MAX_ERRORS, GroupCheckpoints, RunRecord
from mirrorflow.state.store import StateStore

# Translation statuses that come from the offset map, plus ours for topics the flow skips.
NOT_REPLICATED = "not-replicated"
# (group, partition) checkpoints a pass records in the run log (~40 bytes each: 200 KB, well under
# the broker's 1 MiB message.max.bytes; 1,000 groups x 100 partitions would be 4 MB and refused)
RUN_LOG_CHECKPOINTS = 5000
log = logging.getLogger(__name__)


class Translator(Protocol):
    """What checkpointing needs of offset_map.PartitionMap."""

    def translate(self, source_offset: int) -> Any: ...

    def rereads(self, source_offset: int, target_offset: int) -> int: ...


@dataclass(frozen=True, slots=True)  # slots: a pass builds 100,000s of them
class TranslatedOffset:
    """A committed source offset and where the same position is on the target."""

    group: str
    source_topic: str
    partition: int
    source_offset: int
    target_topic: str
    target_offset: int | None  # None: no translation (nothing copied, topic not replicated, forgotten)
    status: str  # exact | end | ahead | before | gap | reread | pruned | none | not-replicated
    missing: int = 0  # offsets the target consumer will never see (before/gap) or not yet (ahead)
    metadata: str = ""
    reordered: bool = False  # the partition's map places records out of source order (a backfill)
    reread: int = 0  # at most this many records already read are read again from target_offset

    def checkpoint(self) -> Checkpoint | None:
        """The MM2 checkpoint for this offset, None when there is no translation (no checkpoint,
        as MM2 since 3.3 emits none for a partition without offset syncs)."""
        if self.target_offset is None or self.target_offset < 0 or self.status == NOT_REPLICATED:
            return None
        return Checkpoint(
            self.group, self.target_topic, self.partition, self.source_offset, self.target_offset, self.metadata
        )


def rename_topic(policy: DefaultReplicationPolicy, source: str, target: str, topic: str) -> str:
    """MirrorCheckpointTask.renameTopicPartition: the downstream name of a source topic."""
    if policy.topic_source(topic) == target:
        return policy.original_topic(topic)
    return policy.format_remote_topic(source, topic)


class TopicRules:
    """The flow's per-topic decisions (replicated? downstream name?), each worked out once per
    topic: a pass over 1,000 groups x 100 partitions asks them 100,000 times of a few topics."""

    def __init__(self, filters: FlowFilters) -> None:
        self.filters = filters
        self._replicated: dict[str, bool] = {}
        self._renamed: dict[str, str] = {}

    def replicated(self, topic: str) -> bool:
        r = self._replicated.get(topic)
        if r is None:
            r = self._replicated[topic] = self.filters.should_replicate_topic(topic)
        return r

    def renamed(self, topic: str) -> str:
        r = self._renamed.get(topic)
        if r is None:
            f = self.filters
            r = self._renamed[topic] = rename_topic(f.policy, f.source, f.target, topic)
        return r


def upstream_of(policy: DefaultReplicationPolicy, source: str, downstream: str) -> str | None:
    """The source topic a checkpoint's downstream topic was renamed from, None if not from `source`."""
    if policy.topic_source(downstream) != source:
        return None
    return policy.upstream_topic(downstream)


def translate_committed(
    filters: FlowFilters, offsets: Iterable[CommittedOffset], maps: Mapping[tuple[str, int], Translator]
) -> list[TranslatedOffset]:
    """Translate committed source offsets through the offset map (pure).

    `maps` is keyed by (SOURCE topic, partition). Offsets on topics the flow does not replicate
    get status `not-replicated`; partitions without any copied data get `none`.
    """
    out: list[TranslatedOffset] = []
    rules = TopicRules(filters)
    # groups that consume the same partitions often sit at the same offset: translate each once
    done: dict[tuple[str, int, int], Any] = {}
    for o in sorted(offsets, key=lambda o: (o.group, o.topic, o.partition)):
        if o.offset < 0:
            continue  # no committed position (librdkafka's OFFSET_INVALID)
        target_topic = rules.renamed(o.topic)
        if not rules.replicated(o.topic):
            out.append(
                TranslatedOffset(
                    o.group, o.topic, o.partition, o.offset, target_topic, None, NOT_REPLICATED, 0, o.metadata
                )
            )
            continue
        pm = maps.get((o.topic, o.partition))
        if pm is None:
            out.append(
                TranslatedOffset(o.group, o.topic, o.partition, o.offset, target_topic, None, "none", 0, o.metadata)
            )
            continue
        t = done.get((o.topic, o.partition, o.offset))
        if t is None:
            t = done[(o.topic, o.partition, o.offset)] = pm.translate(o.offset)
        out.append(
            TranslatedOffset(
                o.group,
                o.topic,
                o.partition,
                o.offset,
                target_topic,
                t.target_offset,
                t.status,
                t.missing,
                o.metadata,
                bool(getattr(pm, "reordered", False)),
                getattr(t, "reread", 0),
            )
        )
    return out


# -- the checkpoint store ---------------------------------------------------------------------
EMIT_ACTIONS = ("new", "advanced", "rewound")


class CheckpointStore:
    """The newest checkpoint per (group, downstream topic, partition), as MM2's CheckpointStore.

    Loaded by reading the checkpoints topic on the target from the beginning; records that do not
    decode are skipped (and counted), as MM2 skips them.
    """

    def __init__(self, checkpoints: Iterable[Checkpoint] = (), skipped: int = 0) -> None:
        self.latest: dict[tuple[str, str, int], Checkpoint] = {}
        # the same checkpoints by group: for_group() without a scan of every group's (O(groups^2))
        self._by_group: dict[str, dict[tuple[str, int], Checkpoint]] = {}
        self.skipped = skipped
        for c in checkpoints:
            self.update(c)

    @classmethod
    def load(cls, clients: FlowClients) -> CheckpointStore:
        flow = clients.flow
        topic = FlowFilters.for_flow(flow).policy.checkpoints_topic(flow.source)
        try:
            records = read_partition(
                clients.connection("target"),
                topic,
                0,
                timeout=clients.admin_timeout,
                consumer_conf=clients.overrides("target", "consumer"),
            )
        except TopicError:
            return cls()  # first use: nothing checkpointed yet
        cps: list[Checkpoint] = []
        skipped = 0
        for r in records:
            try:
                cps.append(Checkpoint.decode(r.key, r.value))
            except FormatError:
                skipped += 1
        return cls(cps, skipped)

    def update(self, c: Checkpoint) -> None:
        self.latest[(c.group, c.topic, c.partition)] = c
        self._by_group.setdefault(c.group, {})[(c.topic, c.partition)] = c

    def previous(self, c: Checkpoint) -> Checkpoint | None:
        return self.latest.get((c.group, c.topic, c.partition))

    def decide(self, c: Checkpoint) -> str:
        """MM2's monotonicity guard (MirrorCheckpointTask.checkpointsForGroup). Emitting actions:
        new, advanced, rewound; skipping: `unchanged` (same downstream position) and `held` (would
        move the target position back although the source group did not rewind)."""
        return self.decide_after(c, self.previous(c))

    @staticmethod
    def decide_after(c: Checkpoint, prev: Checkpoint | None) -> str:
        """`decide` with the previous checkpoint already looked up."""
        if prev is None:
            return "new"
        if c.upstream_offset < prev.upstream_offset:
            return "rewound"
        if c.downstream_offset > prev.downstream_offset:
            return "advanced"
        if c.downstream_offset == prev.downstream_offset:
            return "unchanged"
        return "held"

    def groups(self) -> list[str]:
        return sorted(self._by_group)

    def for_group(self, group: str) -> dict[tuple[str, int], Checkpoint]:
        return dict(self._by_group.get(group, {}))


# -- source side --------------------------------------------------------------------------------
def source_group_offsets(
    clients: FlowClients, groups: Iterable[str] | None = None, only: str | None = None
) -> tuple[dict[str, list[CommittedOffset]], dict[str, str]]:
    """The flow's groups (MirrorCheckpointConnector.findConsumerGroups) and their committed offsets:
    groups passing the group filter with at least one offset on a replicated topic (`only`: and
    fully matching this regex)."""
    filters = FlowFilters.for_flow(clients.flow)
    timeout = clients.admin_timeout
    admin, conn = clients.admin("source"), clients.connection("source")
    names = list(groups) if groups is not None else list_groups(admin, conn, timeout)
    names = [g for g in names if filters.should_replicate_group(g) and (not only or re.fullmatch(only, g))]
    offsets, errors = fetch_group_offsets(admin, conn, names, timeout)
    rules = TopicRules(filters)
    keep = {g: offs for g, offs in offsets.items() if any(o.offset >= 0 and rules.replicated(o.topic) for o in offs)}
    return keep, errors


def load_maps(clients: FlowClients, partitions: Iterable[tuple[str, int]]) -> Mapping[tuple[str, int], Translator]:
    """The offset map of the given SOURCE partitions (read from the target's state)."""
    parts = sorted(set(partitions))
    return StateStore(clients).offset_map(parts) if parts else {}


# -- emission -------------------------------------------------------------------------------------
@dataclass
class CheckpointRun:
    """What one checkpoint pass did, for the CLI, the DAG logs and tests."""

    flow: str
    topic: str
    groups: list[str] = field(default_factory=list)
    rows: list[tuple[TranslatedOffset, str]] = field(default_factory=list)  # (translation, action)
    emitted: list[Checkpoint] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # group -> error
    skipped_reason: str | None = None
    state_skip: str | None = None  # the flow's state stopped the pass: why, and the next step (FlowState)
    created_topic: bool = False
    store: CheckpointStore | None = None
    offset_map: Any = None  # the fold of the offset map after the pass (map_upkeep.FoldReport)
    latency_ms: int = -1  # checkpoint-latency-ms of the pass (-1: nothing emitted)

    def run_record(self, at: int) -> RunRecord:
        """The pass's summary for the flow's run log: the checkpoints it emitted and their latency
        (the first RUN_LOG_CHECKPOINTS: a record must stay under the broker's message size), from
        which ops.observe.metrics computes each group's and partition's min/avg/max over the recent passes."""
        if len(self.emitted) > RUN_LOG_CHECKPOINTS:
            log.info(
                "flow %s: the run log keeps %d of the %d checkpoints of this pass (their latency metrics)",
                self.flow,
                RUN_LOG_CHECKPOINTS,
                len(self.emitted),
            )
        cps = [
            GroupCheckpoints(c.group, c.topic, c.partition, self.latency_ms) for c in self.emitted[:RUN_LOG_CHECKPOINTS]
        ]
        errors = [f"group {g}: {e}" for g, e in sorted(self.errors.items())][:MAX_ERRORS]
        return RunRecord("checkpoint", at, not self.errors, errors=errors, checkpoints=cps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "topic": self.topic,
            "groups": self.groups,
            "emitted": len(self.emitted),
            "created_topic": self.created_topic,
            "skipped_reason": self.skipped_reason,
            "errors": self.errors,
            "offsets": [{**asdict(t), "action": a} for t, a in self.rows],
            "offset_map": self.offset_map.to_dict() if self.offset_map is not None else None,
        }


def plan_checkpoints(
    store: CheckpointStore, rows: Iterable[TranslatedOffset]
) -> tuple[list[tuple[TranslatedOffset, str]], list[Checkpoint]]:
    """Apply the monotonicity guard to translated offsets (pure): (row, action) pairs and the
    checkpoints to write. Rows without a translation get action `no-translation` or
    `not-replicated`."""
    decided: list[tuple[TranslatedOffset, str]] = []
    emit: list[Checkpoint] = []
    for row in rows:
        cp = row.checkpoint()
        if cp is None:
            decided.append((row, NOT_REPLICATED if row.status == NOT_REPLICATED else "no-translation"))
            continue
        prev = store.previous(cp)
        action = store.decide_after(cp, prev)
        if action == "held" and row.reordered and prev is not None and cp.upstream_offset > prev.upstream_offset:
            # a backfill put older records after newer ones: a group moving on from the backfilled
            # range into the live one lands lower on the target, exactly; not a regression to hold
            action = "advanced"
        decided.append((row, action))
        if action in EMIT_ACTIONS:
            emit.append(cp)
    return decided, emit


def emit_checkpoints(
    cfg: Config,
    flow: FlowConfig,
    *,
    groups: Iterable[str] | None = None,
    maps: Mapping[tuple[str, int], Translator] | None = None,
    now_ms: int | None = None,
    clients: FlowClients | None = None,
    refresh_groups: bool = True,
    only: str | None = None,
) -> CheckpointRun:
    """One checkpoint pass for `flow` (see the module docstring). `only`: just the groups this
    regex fully matches (the others keep their checkpoints as they are).

    `refresh_groups=False` (a run between two `refresh.groups.interval.seconds` refreshes, as
    MM2 checkpoints its known groups between refreshes) skips listing the source's groups and
    checkpoints the groups that already have checkpoints on the target."""
    with flow_clients(cfg, flow, clients) as c:
        return _emit(c, groups, maps, now_ms, refresh_groups, only)


def _emit(
    clients: FlowClients,
    groups: Iterable[str] | None,
    maps: Mapping[tuple[str, int], Translator] | None,
    now_ms: int | None,
    refresh_groups: bool = True,
    only: str | None = None,
) -> CheckpointRun:
    flow = clients.flow
    filters = FlowFilters.for_flow(flow)
    topic = filters.policy.checkpoints_topic(flow.source)
    run = CheckpointRun(flow.name, topic)
    if not flow.enabled:
        run.skipped_reason = "the flow is disabled (enabled=false)"
        return run
    state_skip = flow_state(clients).skip_reason(flow.name, "checkpoint")
    if state_skip:
        run.skipped_reason = run.state_skip = state_skip
        return run
    if not flow.props.get("emit.checkpoints.enabled", True):
        run.skipped_reason = "emit.checkpoints.enabled=false"
        run.offset_map = fold_after_checkpoint(clients)  # the map stays bounded without checkpoints too
        return run
    store: CheckpointStore | None = None
    if groups is None and not refresh_groups:
        store = CheckpointStore.load(clients)
        groups = store.groups()
    ts = int(time.time() * 1000) if now_ms is None else now_ms  # MM2: the time offsets were listed
    # the pass's reads do not wait for each other: the checkpoints and the whole offset map (which
    # the fold below looks at too) are read on the target while the source's group offsets come in
    look = None
    with ThreadPoolExecutor(max_workers=2) as pool:
        stored = pool.submit(CheckpointStore.load, clients) if store is None else None
        looked = pool.submit(look_at_map, clients) if maps is None else None
        offsets, run.errors = source_group_offsets(clients, groups, only)
        store = stored.result() if stored is not None else store
        if looked is not None:
            look = looked.result()
            maps = look[0].maps
    assert store is not None and maps is not None
    run.groups = sorted(offsets)
    committed = [o for offs in offsets.values() for o in offs]
    rows = translate_committed(filters, committed, maps)
    run.rows, run.emitted = plan_checkpoints(store, rows)
    if run.emitted:
        conn, timeout = clients.connection("target"), clients.admin_timeout
        rf = int(flow.props.get("checkpoints.topic.replication.factor", -1))
        run.created_topic = ensure_compacted_topic(clients.admin("target"), conn, topic, rf, timeout=timeout)
        produce_all(
            conn,
            topic,
            [(c.key(), c.value(), ts) for c in run.emitted],
            producer_conf=clients.overrides("target", "producer"),
            timeout=timeout,
        )
        # MM2's checkpoint-latency-ms: acknowledged minus the checkpoint's timestamp; one flush
        # acknowledges the pass's checkpoints together, so each gets this value (min/avg/max per
        # group and partition span the passes: ops.observe.metrics.checkpoint_samples)
        run.latency_ms = int(time.time() * 1000) - ts
        for c in run.emitted:
            store.update(c)
    run.store = store
    with ThreadPoolExecutor(max_workers=1) as pool:
        # every pass goes to the run log, also one that moved no group: the status page's "last
        # checkpoint pass" must say the checkpoints are alive, not when a group last moved
        at = ts + run.latency_ms if run.emitted else int(time.time() * 1000)
        logged = pool.submit(run_log.append, clients, run.run_record(at))
        # meanwhile keep the offset map bounded: fold it into its snapshots, prune what no
        # translation needs (from the look at the map taken at the start of the pass)
        run.offset_map = fold_after_checkpoint(clients, offsets, look)
        logged.result()
    return run


def translate_group(
    cfg: Config,
    flow: FlowConfig,
    group: str,
    maps: Mapping[tuple[str, int], Translator] | None = None,
    clients: FlowClients | None = None,
) -> list[TranslatedOffset]:
    """Live translation of one group's committed source offsets (for `mirrorflow translate`)."""
    with flow_clients(cfg, flow, clients) as c:
        return _translate_group(c, group, maps)


def _translate_group(
    clients: FlowClients, group: str, maps: Mapping[tuple[str, int], Translator] | None
) -> list[TranslatedOffset]:
    flow = clients.flow
    filters = FlowFilters.for_flow(flow)
    offsets, errors = fetch_group_offsets(
        clients.admin("source"), clients.connection("source"), [group], clients.admin_timeout
    )
    if group in errors:
        raise MirrorflowError(f"consumer group {group!r} on cluster {flow.source!r}: {errors[group]}")
    committed = [o for o in offsets.get(group, []) if o.offset >= 0]
    if not committed:
        raise MirrorflowError(
            f"consumer group {group!r} has no committed offsets on cluster {flow.source!r} "
            f"(unknown group, or it never committed)"
        )
    rules = TopicRules(filters)
    if maps is None:
        maps = load_maps(clients, {(o.topic, o.partition) for o in committed if rules.replicated(o.topic)})
    return translate_committed(filters, committed, maps)
