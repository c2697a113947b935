"""Copy one work unit: the unit loop that runs inside a Spark task (or a thread of `copy_direct`).

A unit is a planned source range of one partition. The plan is advisory: after init_transactions
(which fences older attempts, see `writer`) the unit re-reads its committed progress
(read_committed) and copies only what the progress's ledger does not cover yet, continuing right
after the committed progress: never a hole, never a covered range twice. Offsets that source
retention deleted before they were copied become a gap event (an offset-map entry with `lost`, and
the progress's `lost`/`gaps`), and the copy continues at the log start. Each range is read in
batches (`reader`) and each batch is one transaction (`writer`); a unit that reaches
`unit.max.bytes` stops after its current batch (status `partial`) and the next run continues.

Clients are built inside the task (they cannot be pickled) by the task's FlowClients; executors
load the config themselves, so secrets never travel in the plan. Test crash points come in as a
`faults.Faults` chosen where the task starts (production: `NO_FAULTS`).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from mirrorflow.clients import FlowClients
from mirrorflow.errors import (
    FencedError,
    LeaseError,
    MirrorflowError,
    StateError,
    TopicError,
    TransactionAbortedError,
)
from mirrorflow.kafka.connection import kafka_error
from mirrorflow.kafka.log_reader import LogReader
from mirrorflow.kafka.retry import Outage, transient
from mirrorflow.replication.anchors import is_anchor, write_anchors
from mirrorflow.replication.budget import CopyBudget
from mirrorflow.replication.faults import NO_FAULTS, Faults
from mirrorflow.replication.planner import Unit, stopped_message
from mirrorflow.replication.reader import (
    OPEN_END,
    Batch,
    BatchLimits,
    Follow,
    RangeReader,
    consumer_required,
    outage_bound_s,
)
from mirrorflow.replication.transaction_writer import TransactionWriter, is_fenced
from mirrorflow.state.lease import LeaseGuard
from mirrorflow.state.offset_map import subtract_ranges, uncovered
from mirrorflow.state.records import Progress
from mirrorflow.state.state_topics import offset_map_topic, progress_topic, transactional_id
from mirrorflow.state.state_writer import StateWriter
from mirrorflow.state.store import StateStore


@dataclass
class UnitResult:
    topic: str
    partition: int
    target_topic: str
    status: str  # ok | partial (stopped at unit.max.bytes) | fenced | failed | skipped (nothing left)
    start: int  # planned range
    end: int
    copied_from: int = -1  # the source range this attempt covered
    copied_to: int = -1
    records: int = 0
    bytes: int = 0
    transactions: int = 0
    lost: int = 0  # offsets lost to source retention, recorded as a gap event
    lost_range: tuple[int, int] | None = None
    tgt_end: int = -1
    target_from: int = -1  # target offset of the first record this attempt wrote (-1: none)
    last_timestamp: int = -1  # source timestamp of the last copied record
    max_latency_ms: int = -1  # commit time minus source timestamp, worst record of the unit
    # MM2's replication-latency-ms and record-age-ms families (see `committed`): min, and a sum over
    # `timed_records` for the average; the record age's max is `max_age_ms`
    min_latency_ms: int = -1
    sum_latency_ms: int = 0
    min_age_ms: int = -1
    max_age_ms: int = -1
    sum_age_ms: int = 0
    timed_records: int = 0
    error: str | None = None
    error_type: str | None = None
    started: float = 0.0  # wall clock
    copy_started: float = 0.0  # after clients are up and progress was re-read
    finished: float = 0.0
    # (src_from, src_to, records, bytes) of each batch counted, to recount after an outage
    _batches: list[tuple[int, int, int, int]] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("_batches", None)
        return d

    def _time(self, batch: Batch, now_ms: int, opened_ms: int) -> None:
        first, last, n = batch.first_timestamp, batch.last_timestamp, len(batch.records)
        if n == 0 or first <= 0 or last <= 0:
            return
        lat = sorted((now_ms - first, now_ms - last))
        age = sorted((max(0, opened_ms - first), max(0, opened_ms - last)))
        self.min_latency_ms = lat[0] if self.min_latency_ms < 0 else min(self.min_latency_ms, lat[0])
        self.min_age_ms = age[0] if self.min_age_ms < 0 else min(self.min_age_ms, age[0])
        self.max_age_ms = max(self.max_age_ms, age[1])
        self.sum_latency_ms += n * (lat[0] + lat[1]) // 2
        self.sum_age_ms += n * (age[0] + age[1]) // 2
        self.timed_records += n

    def recount(self, progress: Progress) -> None:
        """After an outage, count only the batches the committed progress holds: a commit reported
        done whose transaction the broker did not keep is copied again and must not count twice."""
        ranges = list(progress.covered)
        kept = [b for b in self._batches if b[1] <= b[0] or uncovered(ranges, b[0], b[1]) == 0]
        if len(kept) != len(self._batches):
            if not kept or kept[0] != self._batches[0]:
                self.target_from = -1  # its first batch is copied again: the next commit says where it landed
            self._batches = kept
            self.records = sum(b[2] for b in kept)
            self.bytes = sum(b[3] for b in kept)
            self.transactions = len(kept)

    def committed(self, batch: Batch, progress: Progress, opened_ms: int = 0, first_target: int = -1) -> None:
        """Count a batch whose transaction committed; `progress` is the progress after it. The
        latency (commit time - source timestamp) and record age (time the batch was opened -
        source timestamp) are measured on the batch's first and last records, whose timestamps
        bound the batch's when they ascend (the average weights each batch by its records)."""
        now_ms = int(time.time() * 1000)
        self._time(batch, now_ms, opened_ms or now_ms)
        self.copied_to = batch.src_to
        self.records += len(batch.records)
        self.bytes += batch.nbytes
        self.transactions += 1
        self._batches.append((batch.src_from, batch.src_to, len(batch.records), batch.nbytes))
        self.tgt_end = progress.tgt_end
        if batch.records:
            if self.target_from < 0:
                self.target_from = first_target
            self.last_timestamp = batch.last_timestamp
            if batch.first_timestamp > 0:
                self.max_latency_ms = max(self.max_latency_ms, now_ms - batch.first_timestamp)


