"""Copy one task: its partitions read in lanes, many partitions' batches committed in one transaction.

A copy task holds the partitions of one task slot (state.task_slots) and copies them with the
slot's ONE transactional producer (replication.task.task_producer), as MirrorMaker 2's exactly-once
task does. After establishing its epoch (older attempts fenced) it re-reads the committed progress
of all its partitions at once (read_committed: the plan is advisory) and copies what their ledgers
do not cover yet, in ROUNDS: each round is one transaction holding a batch of every partition that
had one ready (its records, its offset-map entry, its new progress). Up to `task.partitions.in.flight`
lanes read at once, each with its own source consumer, one partition after another (a partition's
units in order); a lane goes on to its next partition in the same round while the round has room
(transaction.max.records / its share of the memory budget / time), so a run over many quiet
partitions commits a few transactions per task, not one per partition. A followed partition
(continuous runs) has a lane of its own, and a round lasts `continuous.poll.ms`: one transaction
per task per interval covering every partition that had new records.

Fencing: a fenced producer stops the task (every partition it had not finished ends `fenced`),
except when the producer came from the cache and was found fenced while establishing its epoch --
its epoch predates another producer's of the slot: the task re-initialises (fencing that one) unless
it is the zombie (replication.task.task_succession), at most twice. A fenced error is never a failure of
the run by itself; a run that lost the flow's lease writes nothing more (task_succession).

Broker outages are ridden through up to `broker.outage.max.seconds`: the producer goes, a new one
is established, the committed progress of every partition is read again (the outcome of the last
commit may be unknown) and the copy goes on from there. A partition that fails for good (a record
too large, its source range deleted while being copied, its target partition missing) fails alone:
the round is written again without it, nothing of it marked done.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import (
    ClusterError,
    FencedError,
    MirrorflowError,
    StateError,
    TopicError,
    TransactionAbortedError,
)
from mirrorflow.kafka.connection import kafka_error, warm_topics
from mirrorflow.kafka.retry import Outage, is_fenced, outage_failure, transient
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.replication.plan.planner import stopped_message
from mirrorflow.replication.plan.run_plan import TaskHead, Unit
from mirrorflow.replication.task.budget import CopyBudget
from mirrorflow.replication.task.collector import fewer_collections
from mirrorflow.replication.task.copier import PartitionCopy, UnitResult, reading_at_once, u_where
from mirrorflow.replication.task.copy_transaction import Claim, CopyTransaction
from mirrorflow.replication.task.faults import Faults
from mirrorflow.replication.task.follow import began_late, following
from mirrorflow.replication.task.reader import BatchLimits, consumer_required, outage_bound_s
from mirrorflow.replication.task.task_attempt import ONE_SHOT, TaskAttempt
from mirrorflow.replication.task.task_producer import (
    CACHE,
    LANES,
    SlotProducer,
    producer_defaults,
    producer_required,
    target_limits,
)
from mirrorflow.replication.task.task_rounds import Lane, Round
from mirrorflow.replication.task.task_succession import TaskSuccession
from mirrorflow.replication.task.transaction_writer import TransactionWriter
from mirrorflow.state.fencing import state_parts
from mirrorflow.state.names import offset_map_topic, progress_topic
from mirrorflow.state.records import Progress
from mirrorflow.state.state_writer import StateWriter
from mirrorflow.state.store import StateStore
from mirrorflow.state.task_slots import TaskLayout

REINITS = 2  # a stale cached producer re-initialised at most this often per attempt


class TaskCopier:
    """Copies one task's units; `run()` returns their results and never raises for expected failures."""

    def __init__(
        self,
        clients: FlowClients,
        layout: TaskLayout,
        slot: int,
        units: list[Unit],
        how: TaskAttempt = ONE_SHOT,
    ) -> None:
        self.clients, self.flow, self.how, self.faults, self.follow = clients, clients.flow, how, how.faults, how.follow
        self.layout, self.slot = layout, slot
        self.tid = layout.transactional_id(self.flow, slot)
        self.units = units
        self.results = [
            UnitResult(u.topic, u.partition, u.target_topic, "ok", u.start, u.end, started=time.time()) for u in units
        ]
        self.parts = PartitionCopy.of(units, self.results)
        self.outage = Outage(outage_bound_s(self.flow))
        lanes = how.in_flight or int(self.flow.props["task.partitions.in.flight"])
        self.lanes_n = len(self.parts) if self.follow is not None else max(1, min(lanes, len(self.parts)))
        # the process's memory budget, split over the lanes that read at once in it: those of every
        # task it copies at once (`budget_lanes`, copy_together), else this task's own
        busy = how.budget_lanes or reading_at_once(units, self.lanes_n)
        self.budget = CopyBudget.of(self.flow, busy, self.follow is not None)
        self.succession = TaskSuccession(clients, how.owner, how.number, slot, self.tid)
        self.sp: SlotProducer | None = None
        self.clean = False  # the task ended without a failure: its producer may serve the next run
        self.lanes: list[Lane] = []
        self.store = StateStore(clients)

    # -- the task ---------------------------------------------------------------------------------
    def run(self) -> list[UnitResult]:
        try:
            live = self._check_topics()
            if live:
                self._copy(live)
        finally:
            self._close()
            for r in self.results:
                r.finished = time.time()
                if r.status == "skipped" and r.transactions:  # an earlier attempt in this task copied it
                    r.status = "ok"
        return self.results

    def _copy(self, live: list[PartitionCopy]) -> None:
        limits = target_limits(self.clients, {pc.unit.target_topic for pc in live})
        self.limits = limits
        smallest = min(limits.values()) if limits else None
        self.defaults = producer_defaults(self.flow, self.budget, smallest)
        self.required = producer_required(self.flow, self.tid)
        reinits = 0
        while True:
            if self.sp is None:
                self.sp = CACHE.checkout(self.clients, self.tid, self.defaults, self.required)
            done = sum(r.transactions for r in self.results)
            try:
                self._attempt(live)
                self.clean = True
                return
            except FencedError as exc:
                self._end(live, "fenced", str(exc), "FencedError")
                return
            except (KafkaException, TransactionAbortedError) as exc:
                if isinstance(exc, KafkaException) and is_fenced(exc):
                    if self._may_reinit() and reinits < REINITS:
                        reinits += 1
                        self._drop()
                        continue
                    self._end(live, "fenced", self.succession.why_fenced(), "FencedError")
                    return
                if not transient(exc):
                    e = kafka_error(exc)
                    self._end(live, "failed", f"{e.str() if e else exc}", "KafkaException")
                    return
                failure = exc.with_traceback(None)  # its frames hold the old producer
            except MirrorflowError as exc:
                self._end(live, "failed", str(exc), type(exc).__name__)
                return
            # an outage: the old producer goes first, a new one fences its epoch, progress is read again --
            # unless this attempt is the zombie now (a transaction the broker aborted for its timeout may
            # hide a fencing): a new producer would fence the attempt that owns the slot
            if sum(r.transactions for r in self.results) > done:  # progress since the last failure: a new outage
                self.outage.over()
            self._drop()
            self._close_lanes(reuse=False)
            try:
                why = self._ride_out(failure)
            except (
                MirrorflowError,
                KafkaException,
            ) as exc:  # past broker.outage.max.seconds: one error naming the cluster
                e = kafka_error(exc)
                self._end(live, "failed", e.str() if e else str(exc), type(exc).__name__)
                return
            if why is not None:
                self._end(live, "fenced", why, "FencedError")
                return

    def _attempt(self, live: list[PartitionCopy]) -> None:
        """Establish the producer's epoch, read every partition's progress, copy in rounds."""
        sp = self.sp
        assert sp is not None
        self.established = False
        keys = [pc.key for pc in live]
        parts = [(pc.unit.target_topic, pc.unit.partition) for pc in live] + state_parts(self.clients, keys)
        claim = Claim(self.how.owner or "", self.how.number)
        self.succession.warm()  # asked for real after the epoch (establish: `holds`)
        txn = CopyTransaction(self.flow, sp)
        txn.establish(self.clients, self.slot, parts, claim, self.outage, self.succession.holds, self.faults)
        self.established = True
        # read AFTER the epoch is established: the committed progress is the truth, the plan is advisory.
        # The read ends at the progress partitions' high watermarks: it waits for transactions open below
        bound = max(outage_bound_s(self.flow), self._txn_timeout_s() + 30)
        progress = self.store.progress(keys, timeout=bound)
        todo = self._plan_ranges(live, progress)
        if not todo:
            return
        nprog = self.clients.partitions("target", progress_topic(self.flow))
        nmap = self.clients.partitions("target", offset_map_topic(self.flow))
        writer = TransactionWriter(
            txn,
            StateWriter(self.flow, nprog, nmap),
            self._target_ends,
            self.faults,
            self._txn_timeout_s(),
            self.limits,
        )
        self._rounds(writer, todo, progress)

    def _plan_ranges(self, live: list[PartitionCopy], progress: dict[tuple[str, int], Progress]) -> list[PartitionCopy]:
        """Each partition's ranges to read from its committed progress (identity checked); the
        partitions with something to copy."""
        keys = [pc.key for pc in live if not pc.failed]
        starts = self._log_starts(keys)
        todo = []
        for pc in live:
            if pc.failed:
                continue
            p = progress.get(pc.key) or Progress.empty(*pc.key)
            u = pc.unit
            why = p.identity_problem(u.topic_id, u.target_topic, u.target_topic_id) if p.next >= 0 else None
            if why is not None:  # the topics changed since the progress was written (or since planning)
                pc.fail(StateError(stopped_message(why, self.flow.name, u.topic, u.target_topic)))
                continue
            progress[pc.key] = p.with_identity(u.topic_id, u.target_topic, u.target_topic_id)
            if pc.plan(progress[pc.key], starts.get(pc.key, 0), self.follow is not None):
                todo.append(pc)
        now = time.time()
        for pc in todo:
            for r in pc.results:
                r.copy_started = r.copy_started or now
        return todo

    def _log_starts(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Each partition's source log start (one request; a source restart waited out up to the bound)."""
        if not keys:
            return {}
        c = self.clients
        return list_offsets(
            c.admin("source"), c.connection("source"), keys, OffsetSpec.earliest(), False, c.outage_timeout
        )

    def _rounds(
        self, writer: TransactionWriter, todo: list[PartitionCopy], progress: dict[tuple[str, int], Progress]
    ) -> None:
        """Rounds until every partition is done (or failed); each round one transaction."""
        follow = self.follow is not None
        limits = BatchLimits.of(self.flow, self.budget.batch_bytes)
        new = not self.lanes
        # the partitions with records to read: a fresh partition's empty range (its anchor) needs no
        # consumer of its own, nor its topic's metadata (a first run over 2,000 partitions, 200 with records)
        reading = [pc for pc in todo if any(rng.b > rng.a for rng in pc.ranges)]
        if new:
            want = len(todo) if follow else max(1, len(reading))  # followed: a lane each
            self.lanes = [self._lane(limits) for _ in range(min(self.lanes_n, want))]
        for lane in self.lanes:
            lane.reset()
        queue = list(todo)
        if follow:  # each followed partition has a lane of its own
            for lane, pc in zip(self.lanes, queue, strict=False):
                lane.pc = pc
            queue = []
        batch_s = self.follow.batch_s if self.follow is not None else 0.0
        with ThreadPoolExecutor(max_workers=len(self.lanes)) as pool:
            self._warm(pool, reading, new)
            while any(lane.busy for lane in self.lanes) or queue:
                self.succession.before_round()
                rnd = Round(writer, limits, queue, batch_s)
                writer.begin()
                for f in [pool.submit(lane.fill, rnd) for lane in self.lanes]:
                    f.result()
                rnd.raise_failure()
                if not rnd.parts:
                    writer.txn.give_up()
                    if follow and not any(lane.busy for lane in self.lanes):
                        return
                    continue
                for p in writer.commit(rnd.parts, progress):
                    pc, rng, ends_unit = rnd.owner[id(p)]
                    pc.committed(p, rng, ends_unit)
                for p in rnd.parts:
                    if p.error is not None:
                        rnd.owner[id(p)][0].fail(p.error)
                self.outage.over()

    def _warm(self, pool: ThreadPoolExecutor, reading: list[PartitionCopy], new: bool) -> None:
        """The new lanes learn the topics they will read, and the slot producer the topics it will write
        that it has not written before (kafka.connection.warm_topics), side by side. A new producer's
        first records to a topic it holds no metadata for wait on librdkafka's fast-refresh timer: the
        flush of a first run's round (25 target topics new to the producer) took 0.2-0.45 s, 0.08-0.14 s
        with the metadata asked for first (a new producer: every run of spark-submit and direct mode)."""
        sp = self.sp
        assert sp is not None  # _attempt holds it
        writes = {pc.unit.target_topic for pc in reading} | {progress_topic(self.flow), offset_map_topic(self.flow)}
        unknown = sorted(writes - sp.known)
        waits = [pool.submit(warm_topics, sp.producer, unknown)] if unknown else []
        if new:
            topics = sorted({pc.unit.topic for pc in reading})
            waits += [pool.submit(warm_topics, lane.consumer, topics) for lane in self.lanes]
        for w in waits:
            w.result()
        sp.known.update(unknown)

    # -- fencing ------------------------------------------------------------------------------------
    def _may_reinit(self) -> bool:
        """A cached producer found fenced while establishing its epoch: re-initialise unless this
        attempt is the zombie (TaskSuccession.superseded)."""
        sp = self.sp
        if sp is None or sp.fresh or self.established:
            return False
        return self.succession.superseded() is None

    def _ride_out(self, failure: BaseException) -> str | None:
        """Wait for the cluster after a transient failure, then why this attempt is the zombie now
        (None: it may go on). The zombie check reads the target too: in the outage it fails like the
        copy did and is waited out with it (it used to end the task at the lease read's own 60 s
        timeout: a continuous run lost its copy tasks to a 5-minute target outage)."""
        while True:
            alias = failure.alias if isinstance(failure, ClusterError) else self.flow.target
            self.outage.wait(alias, f"copying task {self.slot} of flow {self.flow.name}", failure)
            try:
                return self.succession.superseded()
            except (MirrorflowError, KafkaException) as exc:
                if not outage_failure(exc):
                    raise
                failure = exc

    def _end(self, live: list[PartitionCopy], status: str, error: str | None, error_type: str) -> None:
        """Every partition not finished ends `status` (fenced: named with the slot's id)."""
        for pc in live:
            if pc.finished:
                continue
            msg = (
                error
                if error is not None
                else (
                    f"{u_where(pc.unit)}: fenced by another attempt (transactional.id {self.tid}); "
                    "it owns this partition now"
                )
            )
            if status == "fenced" and error is not None and not error.startswith(u_where(pc.unit)):
                msg = f"{u_where(pc.unit)}: {error}"
            pc.end(status, msg, error_type)

    # -- clients ------------------------------------------------------------------------------------
    def _check_topics(self) -> list[PartitionCopy]:
        """The partitions whose target topic has the partition and whose state topics exist; the
        others fail naming what is missing."""
        flow, c = self.flow, self.clients
        if not c.partitions("target", progress_topic(flow)) or not c.partitions("target", offset_map_topic(flow)):
            err = StateError(f"state topics of flow {flow.name} are missing on cluster {flow.target!r}")
            for pc in self.parts:
                pc.fail(err)
            return []
        live = []
        for pc in self.parts:
            u = pc.unit
            n = c.partitions("target", u.target_topic)
            if 0 < n <= u.partition:  # partitions added since this run first looked
                n = c.partitions("target", u.target_topic, refresh=True)
            if n == 0:
                pc.fail(
                    TopicError(
                        f"target topic {u.target_topic!r} is missing on cluster {flow.target!r} "
                        f"(source {u.topic}[{u.partition}]): run `mirrorflow sync` first"
                    )
                )
            elif n <= u.partition:
                pc.fail(
                    TopicError(
                        f"target topic {u.target_topic!r} on cluster {flow.target!r} has {n} partitions, "
                        f"source {u.topic!r} has partition {u.partition}: run `mirrorflow sync` first"
                    )
                )
            else:
                live.append(pc)
        return live

    def _lane(self, limits: BatchLimits) -> Lane:
        """A lane, its source consumer from the process's pool (the lanes of earlier runs)."""
        defaults, required = self.budget.consumer(), consumer_required(self.flow)
        key, consumer = LANES.checkout(self.clients, defaults, required)
        renew = functools.partial(LANES.renew, self.clients, defaults, required)
        return Lane(consumer, self.flow, limits, self.follow, key, renew)

    def _txn_timeout_s(self) -> float:
        conf = {**self.defaults, **self.flow.client_overrides("target", "producer")}
        return int(conf.get("transaction.timeout.ms", 0)) / 1000

    def _target_ends(self, units: list[Unit]) -> dict[tuple[str, int], int]:
        """The target high watermarks of fresh partitions whose first batch is empty (one request for a
        round's, a first run anchors thousands; a target restart waited out up to the bound)."""
        c = self.clients
        tps = sorted({(u.target_topic, u.partition) for u in units})
        return list_offsets(
            c.admin("target"), c.connection("target"), tps, OffsetSpec.latest(), False, c.outage_timeout
        )

    def _drop(self) -> None:
        """Let the slot producer go (failed, fenced, or an outage: never back to the cache)."""
        if self.sp is not None:
            with contextlib.suppress(Exception):
                if not self.flow.exactly_once:
                    self.sp.producer.flush(30)
            self.sp = None

    def _close_lanes(self, reuse: bool = True) -> None:
        for lane in self.lanes:
            lane.close(self.clients, reuse)
        self.lanes = []

    def _close(self) -> None:
        self._close_lanes(reuse=self.clean)
        if self.sp is not None:
            if not self.flow.exactly_once:
                with contextlib.suppress(Exception):
                    self.sp.producer.flush(30)
            if self.clean:  # never a producer a failure may have left mid-transaction
                CACHE.give_back(self.sp)
            self.sp = None
        self.succession.close()
        if self.store.has_reader:
            self.clients.release(self.store.reader.consumer)


def copy_task(
    clients: FlowClients,
    layout: TaskLayout,
    slot: int,
    units: Iterable[Unit],
    how: TaskAttempt = ONE_SHOT,
) -> list[UnitResult]:
    """Copy a task's units (all of task slot `slot` of `layout`) with one TaskCopier; results in the
    units' order. A fresh partition with nothing to copy (its start anchored at its initial position)
    is a unit like any other: its progress and offset-map entry go into a round's transaction,
    fenced like every write of the task (a run that lost the flow's lease writes none)."""
    return TaskCopier(clients, layout, slot, list(units), how).run()


def copy_planned(
    clients: FlowClients, head: TaskHead, index: int, units: list[Unit], how: TaskAttempt
) -> list[dict[str, Any]]:
    """Task `index` of a plan, copied: the one way every mode (a Spark task, a Spark Connect task, a
    thread of direct mode) runs a planned task. The head names the lease owner and whether the run
    follows its partitions."""
    layout, slot = head.slot(index)
    late = began_late(head.follow, units, clients.flow.parallelism, time.time())
    if late:
        return [r.to_dict() for r in late]
    clients.reached("source", "target")  # planned: a broker away as the task starts is waited for
    with following(clients, head.follow) as follow, fewer_collections():
        results = copy_task(clients, layout, slot, units, replace(how, owner=head.owner, follow=follow))
        stopped = follow.why_stopped() if follow is not None else None
    for r in results:
        r.stopped = stopped
    return [r.to_dict() for r in results]


def copy_together(
    clients: FlowClients, head: TaskHead, rows: list[tuple[int, list[Unit]]], faults: Faults, attempt: int = 0
) -> list[dict[str, Any]]:
    """Several planned tasks (`rows`: (index, units)) copied at once by one process, a thread each
    (a Spark task that copies more than one: replication.executors.spark.spark_tasks). Together they take
    what one task alone would: `task.partitions.in.flight` lanes, split between them, and the
    process's memory budget, split over all their busy lanes. While one waits on the brokers (its
    producer's epoch, a commit) the others copy."""
    if len(rows) <= 1:
        how = TaskAttempt(number=attempt, faults=faults)
        return [r for i, units in rows for r in copy_planned(clients, head, i, units, how)]
    lanes = max(1, int(clients.flow.props["task.partitions.in.flight"]) // len(rows))
    busy = sum(reading_at_once(units, lanes) for _, units in rows)
    with ThreadPoolExecutor(max_workers=len(rows), thread_name_prefix="mirrorflow-task") as pool:
        how = TaskAttempt(number=attempt, in_flight=lanes, budget_lanes=busy, faults=faults)
        futures = [pool.submit(copy_planned, clients, head, i, units, how) for i, units in rows]
        return [r for f in futures for r in f.result()]
