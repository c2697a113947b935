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
from functools import partial
from typing import Any

from mirrorflow.clients import FlowClients, flow_clients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.groups.checkpoint_store import CheckpointStore, plan_checkpoints
from mirrorflow.groups.group_offsets import CommittedOffset, fetch_group_offsets, list_groups
from mirrorflow.groups.map_upkeep import fold_after_checkpoint
from mirrorflow.groups.translation import (
    TopicRules,
    TranslatedOffset,
    Translator,
    load_maps,
    translate_committed,
    translation_table,
)
from mirrorflow.kafka.retry import StepRetry
from mirrorflow.kafka.topic_admin import ensure_compacted_topic, produce_all
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.mm2.formats import Checkpoint
from mirrorflow.reporting import Report
from mirrorflow.state import run_log
from mirrorflow.state.compaction import MapLook, look_at_map
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.run_log import MAX_ERRORS, GroupCheckpoints, RunRecord

# (group, partition) checkpoints a pass records in the run log (~40 bytes each: 200 KB, well under
# the broker's 1 MiB message.max.bytes; 1,000 groups x 100 partitions would be 4 MB and refused)
RUN_LOG_CHECKPOINTS = 5000
log = logging.getLogger(__name__)


# -- source side --------------------------------------------------------------------------------
def source_group_offsets(
    clients: FlowClients, groups: Iterable[str] | None = None, only: str | None = None
) -> tuple[dict[str, list[CommittedOffset]], dict[str, str]]:
    """The flow's groups (MirrorCheckpointConnector.findConsumerGroups) and their committed offsets:
    groups passing the group filter with at least one offset on a replicated topic (`only`: and
    fully matching this regex)."""
    filters = FlowFilters.for_flow(clients.flow)
    timeout = clients.step_timeout  # a checkpoint pass's step (StepRetry)
    admin, conn = clients.admin("source"), clients.connection("source")
    names = list(groups) if groups is not None else list_groups(admin, conn, timeout)
    names = [g for g in names if filters.should_replicate_group(g) and (not only or re.fullmatch(only, g))]
    offsets, errors = fetch_group_offsets(admin, conn, names, timeout)
    rules = TopicRules(filters)
    keep = {g: offs for g, offs in offsets.items() if any(o.offset >= 0 and rules.replicated(o.topic) for o in offs)}
    return keep, errors


# -- emission -------------------------------------------------------------------------------------
@dataclass
class CheckpointRun(Report):
    """What one checkpoint pass did, for the CLI, the DAG logs and tests: the headline, then per
    group its translation and checkpoint decision, then the fold of the offset map."""

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
    target: str = ""  # the target cluster's alias, where the checkpoints are written

    def run_record(self, at: int) -> RunRecord:
        """The pass's summary for the flow's run log: the checkpoints it emitted and their latency
        (the first RUN_LOG_CHECKPOINTS: a record must stay under the broker's message size), from
        which observe.metrics computes each group's and partition's min/avg/max over the recent passes."""
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

    def lines(self) -> list[str]:
        if self.skipped_reason:
            out = [f"{self.flow}: checkpoints skipped: {self.skipped_reason}"]
        else:
            out = [
                f"{self.flow}: {len(self.groups)} group(s), {len(self.emitted)} checkpoint(s) written to "
                f"{self.topic} on {self.target}" + (" (topic created)" if self.created_topic else "")
            ]
            by_group: dict[str, list[tuple[TranslatedOffset, str]]] = {}
            for row, action in self.rows:
                by_group.setdefault(row.group, []).append((row, action))
            for g in self.groups:
                mine = by_group.get(g, [])
                out += ["", f"group {g}", *translation_table([r for r, _ in mine], [a for _, a in mine]).split("\n")]
        if self.offset_map is not None:  # the fold that keeps the offset map bounded (map_upkeep)
            out += ["", self.offset_map.line()]
        return out

    def brief(self) -> dict[str, Any]:
        return {"groups": len(self.groups), "emitted": len(self.emitted), "topic": self.topic}

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
    run = CheckpointRun(flow.name, filters.policy.checkpoints_topic(flow.source), target=flow.target)
    # every step that reads or writes a cluster rides out broker outages (a connection reset, a
    # restart) up to broker.outage.max.seconds; past it the pass fails naming the cluster and the step
    steps = StepRetry(f"checkpoint pass of flow {flow.name}", clients.outage_timeout)
    if _skipped(clients, steps, run):
        return run
    ts = int(time.time() * 1000) if now_ms is None else now_ms  # MM2: the time offsets were listed
    got = _read(clients, steps, run.topic, groups, maps, refresh_groups, only)
    run.groups, run.errors = sorted(got.offsets), got.errors
    rows = translate_committed(filters, [o for offs in got.offsets.values() for o in offs], got.maps)
    run.rows, run.emitted = plan_checkpoints(got.store, rows)
    if run.emitted:  # all translated and guarded: written together, again after a transient failure
        steps.run(
            flow.target, f"writing {len(run.emitted)} checkpoint(s) to {run.topic!r}", lambda: _write(clients, run, ts)
        )
        # MM2's checkpoint-latency-ms: acknowledged minus the checkpoint's timestamp; one flush
        # acknowledges the pass's checkpoints together, so each gets this value (min/avg/max per
        # group and partition span the passes: observe.metrics.checkpoint_samples)
        run.latency_ms = int(time.time() * 1000) - ts
        for c in run.emitted:
            got.store.update(c)
    run.store = got.store
    with ThreadPoolExecutor(max_workers=1) as pool:
        # every pass goes to the run log, also one that moved no group: the status page's "last
        # checkpoint pass" must say the checkpoints are alive, not when a group last moved
        at = ts + run.latency_ms if run.emitted else int(time.time() * 1000)
        logged = pool.submit(run_log.append, clients, run.run_record(at))
        # meanwhile keep the offset map bounded: fold it into its snapshots, prune what no
        # translation needs (from the look at the map taken at the start of the pass)
        run.offset_map = fold_after_checkpoint(clients, got.offsets, got.look)
        logged.result()
    return run