def background(call: Callable[[], None]) -> Callable[[], None]:
    """Start `call` in a thread now; the function returned waits for it and raises what it raised."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            failed.append(exc)

    t = threading.Thread(target=run, name="mirrorflow-lease-guard", daemon=True)
    t.start()

    def wait() -> None:
        t.join()
        if failed:
            raise failed[0]

    return wait


def u_where(unit: Unit) -> str:
    return f"{unit.topic}[{unit.partition}]"


def ranges_to_copy(unit: Unit, progress: Progress) -> list[tuple[int, int]]:
    """The parts of the unit the committed progress does not cover, starting right after it (a
    backfill unit: anywhere in its range, also below the progress)."""
    if unit.backfill:
        return subtract_ranges(unit.start, unit.end, list(progress.covered))
    start = progress.next if progress.next >= 0 else unit.start
    todo = subtract_ranges(start, unit.end, list(progress.covered))
    if not todo and progress.next < 0 and unit.start >= unit.end:
        todo = [(unit.start, unit.start)]  # anchor a fresh partition's progress at its initial position
    return todo


def retention_gap(a: int, b: int, log_start: int) -> tuple[int, tuple[int, int] | None]:
    """Where copying [a, b) can start, and the range source retention deleted before it was copied."""
    if a >= log_start:
        return a, None
    start = min(log_start, b)
    return start, (a, start)


class UnitCopier:
    """Copies one unit; `run()` returns a UnitResult and never raises for expected failures."""

    def __init__(
        self,
        clients: FlowClients,
        unit: Unit,
        faults: Faults = NO_FAULTS,
        store: StateStore | None = None,
        source_consumer: Any = None,
        follow: Follow | None = None,
        budget: CopyBudget | None = None,
        guard: Callable[[], None] | None = None,
    ) -> None:
        self.clients, self.flow, self.unit, self.faults = clients, clients.flow, unit, faults
        self.guard = guard  # raises LeaseError when the run no longer holds the flow's lease (LeaseGuard)
        self.follow = follow  # continuous runs: a unit ending at OPEN_END copies until follow.stop()
        # the task's memory budget sizes the clients (copy_units: over the partitions read at once)
        self.budget = budget or CopyBudget.of(self.flow, follow=follow is not None)
        # a task's units share its state reader and source consumer (see copy_units)
        self.store = store or StateStore(clients)
        self._shared_consumer = source_consumer
        self.result = UnitResult(
            unit.topic, unit.partition, unit.target_topic, "ok", unit.start, unit.end, started=time.time()
        )
        self.writer: TransactionWriter | None = None
        self.reader: RangeReader | None = None
        self.outage = Outage(outage_bound_s(self.flow))  # broker.outage.max.seconds, for the whole unit

    def run(self) -> UnitResult:
        r = self.result
        try:
            self._run_through_outages()
        except FencedError as exc:
            r.status, r.error, r.error_type = "fenced", str(exc), "FencedError"
        except MirrorflowError as exc:
            r.status, r.error, r.error_type = "failed", str(exc), type(exc).__name__
        except KafkaException as exc:
            if is_fenced(exc):
                r.status, r.error_type, r.error = "fenced", "FencedError", self._fenced_message()
            else:
                e = kafka_error(exc)
                r.status, r.error_type = "failed", "KafkaException"
                r.error = f"{self.unit.topic}[{self.unit.partition}]: {e.str() if e else exc}"
        finally:
            self._close()
            r.finished = time.time()
        return r

    def _run_through_outages(self) -> None:
        """`_run`, resumed after a broker outage or a transaction it cost: the old producer goes
        first, a new one fences its epoch, the committed progress is read again (the outcome of
        the last commit may be unknown) and the copy goes on from there, up to
        broker.outage.max.seconds (then one BrokerUnavailableError naming the cluster)."""
        r = self.result
        while True:
            done = r.transactions
            try:
                self._run()
                break
            except (KafkaException, TransactionAbortedError) as exc:
                if not transient(exc):
                    raise
                failure = exc.with_traceback(None)  # its frames hold the old producer
            if r.transactions > done:  # progress since the last failure: a new outage
                self.outage.over()
            self._close()
            self.outage.wait(self.flow.target, f"copying {u_where(self.unit)}", failure)
        if r.status == "skipped" and r.transactions:  # an earlier attempt copied it all
            r.status = "ok"

    def _run(self) -> None:
        u, r = self.unit, self.result
        writer = self.writer = TransactionWriter(self.clients, u, self.faults, self.outage, self.budget)
        nprog, nmap = self._state_partitions()
        writer.start(StateWriter(self.flow, nprog, nmap))
        # after fencing: does the run still hold the flow's lease (state.lease.LeaseGuard)? Asked beside
        # the progress read (a task's first read of a topic waits for its connection), awaited before copying
        guard = background(self.guard) if self.guard is not None else None
        # re-read the progress AFTER fencing: the committed progress is the truth, the plan is advisory.
        # The read ends at the progress partition's high watermark: it waits for the transactions open
        # below it (another unit's, caught by an outage; a dead writer's is aborted at its timeout)
        bound = max(outage_bound_s(self.flow), writer.txn_timeout_s + 30)
        progress = self.store.progress([(u.topic, u.partition)], timeout=bound).get((u.topic, u.partition))
        if guard is not None:
            try:
                guard()
            except LeaseError as exc:  # a run taken over since commits nothing
                raise FencedError(f"{u_where(u)}: {exc}") from None
        progress = progress or Progress.empty(u.topic, u.partition)
        why = progress.identity_problem(u.topic_id, u.target_topic, u.target_topic_id) if progress.next >= 0 else None
        if why is not None:  # the topics changed since the progress was written (or since planning)
            raise StateError(stopped_message(why, self.flow.name, u.topic, u.target_topic))
        progress = progress.with_identity(u.topic_id, u.target_topic, u.target_topic_id)
        if r.transactions:  # resumed after an outage: what the broker kept is the truth
            r.recount(progress)
        todo = ranges_to_copy(u, progress)
        if not todo:
            r.status = "skipped"
            return
        consumer = self._shared_consumer
        if consumer is None:
            consumer = self.clients.consumer("source", self.budget.consumer(), consumer_required(self.flow))
        limits = BatchLimits.of(self.flow, self.budget.batch_bytes)
        reader = self.reader = RangeReader(
            consumer, u.topic, u.partition, limits, cluster=self.flow.source, follow=self.follow
        )
        # a source restart makes the partition briefly unknown: wait up to the outage bound, not 60 s
        log_start = LogReader(self.clients.connection("source"), consumer).log_start(
            u.topic, u.partition, timeout=self.clients.outage_timeout
        )
        r.copy_started = time.time()
        for a, b in todo:
            start, lost_range = retention_gap(a, b, log_start)
            if b >= OPEN_END and (progress.next < 0 or lost_range):
                # followed: anchor a fresh partition's start (and record a gap) now, not with its
                # first new record, so the next run continues from here even if none comes
                progress = self._copy_range(start, start, lost_range, progress)
                lost_range = None
            progress = self._copy_range(start, b, lost_range, progress)
            if reader.unit_full:
                r.status = "partial"
                break

    def _copy_range(self, a: int, b: int, lost_range: tuple[int, int] | None, progress: Progress) -> Progress:
        """Copy [a, b), batch by batch; the first batch carries the range's gap event, if any."""
        assert self.reader is not None and self.writer is not None
        r = self.result
        if r.copied_from < 0:
            r.copied_from = lost_range[0] if lost_range else a
        if lost_range:
            r.lost += lost_range[1] - lost_range[0]
            r.lost_range = lost_range
        for batch in self.reader.batches(a, b):
            opened_ms = int(time.time() * 1000)
            progress = self.writer.write(batch, progress, lost_range)
            r.committed(batch, progress, opened_ms, self.writer.first_target)
            lost_range = None
        return progress

    def _state_partitions(self) -> tuple[int, int]:
        """Check the target topic (synced, with this partition) and the state topics; the state
        topics' partition counts."""
        u, flow = self.unit, self.flow
        n = self.clients.partitions("target", u.target_topic)
        if 0 < n <= u.partition:  # partitions added since this run first looked
            n = self.clients.partitions("target", u.target_topic, refresh=True)
        if n == 0:
            raise TopicError(
                f"target topic {u.target_topic!r} is missing on cluster {flow.target!r} "
                f"(source {u.topic}[{u.partition}]): run `mirrorflow sync` first"
            )
        if n <= u.partition:
            raise TopicError(
                f"target topic {u.target_topic!r} on cluster {flow.target!r} has {n} partitions, "
                f"source {u.topic!r} has partition {u.partition}: run `mirrorflow sync` first"
            )
        nprog = self.clients.partitions("target", progress_topic(flow))
        nmap = self.clients.partitions("target", offset_map_topic(flow))
        if not nprog or not nmap:
            raise StateError(f"state topics of flow {flow.name} are missing on cluster {flow.target!r}")
        return nprog, nmap

    def _fenced_message(self) -> str:
        u = self.unit
        return (
            f"{u.topic}[{u.partition}]: fenced by another attempt "
            f"(transactional.id {transactional_id(self.flow, u.topic, u.partition)}); it owns this partition now"
        )

    def _close(self) -> None:
        if self.reader is not None:
            with contextlib.suppress(Exception):  # best effort: the unit's outcome is decided
                if self._shared_consumer is None:
                    self.reader.consumer.close()
                else:
                    self.reader.consumer.unassign()
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def copy_unit(clients: FlowClients, unit: Unit, faults: Faults = NO_FAULTS) -> UnitResult:
    return UnitCopier(clients, unit, faults).run()


