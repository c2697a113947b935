"""What the status page shows of one flow, gathered from the target's state topics in one pass.

`observe.status` gives the per-partition truth (progress vs. source ends); this adds what an operator
asks next: the last run and its result, lag in seconds and the replication latency, the history of
lag and throughput (from the flow's run log, `state.run_log`: no database of its own), the consumer
groups (their last checkpoint, where each would resume on the target, and which ones the group
offset sync leaves alone and why), the last operations (`state.history`: who paused, stopped,
failed over...), whether a read-only mirror is read-only now (`metadata.read_only`) and what needs
attention, in plain words. `PageCache` keeps one build for
a few seconds, so a refresh storm reads Kafka once. Rendering is `mirrorflow_airflow.status_html`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.groups.checkpoint import CheckpointStore
from mirrorflow.groups.offset_sync import ACTIVE, UNKNOWN, sync_group_offsets
from mirrorflow.groups.render import resume_note
from mirrorflow.metadata.read_only import mirror_line
from mirrorflow.observe.status import FlowStatus, flow_status
from mirrorflow.state import run_log
from mirrorflow.state.history import OperationRecord, read_history
from mirrorflow.state.run_log import RunRecord

HISTORY = 120  # replicate runs drawn on the chart (the run log keeps a week)
OPERATIONS_SHOWN = 10  # the newest operations of the flow's history on its card
STALE_CHECKPOINT_S = 600  # no checkpoint pass for this long (and 3 intervals) needs attention


@dataclass(frozen=True)
class ChartPoint:
    """One replicate run on the chart: when it ended, the lag it left, what it copied and how fast."""

    at: int
    lag: int | None  # None: unknown (the run could not read the source's end)
    records: int
    rate: float  # records per second of its copy phase (0: nothing copied)
    ok: bool


@dataclass(frozen=True)
class GroupRow:
    """One consumer group on one remote partition: its last checkpoint and where it would resume."""

    group: str
    topic: str  # the remote (target) topic
    partition: int
    upstream: int  # the committed source offset the checkpoint translates
    resume_at: int  # the target offset the group resumes from after a failover / group sync
    committed: int | None  # the group's committed offset on the target now (None: none)
    state: str  # the group on the target: empty | missing | active | unknown
    action: str  # what the group offset sync does: write | skip-equal | skip-ahead | ...
    resume: str = ""  # how it resumes there: "" exactly, else earlier and how much it re-reads (render.resume_note)


@dataclass
class FlowPage:
    flow: str
    status: FlowStatus
    now_ms: int
    last_run: RunRecord | None = None
    last_checkpoint: RunRecord | None = None  # the last checkpoint pass (every pass is logged)
    last_checkpoint_written: RunRecord | None = None  # the last pass that wrote checkpoints (a group moved)
    chart: list[ChartPoint] = field(default_factory=list)
    groups: list[GroupRow] = field(default_factory=list)
    left_alone: dict[str, str] = field(default_factory=dict)  # group -> why the group sync leaves it alone
    group_note: str | None = None  # why no group is synced at all (disabled, paused, unreadable)
    problems: list[str] = field(default_factory=list)  # plain words, the most urgent first
    operations: list[OperationRecord] = field(default_factory=list)  # the newest of the history, oldest first
    checkpoint_every_s: int | None = None  # how often checkpoint passes should run (None: they do not)
    mirror: str | None = None  # mirror.read.only: whether the remote topics are read-only now (metadata.read_only)
    last_schemas: RunRecord | None = None  # the last schema pass (mirrorflow.schemas; flows with registries)

    @property
    def lag_seconds(self) -> float | None:
        """The worst partition's lag in seconds (the RPO); None when some partition's is unknown."""
        secs = [p.lag_seconds(self.now_ms) for p in self.status.partitions]
        return None if any(s is None for s in secs) else max((s for s in secs if s is not None), default=0.0)

    @property
    def latency_ms(self) -> int | None:
        """How old the oldest record was when the last run that copied something committed it
        (MM2's replication-latency-ms max: commit time minus source timestamp). After a pause or
        with a backlog this is the age of the backlog, not how far behind the flow is now (that
        is `lag_seconds`), so the page names it "record age when copied"."""
        for run in reversed(self.chart_runs):
            worst = max((p.latency_ms[2] for p in run.partitions), default=-1)
            if run.records and worst >= 0:
                return worst
        return None

    @property
    def window_records(self) -> int:
        return sum(r.records for r in self.chart_runs)

    @property
    def window_bytes(self) -> int:
        return sum(r.byte_count for r in self.chart_runs)

    chart_runs: list[RunRecord] = field(default_factory=list)

    @property
    def schemas_line(self) -> str | None:
        """The flow's schemas at a glance: the last schema pass (None: no pass recorded)."""
        run = self.last_schemas
        if run is None:
            return None
        when = _ago(self.now_ms, run.at)
        if not run.ok:
            return f"Schemas: the last pass ({when}) FAILED: {'; '.join(run.errors[:1])}"
        return f"Schemas: the last pass ({when}) copied {run.records} version(s) with their ids; none missing."


def flow_page(cfg: Config, flow: FlowConfig, now_ms: int | None = None) -> FlowPage:
    """Everything the page shows of `flow`; errors become problems, never exceptions."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    page = FlowPage(flow.name, flow_status(cfg, flow), now)
    if flow.enabled and flow.props.get("emit.checkpoints.enabled", True):
        page.checkpoint_every_s = int(flow.props.get("emit.checkpoints.interval.seconds", 60))
    if page.status.error is None:
        try:
            with FlowClients(cfg, flow) as clients:
                _history(clients, page)
                page.operations = read_history(clients, OPERATIONS_SHOWN)
                page.mirror = mirror_line(clients)
                _groups(cfg, flow, clients, page)
        except MirrorflowError as exc:
            page.problems.append(f"The flow's history could not be read from its target cluster: {exc}")
    page.problems = _problems(page) + page.problems
    return page


def _history(clients: FlowClients, page: FlowPage) -> None:
    runs = run_log.recent(clients, HISTORY * 3)  # checkpoint passes share the log with the runs
    replicate = [r for r in runs if r.kind == "replicate"][-HISTORY:]
    checkpoints = [r for r in runs if r.kind == "checkpoint"]
    page.chart_runs = replicate
    page.last_run = replicate[-1] if replicate else None
    page.last_checkpoint = checkpoints[-1] if checkpoints else None
    schemas = [r for r in runs if r.kind == "schemas"]
    page.last_schemas = schemas[-1] if schemas else None
    written = [r for r in checkpoints if r.checkpoints]
    page.last_checkpoint_written = written[-1] if written else None
    page.chart = [
        ChartPoint(r.at, r.lag, r.records, r.records / r.copy_phase_s if r.copy_phase_s > 0 else 0.0, r.ok)
        for r in replicate
        if not r.skipped
    ]


def _groups(cfg: Config, flow: FlowConfig, clients: FlowClients, page: FlowPage) -> None:
    """The groups' checkpoints and the group sync's view of them, read-only (a dry run that shows
    every group even when the sync is off: `failover=True` only lifts that switch), with how each
    resumes there (exactly, or earlier re-reading at most so many records)."""
    store = CheckpointStore.load(clients)
    run = sync_group_offsets(cfg, flow, store=store, dry_run=True, clients=clients, failover=True)
    if not flow.props.get("sync.group.offsets.enabled", False):
        page.group_note = (
            "the group offset sync is off (sync.group.offsets.enabled=false): "
            "groups are checkpointed, their offsets on the target are not committed"
        )
    elif run.skipped_reason:
        page.group_note = f"the group offset sync does nothing now: {run.skipped_reason}"
    for g, err in sorted(run.errors.items()):
        page.left_alone[g] = f"its state on the target could not be read ({err})"
    for plan in run.plans:
        if plan.state == ACTIVE:
            page.left_alone[plan.group] = (
                f"it has {plan.members} active member(s) on the target: its consumers own its offsets there"
            )
        elif plan.state == UNKNOWN:
            page.left_alone[plan.group] = "its state on the target could not be told"
        elif any(p.action == "skip-ahead" for p in plan.partitions):
            page.left_alone[plan.group] = "it is already ahead of its checkpoint on the target (never moved back)"
        checkpoints = store.for_group(plan.group)
        for p in plan.partitions:
            cp = checkpoints.get((p.topic, p.partition))
            page.groups.append(
                GroupRow(
                    plan.group,
                    p.topic,
                    p.partition,
                    cp.upstream_offset if cp is not None else -1,
                    p.checkpoint_offset,
                    p.target_offset,
                    plan.state,
                    p.action,
                    resume_note(p).strip(" ()"),
                )
            )


def _problems(page: FlowPage) -> list[str]:
    """What needs attention, in plain words."""
    s, out = page.status, []
    if s.error:
        return [f"The flow's state on its target cluster cannot be read, so nothing below is known: {s.error}"]
    if s.rpo is not None and s.rpo.missed:
        out.append(f"{s.rpo.line()}: records older than the objective are not on the target yet.")
    if s.state != "running":
        step = f" Next step: {s.next_step}." if s.next_step else ""
        out.append(f"The flow is not copying: it is {s.state}.{step}")
    if s.source_error:
        out.append(f"The source cluster did not answer, so the lag is unknown: {s.source_error}")
    for p in s.partitions:
        if p.stopped:
            out.append(f"{p.topic} partition {p.partition} is STOPPED: {p.note}")
    lost = sum(p.lost for p in s.partitions)
    if lost:
        out.append(
            f"{lost:,} record(s) were deleted by the source's retention before they could be copied "
            "(they are gone; the copy continued after them)."
        )
    run = page.last_run
    if run is not None and not run.ok:
        what = f"{run.failed_units} unit(s) failed" if run.failed_units else "it did not finish cleanly"
        out.append(
            f"The last run ({_ago(page.now_ms, run.at)}) failed: {what}." + "".join(f" {e}" for e in run.errors[:3])
        )
    cp = page.last_checkpoint
    stale_s = max(3 * page.checkpoint_every_s, STALE_CHECKPOINT_S) if page.checkpoint_every_s else None
    if cp is not None and stale_s and not s.state.startswith("stopped") and page.now_ms - cp.at > stale_s * 1000:
        out.append(
            f"No checkpoint pass since {_ago(page.now_ms, cp.at)} although they should run every "
            f"{page.checkpoint_every_s} s: groups would fail over to old offsets (is the checkpoint DAG "
            "paused or failing?)."
        )
    if cp is not None and not cp.ok:
        out.append(
            f"The last checkpoint pass ({_ago(page.now_ms, cp.at)}) failed for some groups: " + " ".join(cp.errors[:3])
        )
    if page.last_schemas is not None and not page.last_schemas.ok:
        out.append(f"{page.schemas_line} A consumer on the target cannot decode records whose schema is missing.")
    if not s.partitions and s.error is None:
        out.append("Nothing has been copied yet: no run has committed progress for this flow.")
    return out


def _ago(now_ms: int, at_ms: int) -> str:
    secs = max(0, (now_ms - at_ms) // 1000)
    if secs < 120:
        return f"{secs} s ago"
    if secs < 7200:
        return f"{secs // 60} min ago"
    return f"{secs // 3600} h ago"


class PageCache:
    """One build of every flow's page per config, kept `ttl` seconds: concurrent and repeated
    requests within that window share it (one request builds, the others wait for its result)."""

    def __init__(
        self,
        ttl: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        build: Callable[[Config, FlowConfig], FlowPage] = flow_page,
    ) -> None:
        self.ttl, self.clock, self.build = ttl, clock, build
        self._lock = threading.Lock()
        self._built: dict[str, tuple[float, list[FlowPage]]] = {}
        self.builds = 0  # how many times Kafka was read (tests)

    def invalidate(self) -> None:
        """Forget the build: the next request reads Kafka (after a change made from the page)."""
        with self._lock:
            self._built = {}

    def get(self, cfg: Config) -> list[FlowPage]:
        key = str(cfg.path)
        with self._lock:
            at, pages = self._built.get(key, (0.0, []))
            if key not in self._built or self.clock() - at >= self.ttl:
                pages = [self.build(cfg, f) for f in cfg.flows.values()]
                self._built = {key: (self.clock(), pages)}  # one config at a time is served
                self.builds += 1
            return pages
