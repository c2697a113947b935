"""Reading partitions to their end: the one loop that knows when a partition has been read whole.

The end of each partition is its HIGH WATERMARK, taken before reading (one batched ListOffsets of
a read_uncommitted consumer: librdkafka asks with the consumer's isolation level, and a
read_committed consumer's "high watermark" is the LAST STABLE OFFSET, which stops below everything
committed after the first record of a transaction still open). Reading stops there, so a
concurrent writer cannot make the loop run forever. Records are read with
isolation.level=read_committed, so the end is reached through transaction markers and aborted
records too: a partition is done when a record at or past its end arrives, when the consumer
reports end-of-partition there, or when its position passes the end without a message. A
transaction open below the end blocks its partition until it commits or aborts (a crashed
producer's transaction is aborted by the broker after transaction.timeout.ms), so reads have a
deadline and a timeout says so; transactions that begin after the end was taken are not waited for.
A read therefore returns every record committed below its end, or raises: never a silent prefix.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

from mirrorflow.errors import ClusterError, TopicError, TransientError
from mirrorflow.kafka.connection import ClusterConnection, kafka_error, warm_metadata
from mirrorflow.kafka.retry import TRANSIENT_CODES, backoff_s, failure, refresh_metadata, transient_error

# librdkafka needs a group.id even for assign(); readers never subscribe or commit with it.
READER_GROUP = "mirrorflow-internal-reader"
READER_SETTINGS: dict[str, Any] = {
    "group.id": READER_GROUP,
    "enable.auto.commit": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    # a reader moves between partitions: a long-polling empty fetch for the old assignment delays the
    # first fetch of the new one by up to this much
    "fetch.wait.max.ms": 10,
}
# The consumer that answers a read's end: ListOffsets at isolation level read_uncommitted is the
# high watermark. It never fetches (never assigned), so it costs a connection, not a fetch loop.
ENDS_SETTINGS: dict[str, Any] = {**READER_SETTINGS, "isolation.level": "read_uncommitted"}
LATEST, EARLIEST = -1, -2  # ListOffsets "timestamps": the high watermark and the log start
# Errors a leadership change, a just-created topic or a broker restart causes: retried until a
# deadline. One classification for every call (kafka.retry), plus a topic not known yet (a
# just-created topic's metadata is still spreading; callers give it a short grace of its own).
T = TypeVar("T")
RETRIABLE = TRANSIENT_CODES | {KafkaError.UNKNOWN_TOPIC_OR_PART}
POLL_RECORDS = 1000  # at most this many messages per consume() call
# consume() returns early only with a full batch; markers and aborted records take offsets without
# a message, so a short timeout, then the position, tells when a partition is read to its end
POLL_TIMEOUT_S = 0.05
STANDING_S = 3.0  # how long a timed-out read asks where its partitions stand (the message only)
MISSING = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
# "does not exist" is believed when the cluster's metadata has said so for this long (a broker
# restarting may answer "unknown topic" for a moment)
MISSING_CONFIRM_S = 0.5
RETRY_S = 0.2  # the longest pause between two tries of a read's offsets


@dataclass(frozen=True)
class RawRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


class LogReader:
    """Reads partitions of one cluster with one (assign-mode, read_committed) consumer; a read's
    end comes from a read_uncommitted consumer (`ends`: built when first needed; FlowClients shares
    one per cluster and group, else the reader builds its own and `close()` closes it)."""

    def __init__(
        self,
        conn: ClusterConnection,
        consumer: Consumer,
        ends: Callable[[], Consumer] | None = None,
        silent_s: float | None = None,
    ) -> None:
        self.conn, self.consumer = conn, consumer
        # a read that hears nothing for this long asks the partition's leader whether it answers at all
        # (`_answers`): a read waits out an open transaction below its end as long as its timeout
        # allows, but a broker that does not answer is an outage after broker.outage.max.seconds
        self.silent_s = silent_s
        self._make_ends = ends
        self._ends: Consumer | None = None
        self._warm: set[str] = set()  # topics whose metadata the read consumer has (warm_metadata)

    def _ends_consumer(self) -> Consumer:
        if self._ends is None:
            make = self._make_ends or (lambda: self.conn.consumer(ENDS_SETTINGS))
            self._ends = make()
        return self._ends

    def close(self) -> None:
        """Close the ends consumer this reader built itself (the read consumer is its owner's)."""
        if self._ends is not None and self._make_ends is None:
            with contextlib.suppress(RuntimeError):
                self._ends.close()
        self._ends = None

    def log_start(self, topic: str, partition: int, timeout: float = 60.0) -> int:
        """The partition's log start (no isolation level applies), asked through the read consumer."""
        tp = TopicPartition(topic, partition)

        def ask(t: float) -> int:
            low = int(self.consumer.get_watermark_offsets(tp, timeout=t, cached=False)[0])
            if low == OFFSET_INVALID:
                raise Unanswered([partition])
            return low

        return self._retried(topic, [partition], timeout, True, ask, self.consumer)

    def watermarks(
        self, topic: str, partition: int, timeout: float = 60.0, wait_for_topic: bool = True
    ) -> tuple[int, int]:
        """(log start, high watermark) of one partition (see `offsets`)."""
        return self.offsets(topic, [partition], timeout, wait_for_topic)[partition]

    def offsets(
        self, topic: str, partitions: Iterable[int], timeout: float = 60.0, wait_for_topic: bool = True
    ) -> dict[int, tuple[int, int]]:
        """(log start, high watermark) of each partition: two ListOffsets requests per leader for
        all of them (not one per partition) through the read_uncommitted ends consumer, retried
        while a partition gets its leader. A partition answered without an offset (-1001: an answer
        cut by a connection reset) is asked again: an unknown end is never taken as an offset. A
        topic that does not exist is a TopicError (once the cluster's metadata says so, unless
        `wait_for_topic`: a just-created topic may not be known to every broker yet)."""
        parts = sorted(set(partitions))
        if not parts:
            return {}
        ends = self._ends_consumer()

        def ask(spec: int, t: float) -> dict[int, int]:
            got = ends.offsets_for_times([TopicPartition(topic, p, spec) for p in parts], timeout=t)
            failed = next((tp.error for tp in got if tp.error is not None), None)
            if failed is not None:
                raise KafkaException(failed)
            unanswered = sorted(tp.partition for tp in got if tp.offset == OFFSET_INVALID)
            if unanswered:
                raise Unanswered(unanswered)
            return {tp.partition: int(tp.offset) for tp in got}

        def both(t: float) -> dict[int, tuple[int, int]]:
            high, low = ask(LATEST, t), ask(EARLIEST, t)
            return {p: (low[p], high[p]) for p in parts}

        return self._retried(topic, parts, timeout, wait_for_topic, both, ends)

    def _retried(
        self,
        topic: str,
        parts: list[int],
        timeout: float,
        wait_for_topic: bool,
        call: Callable[[float], T],
        via: Consumer,
    ) -> T:
        """`call(request timeout)`, retried through retriable errors until `timeout`. "This topic
        or partition does not exist" is believed only from the cluster's metadata: a client whose
        connection was reset reports a partition it knows as unknown (_UNKNOWN_PARTITION), and a
        broker restarting may answer "unknown topic" for a moment. Past `timeout` a failure that a
        broker coming back may cure is a TransientError."""
        deadline = time.monotonic() + timeout
        absent_since: float | None = None  # when the metadata first said the topic is not there
        tries = 0
        while True:
            try:
                return call(max(1.0, min(10.0, deadline - time.monotonic())))
            except Unanswered as exc:
                if time.monotonic() > deadline:
                    raise TransientError(
                        self.conn.alias,
                        f"cannot list offsets of topic {topic!r} {_which(exc.partitions)}: no offset in the answers",
                    ) from None
            except KafkaException as exc:
                err = kafka_error(exc)
                code = err.code() if err is not None else None
                past = time.monotonic() > deadline
                if code in MISSING:
                    absent = missing_partitions(via, topic, parts)  # None: the metadata did not answer
                    absent_since = (absent_since or time.monotonic()) if absent else None
                    held = absent_since is not None and time.monotonic() - absent_since >= MISSING_CONFIRM_S
                    if absent and (past or held and not wait_for_topic):
                        raise TopicError(
                            f"topic {topic!r} {_which(absent)} does not exist on cluster {self.conn.alias!r}"
                        ) from None
                    if past:
                        said = "its metadata did not answer" if absent is None else "its metadata lists it"
                        raise TransientError(
                            self.conn.alias, f"topic {topic!r} {_which(parts)}: {err.str() if err else exc} ({said})"
                        ) from None
                elif code not in RETRIABLE:
                    raise self.conn.describe_failure(exc) from None
                elif past:
                    raise failure(self.conn, exc) from None
                else:
                    # the leaders and leader epochs cached before a restart are stale (FENCED_LEADER_EPOCH
                    # until the client's metadata is refreshed): ask for the topic's metadata again
                    refresh_metadata(via, [topic])
            # a just-created state topic is known to the broker a moment later (a flow's first run):
            # 20 ms, doubling to RETRY_S, not a whole RETRY_S for the first miss
            tries += 1
            time.sleep(backoff_s(tries, first=0.02, cap=RETRY_S))

    def read(
        self,
        topic: str,
        starts: Mapping[int, int | None] | Iterable[int],
        timeout: float = 60.0,
        keys: set[bytes] | None = None,
        last: int | None = None,
        wait_for_topic: bool = True,
        stops: Mapping[int, int] | None = None,
    ) -> Iterator[Any]:
        """Yield every committed message of the partitions, from each one's start (None: the log
        start) up to the end it had when reading began (or each one's offset in `stops`, if lower:
        a bounded range [start, stop)); with `last`, only among the last `last` offsets of each;
        with `keys`, only messages with one of those keys."""
        starts = dict(starts) if isinstance(starts, Mapping) else {p: None for p in starts}
        deadline = time.monotonic() + timeout  # one bound for the ends and the read
        # the ends: a broker that answers at all answers them at once (no transaction holds them back)
        marks = self.offsets(topic, starts, min(timeout, self.silent_s or timeout), wait_for_topic)
        assign = read_span(topic, starts, marks, last, stops)
        if not assign:
            return
        c = self.consumer
        if topic not in self._warm:
            warm_metadata(c, topic, max(0.1, min(1.0, deadline - time.monotonic())))
            self._warm.add(topic)
        c.assign(
            [TopicPartition(topic, p, begin if begin > 0 else OFFSET_BEGINNING) for p, (begin, _) in assign.items()]
        )
        try:
            yield from self._to_the_ends(topic, assign, deadline, keys)
        finally:
            c.unassign()

    def _to_the_ends(
        self, topic: str, span: Mapping[int, tuple[int, int]], deadline: float, keys: set[bytes] | None
    ) -> Iterator[Any]:
        """The assigned partitions' messages (of `keys`) until each reaches its end (`span`: partition
        -> (first offset, end)): a record at or past it, end-of-partition there, or a position past it."""
        c = self.consumer
        todo = {p: end for p, (_, end) in span.items()}
        nxt = {p: max(begin, 0) for p, (begin, _) in span.items()}  # next offset expected per partition
        unanswered: KafkaError | None = None  # the last transient error (a broker restarting)
        heard = time.monotonic()  # the last record or end-of-partition event
        while todo:
            if time.monotonic() > deadline:
                raise self._timed_out(topic, todo, unanswered)
            if self.silent_s is not None and time.monotonic() - heard > self.silent_s:
                self._answers(topic, min(todo), time.monotonic() - heard, unanswered)
                heard = time.monotonic()
            # consume() waits until it has `num_messages` or the timeout passed: never ask for more
            # than can still come (records and end-of-partition events), or every read of a
            # short partition would wait the whole timeout
            want = max(1, min(POLL_RECORDS, sum(todo[p] - nxt[p] for p in todo)))
            for m in c.consume(want, timeout=POLL_TIMEOUT_S):
                err = m.error()
                p = m.partition()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        heard = time.monotonic()
                        if p in todo and m.offset() >= todo[p]:
                            del todo[p]
                        continue
                    if transient_error(err):  # the consumer reconnects on its own: the deadline bounds it
                        unanswered = err
                        continue
                    raise ClusterError(self.conn.alias, f"reading topic {topic!r} partition {p}: {err.str()}")
                heard = time.monotonic()
                if p not in todo or m.offset() >= todo[p]:
                    continue  # past the end we took: newer than this read
                nxt[p] = m.offset() + 1
                if m.offset() + 1 >= todo[p]:
                    del todo[p]
                if keys is None or m.key() in keys:
                    yield m
            if todo:  # the position may pass the end without a message (trailing markers)
                for tp in c.position([TopicPartition(topic, p) for p in todo]):
                    if tp.offset >= 0 and tp.offset >= todo.get(tp.partition, 1 << 62):
                        del todo[tp.partition]

    def _answers(self, topic: str, partition: int, silent: float, unanswered: KafkaError | None) -> None:
        """After `silent` seconds without a record: the partition's leader answers a ListOffsets (the
        read waits on an open transaction: it goes on), else a TransientError naming the cluster (a
        caller riding out outages tries again, up to its bound)."""
        ask = min(10.0, max(2.0, (self.silent_s or 0) / 2))
        try:
            self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=ask, cached=False)
        except KafkaException as exc:
            err = kafka_error(exc)
            last = unanswered or err
            raise TransientError(
                self.conn.alias,
                f"reading topic {topic!r}: nothing for {silent:.0f} s and its leader did not answer in {ask:.0f} s"
                + (f" (last error: {last.str()})" if last is not None else ""),
            ) from None

    def _timed_out(self, topic: str, todo: Mapping[int, int], unanswered: KafkaError | None) -> TransientError:
        """A read that did not reach its ends in time: a broker away, or a transaction open below
        an end (both end in time: a caller riding out outages tries again). Without an error, where
        each partition stands says which (`_standing`)."""
        why = (
            f"last error: {unanswered.str()}"
            if unanswered is not None
            else self._standing(topic, todo)
            or "an open transaction? a crashed writer's transaction is aborted after transaction.timeout.ms"
        )
        return TransientError(self.conn.alias, f"timed out reading topic {topic!r} partitions {sorted(todo)} ({why})")

    def _standing(self, topic: str, todo: Mapping[int, int]) -> str | None:
        """Per partition not read to its end: its last stable offset below its high watermark (a
        transaction open there since that offset), or none open and where this reader stands. Best
        effort, a few seconds (None: the cluster did not say). Its own ListOffsets, not
        topic_admin.list_offsets: that module imports this one (tests/unit/test_layers.py), and this
        asks once, without retries, for a message only."""
        tps = [TopicPartition(topic, p) for p in sorted(todo)]
        try:
            admin = self.conn.admin(check_timeout=None)
            req = {tp: OffsetSpec.latest() for tp in tps}
            levels = (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED)
            asked = [admin.list_offsets(req, isolation_level=level, request_timeout=STANDING_S) for level in levels]
            deadline = time.monotonic() + STANDING_S  # both asked at once: STANDING_S in all

            def answers(futures: Mapping[TopicPartition, Any]) -> dict[int, int]:
                return {
                    tp.partition: f.result(max(0.1, deadline - time.monotonic())).offset for tp, f in futures.items()
                }

            stable, high = answers(asked[0]), answers(asked[1])
            at = {tp.partition: tp.offset for tp in self.consumer.position(tps)}
        except (KafkaException, TimeoutError, ValueError, TypeError):  # unreachable, no answer, no such client
            return None
        if min([*stable.values(), *high.values()], default=-1) < 0:  # an answer without an offset (cut by a reset)
            return None
        return "; ".join(
            f"partition {p}: a transaction open since offset {stable[p]} (high watermark {high[p]}); a crashed "
            "writer's transaction is aborted after transaction.timeout.ms"
            if stable[p] < high[p]
            else f"partition {p}: no transaction open (last stable offset = high watermark = {high[p]}), this "
            f"reader at {at.get(p, -1)} of {todo[p]}"
            for p in sorted(todo)
        )