def copy_units(
    clients: FlowClients,
    units: Iterable[Unit],
    faults: Faults = NO_FAULTS,
    in_flight: int | None = None,
    follow: Follow | None = None,
    owner: str | None = None,
) -> list[UnitResult]:
    """Copy a task's units, up to `in_flight` partitions at a time (default: the flow's
    `task.partitions.in.flight`; a unit mostly waits on the brokers); the units of one partition run
    one after another, in order. Each lane reuses one state reader and one source consumer, so a
    unit costs its own transactional producer (whose transactional.id fences zombies of its
    partition) and its transactions, not a set of new clients. Results come in the units' order.
    `follow` (continuous runs): every partition gets its own lane, its unit copies until told to stop.
    The task's memory budget (`task.memory.bytes`) is split over the partitions it reads at once:
    its lanes, or fewer when fewer of its partitions have records to copy (`reading_at_once`).
    `owner`: the run's lease owner; each unit, once it has fenced its partition, checks that the run
    still holds the flow's lease (state.lease.LeaseGuard) and stops (fenced) when not."""
    units = list(units)
    results: list[UnitResult | None] = [None] * len(units)
    if follow is None:  # units that only anchor a fresh partition: all at once (replication.anchors)
        anchor_all(clients, units, results)
    by_partition: dict[tuple[str, int], list[int]] = {}
    for i, u in enumerate(units):
        if results[i] is None:
            by_partition.setdefault((u.topic, u.partition), []).append(i)
    lanes: queue.SimpleQueue[list[int]] = queue.SimpleQueue()
    for indexes in by_partition.values():
        lanes.put(indexes)
    if not by_partition:
        return [r for r in results if r is not None]
    in_flight = in_flight or int(clients.flow.props["task.partitions.in.flight"])
    if follow is not None:  # followed partitions never finish: each needs a lane of its own
        in_flight = len(by_partition)
    workers = max(1, min(in_flight, len(by_partition)))
    budget = CopyBudget.of(clients.flow, reading_at_once(units, workers), follow is not None)

    guard = LeaseGuard(clients, owner) if owner else None

    def lane() -> None:
        store = StateStore(clients)
        consumer = clients.consumer("source", budget.consumer(), consumer_required(clients.flow))
        try:
            while True:
                try:
                    indexes = lanes.get_nowait()
                except queue.Empty:
                    return
                for i in indexes:
                    check = guard.check if guard is not None else None
                    results[i] = UnitCopier(clients, units[i], faults, store, consumer, follow, budget, check).run()
        finally:
            clients.release(consumer)
            if store.has_reader:
                clients.release(store.reader.consumer)

    try:
        if workers == 1:
            lane()
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for f in [pool.submit(lane) for _ in range(workers)]:
                    f.result()
    finally:
        if guard is not None:
            guard.close()
    return [r for r in results if r is not None]


