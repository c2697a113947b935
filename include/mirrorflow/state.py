"""Replication state on the TARGET cluster: topic names, creation, record codecs, readers.

Two topics per flow (names end in `.internal`, so MM2's default filters and internal-topic rules
never replicate them), both keyed by the SOURCE (topic, partition):

* `mirrorflow.<flow.id>.progress.internal` (cleanup.policy=compact): the latest progress of each
  source partition (next offset to copy, the merged ledger of covered ranges, tgt_end, ...).
* `mirrorflow.<flow.id>.offset-map.internal` (cleanup.policy=delete, retention.ms=-1): one entry
  per committed copy transaction (see offset_map.MapEntry); all entries together are the ledger.

A key always lives in state partition crc32(key) % (partitions of that topic), so a copy unit reads
one partition only. Record formats: docs/state.md. Everything is read with isolation.level=
read_committed: a record is state only once its transaction committed together with the data.
"""
from __future__ import annotations

import json
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from . import clients
from .config import Config, FlowConfig
from .errors import StateError
from .offset_map import MapEntry, PartitionMap, Run, merge_ranges

FORMAT_VERSION = 1


def overrides(flow: FlowConfig, kind: str) -> dict[str, str]:
    """The flow's `producer.*`/`consumer.*`/`admin.*` client overrides, without MM2's own
    properties that share the prefix (admin.timeout.ms, consumer.poll.timeout.ms)."""
    from .config import FLOW_PROPERTIES

    return {k: v for k, v in flow.client_overrides(kind).items() if f"{kind}.{k}" not in FLOW_PROPERTIES}


# -- names and placement ----------------------------------------------------------------------
def progress_topic(flow: FlowConfig) -> str:
    return f"mirrorflow.{flow.id}.progress.internal"


def offset_map_topic(flow: FlowConfig) -> str:
    return f"mirrorflow.{flow.id}.offset-map.internal"


def transactional_id(flow: FlowConfig, topic: str, partition: int) -> str:
    return f"mirrorflow-{flow.id}-{topic}-{partition}"


def state_key(topic: str, partition: int) -> bytes:
    """The key of both state topics: compact JSON {"partition":P,"topic":T} (sorted keys)."""
    return json.dumps({"partition": partition, "topic": topic}, sort_keys=True, separators=(",", ":")).encode()


def parse_key(key: bytes | None) -> tuple[str, int] | None:
    try:
        d = json.loads(key or b"")
        return str(d["topic"]), int(d["partition"])
    except (ValueError, KeyError, TypeError):
        return None


def state_partition(topic: str, partition: int, num_partitions: int) -> int:
    return zlib.crc32(state_key(topic, partition)) % max(1, num_partitions)