class Unanswered(Exception):
    """Partitions a ListOffsets answer left without an offset (OFFSET_INVALID): asked again."""

    def __init__(self, partitions: list[int]) -> None:
        super().__init__(partitions)
        self.partitions = partitions


def _which(parts: Iterable[int]) -> str:
    ps = sorted(parts)
    return f"partition {ps[0]}" if len(ps) == 1 else f"partitions {ps}"


def read_span(
    topic: str,
    starts: Mapping[int, int | None],
    marks: Mapping[int, tuple[int, int]],
    last: int | None,
    stops: Mapping[int, int] | None,
) -> dict[int, tuple[int, int]]:
    """Partition -> (first offset to read, end) of a read (pure; see LogReader.read), for the
    partitions with anything to read."""
    span: dict[int, tuple[int, int]] = {}
    for p, start in starts.items():
        lo, hi = marks[p]
        if stops is not None and p in stops:
            hi = min(hi, stops[p])
        begin = lo if start is None else max(lo, start)
        if last is not None:
            begin = max(begin, hi - last)
        if begin < hi:
            span[p] = (begin, hi)
    return span


def missing_partitions(client: Any, topic: str, parts: Iterable[int], timeout: float = 5.0) -> list[int] | None:
    """Which of `parts` of `topic` the cluster's metadata (asked now, not the client's cache) says do
    not exist (all of them when the topic does not); None when it did not answer."""
    try:
        md = client.list_topics(topic, timeout=timeout).topics.get(topic)
    except KafkaException:
        return None
    if md is not None and md.error is not None and md.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
        return None  # an answer for the topic, but not a usable one (a leader not elected yet): ask again
    known = set(md.partitions) if md is not None and md.error is None else set()
    return [p for p in parts if p not in known]


def read_partition(
    conn: ClusterConnection,
    topic: str,
    partition: int = 0,
    start: int | None = None,
    timeout: float = 30.0,
    consumer_conf: Mapping[str, Any] | None = None,
    last: int | None = None,
) -> list[RawRecord]:
    """Every record of one partition from `start` (default: the log start) to its current end, with
    a consumer of its own (MM2's single-partition topics: checkpoints, heartbeats). A topic the
    cluster's metadata says does not exist is a TopicError; not reaching the end within `timeout`
    is a TransientError (a partial read, or an empty one, would break the checkpoint monotonicity
    guard)."""
    consumer = conn.consumer({**(consumer_conf or {}), **READER_SETTINGS})
    ends = conn.consumer({**(consumer_conf or {}), **ENDS_SETTINGS})
    try:
        reader = LogReader(conn, consumer, lambda: ends)
        return [
            RawRecord(m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1])
            for m in reader.read(topic, {partition: start}, timeout, last=last, wait_for_topic=False)
        ]
    finally:
        consumer.close()
        ends.close()