def anchor_all(clients: FlowClients, units: list[Unit], results: list[UnitResult | None]) -> None:
    """Anchor the task's fresh partitions with nothing to copy in one batch (replication.anchors)
    and fill in their results; a unit whose anchor was not acknowledged keeps no result and runs."""
    todo = [i for i, u in enumerate(units) if is_anchor(u)]
    if not todo:
        return
    started = time.time()
    done = write_anchors(clients, [units[i] for i in todo])
    finished = time.time()
    for i in todo:
        u = units[i]
        progress = done.get((u.topic, u.partition))
        if progress is not None:
            results[i] = UnitResult(
                u.topic,
                u.partition,
                u.target_topic,
                "ok",
                u.start,
                u.end,
                copied_from=u.start,
                copied_to=u.end,
                tgt_end=progress.tgt_end,
                started=started,
                copy_started=started,
                finished=finished,
            )


def reading_at_once(units: Iterable[Unit], lanes: int) -> int:
    """How many partitions a task reads at the same time: its lanes, or fewer when fewer of its
    partitions have records to copy (a quiet partition's lane fills no buffer). A followed
    partition (OPEN_END) counts as busy."""
    busy = {(u.topic, u.partition) for u in units if u.end > u.start}
    return max(1, min(lanes, len(busy)))