def _skipped(clients: FlowClients, steps: StepRetry, run: CheckpointRun) -> bool:
    """Whether the pass does not run (the flow disabled, paused, failed over; checkpoints off), with
    the reason in `run`."""
    flow = clients.flow
    if not flow.enabled:
        run.skipped_reason = "the flow is disabled (enabled=false)"
        return True
    state_skip = steps.run(
        flow.target, "reading the flow's state", lambda: flow_state(clients).skip_reason(flow.name, "checkpoint")
    )
    if state_skip:
        run.skipped_reason = run.state_skip = state_skip
        return True
    if not flow.props.get("emit.checkpoints.enabled", True):
        run.skipped_reason = "emit.checkpoints.enabled=false"
        run.offset_map = fold_after_checkpoint(clients)  # the map stays bounded without checkpoints too
        return True
    return False


@dataclass
class PassReads:
    """What a checkpoint pass reads before it translates anything."""

    store: CheckpointStore  # the checkpoints on the target
    offsets: dict[str, list[CommittedOffset]]  # the groups' committed offsets on the source
    errors: dict[str, str]  # group -> why its offsets could not be read
    maps: Mapping[tuple[str, int], Translator]  # the offset map
    look: MapLook | None = None  # the whole map as read, for the fold after the pass


def _read(
    clients: FlowClients,
    steps: StepRetry,
    topic: str,
    groups: Iterable[str] | None,
    maps: Mapping[tuple[str, int], Translator] | None,
    refresh_groups: bool,
    only: str | None,
) -> PassReads:
    """The pass's reads, which do not wait for each other: the checkpoints and the whole offset map
    (which the fold looks at too) are read on the target while the source's group offsets come in."""
    source, target = clients.flow.source, clients.flow.target

    def load_store() -> CheckpointStore:
        return steps.run(target, f"reading the checkpoints in {topic!r}", lambda: CheckpointStore.load(clients))

    store: CheckpointStore | None = None
    if groups is None and not refresh_groups:  # between refreshes: the groups already checkpointed
        store = load_store()
        groups = store.groups()
    look: MapLook | None = None
    with ThreadPoolExecutor(max_workers=2) as pool:
        stored = pool.submit(load_store) if store is None else None
        looked = (
            pool.submit(steps.run, target, "reading the offset map", partial(look_at_map, clients))
            if maps is None
            else None
        )
        offsets, errors = steps.run(
            source, "reading the groups' committed offsets", lambda: source_group_offsets(clients, groups, only)
        )
        store = stored.result() if stored is not None else store
        if looked is not None:
            look = looked.result()
            maps = look[0].maps
    assert store is not None and maps is not None
    return PassReads(store, offsets, errors, maps, look)


def _write(clients: FlowClients, run: CheckpointRun, ts: int) -> None:
    """The pass's checkpoints to partition 0 of the checkpoints topic (created on first use)."""
    conn, timeout = clients.connection("target"), clients.admin_timeout
    rf = int(clients.flow.props.get("checkpoints.topic.replication.factor", -1))
    created = ensure_compacted_topic(clients.admin("target"), conn, run.topic, rf, timeout=timeout)
    run.created_topic = run.created_topic or created  # an attempt before may have created it
    records = [(c.key(), c.value(), ts) for c in run.emitted]
    produce_all(conn, run.topic, records, producer_conf=clients.overrides("target", "producer"), timeout=timeout)


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