# -- records -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Progress:
    """The latest committed progress of one source partition."""

    topic: str
    partition: int
    next: int  # next source offset to copy
    covered: tuple[tuple[int, int], ...]  # merged ledger of covered source ranges
    tgt_end: int  # target offset right after the last record written (-1: none yet)
    lost: int = 0  # total offsets lost to source retention before they were copied
    records: int = 0  # total records copied
    last_timestamp: int = -1  # source timestamp (ms) of the last copied record
    updated: int = 0  # wall clock ms of the commit
    gaps: tuple[tuple[int, int], ...] = ()  # source ranges lost to retention (from, to)

    def to_json(self) -> bytes:
        return json.dumps({
            "v": FORMAT_VERSION, "topic": self.topic, "partition": self.partition, "next": self.next,
            "covered": [list(r) for r in self.covered], "tgt_end": self.tgt_end, "lost": self.lost,
            "records": self.records, "last_ts": self.last_timestamp, "updated": self.updated,
            "gaps": [list(g) for g in self.gaps][-20:],
        }, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "Progress":
        d = json.loads(raw)
        if int(d.get("v", 0)) > FORMAT_VERSION:
            raise StateError(f"progress record format v{d.get('v')} is newer than this mirrorflow (v{FORMAT_VERSION})")
        return cls(str(d["topic"]), int(d["partition"]), int(d["next"]),
                   tuple((int(a), int(b)) for a, b in d.get("covered", [])), int(d.get("tgt_end", -1)),
                   int(d.get("lost", 0)), int(d.get("records", 0)), int(d.get("last_ts", -1)),
                   int(d.get("updated", 0)), tuple((int(a), int(b)) for a, b in d.get("gaps", [])))

    def advanced(self, src_from: int, src_to: int, tgt_end: int, records: int, last_ts: int,
                 lost_range: tuple[int, int] | None = None) -> "Progress":
        covered = tuple(merge_ranges([*self.covered, (src_from, src_to)]))
        gaps = self.gaps + ((lost_range,) if lost_range else ())
        lost = self.lost + ((lost_range[1] - lost_range[0]) if lost_range else 0)
        return Progress(self.topic, self.partition, max(self.next, src_to), covered,
                        tgt_end if records or self.tgt_end < 0 else max(self.tgt_end, tgt_end), lost,
                        self.records + records, last_ts if records else self.last_timestamp,
                        int(time.time() * 1000), gaps)

    @classmethod
    def empty(cls, topic: str, partition: int) -> "Progress":
        return cls(topic, partition, -1, (), -1)


def encode_entry(e: MapEntry) -> bytes:
    d: dict[str, Any] = {"v": FORMAT_VERSION, "topic": e.topic, "partition": e.partition, "from": e.src_from,
                         "to": e.src_to, "runs": [[r.src, r.tgt, r.count] for r in e.runs], "tgt_end": e.tgt_end,
                         "ts": int(time.time() * 1000)}
    if e.lost:
        d["lost"] = e.lost
    return json.dumps(d, separators=(",", ":")).encode()


def decode_entry(raw: bytes) -> MapEntry:
    d = json.loads(raw)
    if int(d.get("v", 0)) > FORMAT_VERSION:
        raise StateError(f"offset-map record format v{d.get('v')} is newer than this mirrorflow (v{FORMAT_VERSION})")
    return MapEntry(str(d["topic"]), int(d["partition"]), int(d["from"]), int(d["to"]),
                    tuple(Run(int(s), int(t), int(c)) for s, t, c in d.get("runs", [])), int(d["tgt_end"]),
                    int(d.get("lost", 0)))


# -- topics ------------------------------------------------------------------------------------
def state_topic_configs(flow: FlowConfig) -> dict[str, dict[str, str]]:
    return {
        # small segments so compaction keeps the progress topic short (units read a partition from its start)
        progress_topic(flow): {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000", "segment.ms": "600000",
                               "segment.bytes": str(16 * 1024 * 1024), "min.cleanable.dirty.ratio": "0.2"},
        offset_map_topic(flow): {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"},
    }


def ensure_state_topics(cfg: Config, flow: FlowConfig, admin: AdminClient | None = None) -> dict[str, int]:
    """Create the flow's state topics on the target when missing; returns {topic: partitions}."""
    tcluster = cfg.cluster(flow.target)
    admin = admin or clients.admin_client(tcluster, overrides(flow, "admin"))
    wanted = state_topic_configs(flow)
    md = admin.list_topics(timeout=30).topics
    missing = [t for t in wanted if t not in md or md[t].error]
    if missing:
        new = [NewTopic(t, flow.props["state.topic.partitions"], flow.props["state.topic.replication.factor"],
                        config=wanted[t]) for t in missing]
        for t, fut in admin.create_topics(new, operation_timeout=30).items():
            try:
                fut.result(60)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise StateError(f"cannot create state topic {t!r} on cluster {flow.target!r}: {exc.args[0].str()}") from None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            md = admin.list_topics(timeout=10).topics
            if all(t in md and not md[t].error and md[t].partitions for t in wanted):
                break
            time.sleep(0.2)
    return {t: len(md[t].partitions) for t in wanted if t in md}


def topic_partitions(consumer_or_admin: Any, topic: str, timeout: float = 10) -> int:
    md = consumer_or_admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if md is None or md.error or not md.partitions:
        return 0
    return len(md.partitions)


# -- reading -----------------------------------------------------------------------------------
def state_consumer(cfg: Config, flow: FlowConfig) -> Consumer:
    conf = {**overrides(flow, "consumer"),
            "group.id": f"mirrorflow-{flow.id}-state-reader", "enable.auto.commit": False,
            "isolation.level": "read_committed", "enable.partition.eof": True, "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 50}
    return clients.consumer(cfg.cluster(flow.target), conf)


RETRIABLE = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
             KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.REQUEST_TIMED_OUT}


def watermarks(consumer: Consumer, topic: str, partition: int, timeout: float = 60.0) -> tuple[int, int]:
    """(low, high) watermark, retrying while a new partition gets its leader."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
        except KafkaException as exc:
            if exc.args[0].code() not in RETRIABLE or time.monotonic() > deadline:
                raise StateError(f"cannot read offsets of {topic}[{partition}]: {exc.args[0].str()}") from None
            time.sleep(0.2)


def read_to_end(consumer: Consumer, topic: str, partitions: Iterable[int], timeout: float = 120.0,
                wanted: set[bytes] | None = None):
    """Yield (key, value) of every committed record of the partitions up to their current end.

    Snapshots each partition's high watermark first, then reads until the position passes it. A
    transaction that is open at snapshot time blocks that (until it commits or aborts; a crashed
    producer's transaction is aborted by the broker after transaction.timeout.ms).
    """
    ends: dict[int, int] = {}
    for p in partitions:
        lo, hi = watermarks(consumer, topic, p)
        if hi > lo:
            ends[p] = hi
    if not ends:
        return
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    todo = dict(ends)
    deadline = time.monotonic() + timeout
    try:
        while todo:
            if time.monotonic() > deadline:
                raise StateError(f"timed out reading state topic {topic!r} partitions {sorted(todo)} "
                                 "(an open transaction? a crashed copy's transaction is aborted after "
                                 "transaction.timeout.ms)")
            for m in consumer.consume(1000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.partition() in todo and m.offset() >= todo[m.partition()]:
                            del todo[m.partition()]
                        continue
                    raise StateError(f"reading state topic {topic!r}: {err.str()}")
                if m.partition() in todo and m.offset() + 1 >= todo[m.partition()]:
                    del todo[m.partition()]
                k = m.key()
                if wanted is None or k in wanted:
                    yield k, m.value()
            # position may pass the snapshot without a message (trailing markers)
            if todo:
                for tp in consumer.position([TopicPartition(topic, p) for p in todo]):
                    if tp.offset >= 0 and tp.offset >= todo.get(tp.partition, 1 << 62):
                        del todo[tp.partition]
    finally:
        consumer.unassign()


def read_progress(cfg: Config, flow: FlowConfig, keys: Iterable[tuple[str, int]] | None = None,
                  consumer: Consumer | None = None, timeout: float = 120.0) -> dict[tuple[str, int], Progress]:
    """Latest committed progress per source partition (all of the flow's, or just `keys`)."""
    own = consumer is None
    consumer = consumer or state_consumer(cfg, flow)
    try:
        topic = progress_topic(flow)
        n = topic_partitions(consumer, topic)
        if n == 0:
            return {}
        keys = list(keys) if keys is not None else None
        parts = sorted({state_partition(t, p, n) for t, p in keys}) if keys is not None else list(range(n))
        wanted = {state_key(t, p) for t, p in keys} if keys is not None else None
        out: dict[tuple[str, int], Progress] = {}
        for k, v in read_to_end(consumer, topic, parts, timeout, wanted):
            tp = parse_key(k)
            if tp is None:
                continue
            if v is None:
                out.pop(tp, None)
            else:
                out[tp] = Progress.from_json(v)
        return out
    finally:
        if own:
            consumer.close()


def read_entries(cfg: Config, flow: FlowConfig, keys: Iterable[tuple[str, int]] | None = None,
                 timeout: float = 300.0) -> dict[tuple[str, int], list[MapEntry]]:
    consumer = state_consumer(cfg, flow)
    try:
        topic = offset_map_topic(flow)
        n = topic_partitions(consumer, topic)
        keys = list(keys) if keys is not None else None
        out: dict[tuple[str, int], list[MapEntry]] = {k: [] for k in keys or []}
        if n == 0:
            return out
        parts = sorted({state_partition(t, p, n) for t, p in keys}) if keys is not None else list(range(n))
        wanted = {state_key(t, p) for t, p in keys} if keys is not None else None
        for k, v in read_to_end(consumer, topic, parts, timeout, wanted):
            tp = parse_key(k)
            if tp is None or v is None:
                continue
            out.setdefault(tp, []).append(decode_entry(v))
        return out
    finally:
        consumer.close()


def load_offset_map(cfg: Config, flow: FlowConfig, partitions: Iterable[tuple[str, int]] | None = None
                    ) -> dict[tuple[str, int], PartitionMap]:
    """The committed offset map of the flow (SOURCE (topic, partition) -> PartitionMap).

    With `partitions`, only those are read (and each appears in the result, maybe empty).
    """
    return {k: PartitionMap(v) for k, v in read_entries(cfg, flow, partitions).items()}


def blocked_state_partitions(cfg: Config, flow: FlowConfig, admin: AdminClient | None = None) -> set[int]:
    """Progress partitions with an open transaction (last stable offset < high watermark)."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    admin = admin or clients.admin_client(cfg.cluster(flow.target), overrides(flow, "admin"))
    topic = progress_topic(flow)
    n = topic_partitions(admin, topic)
    if not n:
        return set()
    req = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(n)}
    deadline = time.monotonic() + 60
    while True:
        try:
            hw = {tp.partition: f.result().offset for tp, f in
                  admin.list_offsets(req, isolation_level=IsolationLevel.READ_UNCOMMITTED).items()}
            lso = {tp.partition: f.result().offset for tp, f in
                   admin.list_offsets(req, isolation_level=IsolationLevel.READ_COMMITTED).items()}
            return {p for p in hw if lso.get(p, hw[p]) < hw[p]}
        except KafkaException as exc:  # a just-created state topic may still lack its leaders
            if exc.args[0].code() not in RETRIABLE or time.monotonic() > deadline:
                raise StateError(f"cannot list offsets of state topic {topic!r}: {exc.args[0].str()}") from None
            time.sleep(0.2)


def fence_open_transactions(cfg: Config, flow: FlowConfig, keys: Iterable[tuple[str, int]],
                            admin: AdminClient | None = None, log: Any = None) -> int:
    """Abort the transactions a crashed copy left open, so state reads need not wait for the broker's
    transaction.timeout.ms: for every source partition whose progress partition has an open
    transaction, init_transactions with its transactional.id (which fences that id's zombie and
    aborts its transaction). A copy still running for that partition is fenced too (it stops
    cleanly); only call this while no run of the flow is active. Returns how many ids were fenced."""
    if not flow.exactly_once:
        return 0
    from concurrent.futures import ThreadPoolExecutor

    blocked = blocked_state_partitions(cfg, flow, admin)
    if not blocked:
        return 0
    n = topic_partitions(admin or clients.admin_client(cfg.cluster(flow.target), overrides(flow, "admin")),
                         progress_topic(flow))
    todo = [(t, p) for t, p in keys if state_partition(t, p, n) in blocked]

    def fence(tp: tuple[str, int]) -> None:
        pr = clients.producer(cfg.cluster(flow.target), {**overrides(flow, "producer"),
                                                         "transactional.id": transactional_id(flow, *tp)})
        pr.init_transactions(60)
        pr.flush(5)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(fence, todo))
    if log:
        log(f"aborted open transactions of {len(todo)} source partitions (a crashed copy)")
    return len(todo)


@dataclass
class StateWriter:
    """Produces progress and offset-map records with a given producer (inside its transaction)."""

    flow: FlowConfig
    progress_partitions: int
    map_partitions: int
    _progress_topic: str = field(init=False)
    _map_topic: str = field(init=False)

    def __post_init__(self) -> None:
        self._progress_topic = progress_topic(self.flow)
        self._map_topic = offset_map_topic(self.flow)

    def write(self, producer: Any, progress: Progress, entry: MapEntry | None) -> None:
        key = state_key(progress.topic, progress.partition)
        if entry is not None:
            producer.produce(self._map_topic, encode_entry(entry), key,
                             state_partition(progress.topic, progress.partition, self.map_partitions))
        producer.produce(self._progress_topic, progress.to_json(), key,
                         state_partition(progress.topic, progress.partition, self.progress_partitions))
