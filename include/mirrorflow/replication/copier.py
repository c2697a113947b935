"""Copy one work unit: the code that runs inside a Spark task (or anywhere else).

Exactly-once (the default): a transactional producer with transactional.id
`mirrorflow-<flow.id>-<topic>-<partition>`. After init_transactions (which fences zombies and
aborts their open transaction) the unit re-reads its progress (read_committed) and clips its range
to what the ledger does not cover yet. Then, batch by batch, one transaction holds the records,
the offset-map entry of the batch and the new progress. A retried, duplicated or zombie task
therefore never writes a record twice.

Exactly-once off: an idempotent producer; the state records follow each flushed batch
(at-least-once: a crash between the data and the state copies the batch again).

Clients are built here, inside the task (they cannot be pickled); executors load the config
themselves, so secrets never travel in the plan.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.kafka.log_reader import LogReader
from mirrorflow.kafka.topics import topic_partitions
from mirrorflow.errors import FencedError, MirrorflowError, RecordTooLargeError, StateError, TopicError
from mirrorflow.state.offset_map import MapEntry, Run, subtract_ranges
from mirrorflow.replication.planner import Unit
from mirrorflow.state.records import Progress
from mirrorflow.state.store import StateStore
from mirrorflow.state.topics import offset_map_topic, progress_topic, transactional_id
from mirrorflow.state.writer import StateWriter

FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
TOO_LARGE_CODES = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}
MAX_MESSAGE_BYTES = 1_000_000_000  # librdkafka's maximum: let the BROKER decide what is too large


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
    last_timestamp: int = -1  # source timestamp of the last copied record
    max_latency_ms: int = -1  # commit time minus source timestamp, worst record of the unit
    error: str | None = None
    error_type: str | None = None
    started: float = 0.0  # wall clock
    copy_started: float = 0.0  # after clients are up and progress was re-read
    finished: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- test hooks: crash points (SIGKILL of the copying process) ------------------------------------
CRASH_ENV = "MIRRORFLOW_TEST_CRASH"  # "<point>[:<n>]", points below


def _crash(point: str, n: int = 0) -> None:
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    name, _, count = spec.partition(":")
    if name == point and n >= int(count or 0):
        marker = os.environ.get(CRASH_ENV + "_ONCE")
        if marker:  # crash only once per marker file (the rerun passes)
            if os.path.exists(marker):
                return
            open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)


# -- client settings --------------------------------------------------------------------------------
# Tuning a user may override (`producer.*` / `consumer.*`); the settings copying is correct with
# (`*_required`) are applied on top of the overrides.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "linger.ms": 20, "batch.size": 1_000_000, "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
    "message.max.bytes": MAX_MESSAGE_BYTES, "compression.type": "none", "transaction.timeout.ms": 30_000,
}
CONSUMER_DEFAULTS: dict[str, Any] = {
    "fetch.max.bytes": 104_857_600, "max.partition.fetch.bytes": 52_428_800,
    "queued.max.messages.kbytes": 262_144, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1,
}


def producer_required(flow: FlowConfig, unit: Unit) -> dict[str, Any]:
    conf: dict[str, Any] = {"enable.idempotence": True, "acks": "all"}
    if flow.exactly_once:
        conf["transactional.id"] = transactional_id(flow, unit.topic, unit.partition)
    return conf


def consumer_required(flow: FlowConfig) -> dict[str, Any]:
    return {"group.id": f"mirrorflow-{flow.id}-copier", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "isolation.level": "read_committed",
            "enable.partition.eof": True, "auto.offset.reset": "error"}


def _err(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def _is_fenced(exc: BaseException) -> bool:
    e = _err(exc)
    return e is not None and (e.code() in FENCED_CODES or (e.fatal() and "fenc" in e.str().lower()))


class _Edge:
    """Delivery report of one record (the first and last of each batch)."""

    __slots__ = ("offset", "error")

    def __init__(self) -> None:
        self.offset = -1
        self.error: KafkaError | None = None

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.error = err
        else:
            self.offset = msg.offset()


class UnitCopier:
    """Copies one unit; `run()` returns a UnitResult and never raises for expected failures."""

    def __init__(self, clients: FlowClients, unit: Unit):
        self.clients, self.flow, self.unit = clients, clients.flow, unit
        flow = self.flow
        self.eos = bool(flow.exactly_once)
        self.max_txn_records = int(flow.props["transaction.max.records"])
        self.max_txn_bytes = int(flow.props["transaction.max.bytes"])
        self.max_unit_bytes = int(flow.props["unit.max.bytes"])
        self.result = UnitResult(unit.topic, unit.partition, unit.target_topic, "ok", unit.start, unit.end,
                                 started=time.time())
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.progress: Progress | None = None
        self._fatal: KafkaError | None = None

    # -- lifecycle ----------------------------------------------------------------------------------
    def run(self) -> UnitResult:
        r = self.result
        try:
            self._run()
        except FencedError as exc:
            r.status, r.error, r.error_type = "fenced", str(exc), "FencedError"
        except MirrorflowError as exc:
            r.status, r.error, r.error_type = "failed", str(exc), type(exc).__name__
        except KafkaException as exc:
            if _is_fenced(exc):
                r.status, r.error_type = "fenced", "FencedError"
                r.error = (f"{self.unit.topic}[{self.unit.partition}]: fenced by another attempt "
                           f"(transactional.id {transactional_id(self.flow, self.unit.topic, self.unit.partition)}); "
                           "it owns this partition now")
            else:
                e = _err(exc)
                r.status, r.error_type = "failed", "KafkaException"
                r.error = f"{self.unit.topic}[{self.unit.partition}]: {e.str() if e else exc}"
        finally:
            self._close()
            r.finished = time.time()
        return r

    def _close(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:  # noqa: BLE001
                pass
        if self.producer is not None and not self.eos:
            self.producer.flush(30)
        # the producer's error_cb points back at this copier: drop the cycle so the client (and its
        # threads) go away now, not at some later garbage collection
        self.producer = self.consumer = None

    def _error_cb(self, err: KafkaError) -> None:
        if err.fatal() and self._fatal is None:
            self._fatal = err

    def _run(self) -> None:
        u, flow, r = self.unit, self.flow, self.result
        defaults = dict(PRODUCER_DEFAULTS)
        if not self.eos:
            defaults.pop("transaction.timeout.ms")
        self.producer = self.clients.producer("target", defaults,
                                              {**producer_required(flow, u), "error_cb": self._error_cb})
        p = self.producer
        # the target topic must exist with enough partitions (topic sync creates it)
        n = topic_partitions(p, u.target_topic)
        if n == 0:
            raise TopicError(f"target topic {u.target_topic!r} is missing on cluster {flow.target!r} "
                             f"(source {u.topic}[{u.partition}]): run `mirrorflow sync` first")
        if n <= u.partition:
            raise TopicError(f"target topic {u.target_topic!r} on cluster {flow.target!r} has {n} partitions, "
                             f"source {u.topic!r} has partition {u.partition}: run `mirrorflow sync` first")
        nprog, nmap = topic_partitions(p, progress_topic(flow)), topic_partitions(p, offset_map_topic(flow))
        if not nprog or not nmap:
            raise StateError(f"state topics of flow {flow.name} are missing on cluster {flow.target!r}")
        self.writer = StateWriter(flow, nprog, nmap)
        if self.eos:
            p.init_transactions(60)  # fences zombies, aborts their open transaction
        _crash("after_init")
        # re-read the progress AFTER fencing: this is the truth, the plan is advisory
        self.progress = StateStore(self.clients).progress([(u.topic, u.partition)]).get(
            (u.topic, u.partition)) or Progress.empty(u.topic, u.partition)
        # the committed progress is the truth, the plan is advisory: continue right after it (never
        # leave a hole, never copy a covered range twice)
        start = self.progress.next if self.progress.next >= 0 else u.start
        todo = subtract_ranges(start, u.end, list(self.progress.covered))
        if not todo and self.progress.next < 0 and u.start >= u.end:
            todo = [(u.start, u.start)]  # anchor a fresh partition's progress at its initial position
        if not todo:
            r.status = "skipped"
            return
        self.consumer = self.clients.consumer("source", CONSUMER_DEFAULTS, consumer_required(flow))
        lo, _hi = LogReader(self.clients.connection("source"), self.consumer).watermarks(u.topic, u.partition)
        r.copy_started = time.time()
        for a, b in todo:
            lost_range = None
            if a < lo:
                # retention deleted [a, lo) before it was copied: a gap event, continue at the log start
                lost_range = (a, min(lo, b))
                a = min(lo, b)
            if not self._copy_range(a, b, lost_range):
                break  # stopped early (unit.max.bytes)

    # -- the copy loop ------------------------------------------------------------------------------
    def _copy_range(self, a: int, b: int, lost_range: tuple[int, int] | None) -> bool:
        """Copy [a, b); False when the unit stopped early at unit.max.bytes."""
        u, r, p, c = self.unit, self.result, self.producer, self.consumer
        assert p is not None and c is not None and self.progress is not None
        if r.copied_from < 0:
            r.copied_from = lost_range[0] if lost_range else a
        if lost_range:
            r.lost += lost_range[1] - lost_range[0]
            r.lost_range = lost_range
        if a >= b:  # only a gap event to record
            if self.eos:
                p.begin_transaction()
            self._commit_batch(a, b, [], [], 0, -1, lost_range, None, None)
            r.copied_to = b
            return True
        tt, part = u.target_topic, u.partition
        produce = p.produce
        pending_lost = lost_range
        c.assign([TopicPartition(u.topic, u.partition, a)])
        pos = a  # every offset < pos is covered (copied, or known to hold no committed record)
        done = False
        unit_bytes = 0
        max_txn_records, max_txn_bytes = self.max_txn_records, self.max_txn_bytes
        max_unit_bytes = self.max_unit_bytes
        while not done:
            if self.eos:
                p.begin_transaction()
            txn_from = pos
            segs: list[list[int]] = []  # [source start, count] of consecutive source offsets
            seg_start, nxt = -1, -1
            batch: list[Any] = []
            append = batch.append
            nbytes = 0
            first, last = _Edge(), _Edge()
            cb: Any = first  # the first record of the batch gets a delivery report
            held = None  # produced one step late, so the batch's last record gets the other report
            last_ts = -1
            stop_txn = False
            idle_since = time.monotonic()
            while not stop_txn:
                msgs = c.consume(min(10_000, max(1, max_txn_records - len(batch))), 0.5)
                if not msgs:
                    if time.monotonic() - idle_since > 60:
                        raise MirrorflowError(f"{u.topic}[{u.partition}]: no progress reading offsets {pos}..{b} "
                                              "for 60 s (source unavailable?)")
                    # trailing markers / aborted records produce no message: the position tells
                    cur = c.position([TopicPartition(u.topic, u.partition)])[0].offset
                    if cur >= b:
                        pos, done, stop_txn = b, True, True
                    continue
                idle_since = time.monotonic()
                for m in msgs:
                    if m.error() is not None:
                        err = m.error()
                        if err.code() == KafkaError._PARTITION_EOF:
                            if m.offset() >= b:
                                pos, done, stop_txn = b, True, True
                                break
                            continue
                        if err.code() == KafkaError._AUTO_OFFSET_RESET:
                            raise MirrorflowError(f"{u.topic}[{u.partition}]: offset {pos} is no longer on the source "
                                                  "(retention ran during the copy); the next run records the gap")
                        raise MirrorflowError(f"{u.topic}[{u.partition}]: consuming the source failed: {err.str()}")
                    off = m.offset()
                    if off >= b:
                        pos, done, stop_txn = b, True, True
                        break
                    if held is not None:
                        hv, hk, ts = held.value(), held.key(), held.timestamp()[1]
                        produce(tt, hv, hk, part, on_delivery=cb, timestamp=ts if ts > 0 else 0,
                                headers=held.headers())
                        cb = None
                        nbytes += (len(hv) if hv else 0) + (len(hk) if hk else 0)
                    held = m
                    if off != nxt:
                        if nxt >= 0:
                            segs.append([seg_start, nxt - seg_start])
                        seg_start = off
                    nxt = off + 1
                    append(m)
                    pos = nxt
                    if pos >= b:
                        done = stop_txn = True
                        break
                    if len(batch) >= max_txn_records or nbytes >= max_txn_bytes:
                        stop_txn = True
                        break
                    if unit_bytes + nbytes >= max_unit_bytes:
                        stop_txn = done = True
                        r.status = "partial"
                        break
            if held is not None:
                hv, hk, ts = held.value(), held.key(), held.timestamp()[1]
                produce(tt, hv, hk, part, on_delivery=last if cb is None else _Both(first, last),
                        timestamp=ts if ts > 0 else 0, headers=held.headers())
                nbytes += (len(hv) if hv else 0) + (len(hk) if hk else 0)
                last_ts = ts
                segs.append([seg_start, nxt - seg_start])
            unit_bytes += nbytes
            self._commit_batch(txn_from, pos, batch, segs, nbytes, last_ts, pending_lost, first, last)
            pending_lost = None
            r.copied_to = pos
        return r.status != "partial"

    def _commit_batch(self, src_from: int, src_to: int, batch: list[Any], segs: list[list[int]], nbytes: int,
                      last_ts: int, lost_range: tuple[int, int] | None,
                      first: "_Edge | None", last: "_Edge | None") -> None:
        u, r, p = self.unit, self.result, self.producer
        assert p is not None and self.progress is not None
        tgt_end = self.progress.tgt_end
        runs: list[Run] = []
        if batch:
            assert first is not None and last is not None
            _crash("before_flush", len(batch))
            try:
                p.flush(120)
            except (SystemError, KafkaException) as exc:
                # a fenced producer fails flush() (confluent-kafka may surface it as a SystemError)
                try:
                    p.poll(0)
                except Exception:  # noqa: BLE001
                    pass
                if self._fatal is not None:
                    raise KafkaException(self._fatal) from None
                if isinstance(exc, KafkaException):
                    raise
                if self.eos:
                    p.abort_transaction(30)  # raises the fencing error when that is the cause
                raise MirrorflowError(f"{u.topic}[{u.partition}]: flushing the batch failed: {exc}") from None
            if self._fatal is not None and _is_fenced(KafkaException(self._fatal)):
                raise KafkaException(self._fatal)
            consecutive = (first.error is None and last.error is None and first.offset >= 0
                           and last.offset - first.offset + 1 == len(batch))
            if consecutive and self._fatal is None:
                t = first.offset
                for s, n in segs:
                    runs.append(Run(s, t, n))
                    t += n
            else:
                runs = self._careful(batch, src_from, src_to)
            tgt_end = runs[-1].tgt + runs[-1].count
        elif tgt_end < 0:
            tgt_end = self._target_end()
        _crash("after_flush", len(batch))
        entry = MapEntry(u.topic, u.partition, src_from, src_to, tuple(runs), tgt_end,
                         (lost_range[1] - lost_range[0]) if lost_range else 0)
        new = self.progress.advanced(src_from, src_to, tgt_end, len(batch), last_ts, lost_range)
        self.writer.write(p, new, entry)
        _crash("before_commit", len(batch))
        if self.eos:
            try:
                p.commit_transaction(120)
            except KafkaException as exc:
                if _is_fenced(exc):
                    raise
                e = _err(exc)
                if e is not None and e.txn_requires_abort():
                    p.abort_transaction(60)
                raise MirrorflowError(f"{u.topic}[{u.partition}]: committing offsets {src_from}..{src_to} failed: "
                                      f"{e.str() if e else exc}") from None
        elif p.flush(120) != 0:
            raise MirrorflowError(f"{u.topic}[{u.partition}]: state records of {src_from}..{src_to} were not delivered")
        _crash("after_commit", len(batch))
        now_ms = int(time.time() * 1000)
        self.progress = new
        r.records += len(batch)
        r.bytes += nbytes
        r.transactions += 1
        r.tgt_end = tgt_end
        if batch:
            r.last_timestamp = last_ts
            oldest = batch[0].timestamp()[1]
            if oldest > 0:
                r.max_latency_ms = max(r.max_latency_ms, now_ms - oldest)

    def _careful(self, batch: list[Any], src_from: int, src_to: int) -> list[Run]:
        """Re-produce the batch with a delivery report per record: the exact target offsets, or the
        exact record that failed. Exactly-once: the first attempt is aborted first (never visible)."""
        u, p = self.unit, self.producer
        assert p is not None
        if self.eos:
            try:
                p.abort_transaction(60)
            except KafkaException as exc:
                if _is_fenced(exc):
                    raise
            p.begin_transaction()
        reports: list[list[Any]] = [[m.offset(), -1, None] for m in batch]

        def cb_for(slot: list[Any]):
            def cb(err: KafkaError | None, msg: Any) -> None:
                if err is not None:
                    slot[2] = err
                else:
                    slot[1] = msg.offset()
            return cb

        for m, slot in zip(batch, reports):
            ts = m.timestamp()[1]
            while True:
                try:
                    p.produce(u.target_topic, m.value(), m.key(), u.partition, on_delivery=cb_for(slot),
                              timestamp=ts if ts > 0 else 0, headers=m.headers())
                    break
                except BufferError:
                    p.poll(0.1)
        p.flush(120)
        failed = [s for s in reports if s[2] is not None or s[1] < 0]
        if failed or self._fatal is not None:
            if self._fatal is not None and _is_fenced(KafkaException(self._fatal)):
                raise KafkaException(self._fatal)
            if self.eos:
                try:
                    p.abort_transaction(60)
                except KafkaException:
                    pass
            culprit = self._too_large(batch, [s for s in failed if s[2] is not None and s[2].code() in TOO_LARGE_CODES])
            if culprit is not None:
                m, size = culprit
                culprit = [m.offset(), -1, self._too_large_err]
                raise RecordTooLargeError(
                    f"record {u.topic}[{u.partition}] offset {culprit[0]} ({size} bytes) is larger than target topic "
                    f"{u.target_topic!r} on cluster {self.flow.target!r} accepts ({culprit[2].str()}): raise the "
                    f"target topic's max.message.bytes (and the broker's); nothing from offset {src_from} on was "
                    "marked copied")
            bad = failed[0] if failed else None
            what = bad[2].str() if bad is not None and bad[2] is not None else (self._fatal.str() if self._fatal else "not delivered")
            if bad is not None and bad[2] is not None and bad[2].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                                             KafkaError._UNKNOWN_PARTITION,
                                                                             KafkaError._UNKNOWN_TOPIC):
                raise TopicError(f"target topic {u.target_topic!r} partition {u.partition} is missing on cluster "
                                 f"{self.flow.target!r}: run `mirrorflow sync` first")
            raise MirrorflowError(f"{u.topic}[{u.partition}]: writing offset {bad[0] if bad else src_from} to "
                                  f"{u.target_topic!r} failed: {what}")
        runs: list[Run] = []
        for s, t, _ in reports:
            if runs and runs[-1].src + runs[-1].count == s and runs[-1].tgt + runs[-1].count == t:
                runs[-1] = Run(runs[-1].src, runs[-1].tgt, runs[-1].count + 1)
            else:
                runs.append(Run(s, t, 1))
        return runs

    def _too_large(self, batch: list[Any], failed: list[list[Any]]) -> tuple[Any, int] | None:
        """The record the broker rejects as too large: the batch's rejected records are tried alone,
        largest first (a rejected request also fails the small records batched with it)."""
        if not failed:
            return None
        p, u = self.producer, self.unit
        assert p is not None
        by_offset = {m.offset(): m for m in batch}
        size = lambda m: len(m.value() or b"") + len(m.key() or b"")  # noqa: E731
        cands = sorted((by_offset[s[0]] for s in failed), key=lambda m: (-size(m), m.offset()))
        for m in cands[:8]:
            if self.eos:
                p.begin_transaction()
            slot: list[Any] = [None]
            ts = m.timestamp()[1]
            p.produce(u.target_topic, m.value(), m.key(), u.partition,
                      on_delivery=lambda err, msg: slot.__setitem__(0, err),
                      timestamp=ts if ts > 0 else 0, headers=m.headers())
            p.flush(60)
            if self.eos:
                try:
                    p.abort_transaction(60)
                except KafkaException:
                    pass
            if slot[0] is not None and slot[0].code() in TOO_LARGE_CODES:
                self._too_large_err = slot[0]
                return m, size(m)
        m = cands[0]
        self._too_large_err = failed[0][2]
        return m, size(m)

    def _target_end(self) -> int:
        """The target partition's high watermark (for a gap event before anything was copied)."""
        reader = self.clients.reader("target", group=f"mirrorflow-{self.flow.id}-copier")
        try:
            return reader.watermarks(self.unit.target_topic, self.unit.partition)[1]
        finally:
            self.clients.release(reader.consumer)


class _Both:
    """Delivery report of a batch's only record: it is the first and the last."""

    __slots__ = ("first", "last")

    def __init__(self, first: _Edge, last: _Edge) -> None:
        self.first, self.last = first, last

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        self.first(err, msg)
        self.last(err, msg)


def copy_unit(clients: FlowClients, unit: Unit) -> UnitResult:
    return UnitCopier(clients, unit).run()
