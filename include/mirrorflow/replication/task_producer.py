"""A copy task slot's transactional producer, kept across runs in this process, and how an attempt
establishes its epoch.

A task slot (state.task_slots) has one transactional.id; every attempt at the slot's partitions,
in every run, uses it. Creating the producer and `init_transactions` cost a cold connection and a
round trip to the transaction coordinator, so a Python process that copies many runs (a Spark
Connect server's workers live on between runs) keeps the producer of each slot it copied in a
cache (`ProducerCache`): an attempt checks it out (no two attempts ever share one), gives it back
when it ends well, and drops it when it failed or was fenced.

Before it reads any progress, an attempt ESTABLISHES its producer's epoch (`establish`):

* a new producer: init_transactions (fencing every older producer of the slot and aborting its
  open transaction), then, over those of the partitions it will write (its target partitions and
  their progress and offset-map partitions) that still hold a transaction open, one aborted
  transaction: what an earlier epoch left pending there ends as aborted
  (state.fencing.abort_pending). A partition with nothing pending gets no aborted record: its
  offsets stay what the copies committed (a failback counts every other offset of a compacted
  topic as removed by the cleaner), and a quiet partition costs no write;
* a cached producer: the same over the partitions it has not looked at yet in its epoch;
* both: a CLAIM committed with it: a record in the progress topic (key `task_slots.claim_key`)
  naming the run's lease owner and the attempt (Spark's attempt number). A producer that a newer
  epoch fenced fails this commit, before anything was read.

A claim that fails as fenced on a cached producer means another producer initialised the slot after
this one did: a zombie of an older attempt, or a fencing tool (replication.task_copier decides,
with `read_claim`, whether the attempt re-initialises or stops). Once a claim is committed, no
older producer of the slot can commit anymore, and any newer one commits only after this attempt
stopped committing: a zombie never commits after a newer attempt has read its progress.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import TransactionAbortedError
from mirrorflow.kafka.connection import kafka_error
from mirrorflow.kafka.retry import Outage, call_timeout_s, retrying
from mirrorflow.replication.budget import CopyBudget
from mirrorflow.replication.faults import NO_FAULTS, Faults
from mirrorflow.replication.reader import TRANSACTION_TIMEOUT_MS
from mirrorflow.replication.write_failures import FatalError
from mirrorflow.state.fencing import abort_pending, open_transactions
from mirrorflow.state.names import progress_topic
from mirrorflow.state.task_slots import claim_key, key_partition, last_value

MAX_MESSAGE_BYTES = 1_000_000_000  # librdkafka's maximum: let the BROKER decide what is too large
BATCH_BYTES = 1_000_000  # a producer batch (MessageSet) at most...
BATCH_MARGIN = 512  # ...and this far below the smallest max.message.bytes of the task's target topics

# The producer's settings a user may override (`producer.*`); its batching comes from the task's
# memory budget (replication.budget.CopyBudget.producer), `producer_required` is applied on top.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "message.max.bytes": MAX_MESSAGE_BYTES,
    "compression.type": "none",
    "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
}
Part = tuple[str, int]
CACHE_SIZE = 64  # slot producers kept per process (a Spark Connect worker may serve many flows)
CACHE_IDLE_S = 900.0  # kept this long unused (runs every few minutes reuse it; an idle flow's go)


def producer_required(flow: FlowConfig, transactional_id: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"enable.idempotence": True, "acks": "all"}
    if flow.exactly_once and transactional_id:
        conf["transactional.id"] = transactional_id
    return conf


def producer_defaults(flow: FlowConfig, budget: CopyBudget, limit: int | None) -> dict[str, Any]:
    """The slot producer's defaults: the budget's batching, with batches below `limit` (the
    smallest max.message.bytes of the target topics), so a batch the broker refuses is one record
    too large, never a batch of small ones."""
    defaults = {**budget.producer(), **PRODUCER_DEFAULTS}
    if limit:
        defaults["batch.size"] = max(1, min(int(defaults["batch.size"]), BATCH_BYTES, limit - BATCH_MARGIN))
    if not flow.exactly_once:
        defaults.pop("transaction.timeout.ms")
    return defaults


def target_limits(clients: FlowClients, topics: set[str]) -> dict[str, int]:
    """max.message.bytes of each target topic (one DescribeConfigs request); {} when unknown."""
    if not topics:
        return {}
    try:
        futures = clients.admin("target").describe_configs(
            [ConfigResource(ResourceType.TOPIC, t) for t in sorted(topics)], request_timeout=clients.admin_timeout
        )
        out = {}
        for res, fut in futures.items():
            entry = fut.result(clients.admin_timeout).get("max.message.bytes")
            if entry is not None and entry.value is not None:
                out[res.name] = int(entry.value)
        return out
    except (KafkaException, ValueError):  # not allowed to describe (ACLs), or away: the broker still decides
        return {}


@dataclass(eq=False)
class SlotProducer:
    """A slot's producer, its error callback and what its current epoch has covered."""

    transactional_id: str
    producer: Any
    fatal: FatalError
    key: str  # the cache key: id and settings
    initialised: bool = False  # init_transactions succeeded (its epoch is this producer's)
    fresh: bool = True  # initialised by the attempt holding it (not taken from the cache)
    closed: set[Part] = field(default_factory=set)  # partitions its epoch's aborted transaction covered


class ProducerCache:
    """The slot producers of this process, each checked out by at most one attempt at a time; one
    idle longer than `idle_s` (or past the `size` most recently used) is let go."""

    def __init__(self, size: int = CACHE_SIZE, idle_s: float = CACHE_IDLE_S) -> None:
        self.size, self.idle_s = size, idle_s
        self._idle: dict[str, tuple[float, SlotProducer]] = {}
        self._lock = threading.Lock()

    def checkout(
        self, clients: FlowClients, tid: str, defaults: dict[str, Any], required: dict[str, Any]
    ) -> SlotProducer:
        """The idle producer of `tid` with these settings, else a new one (not initialised yet)."""
        conf = clients.connection("target").settings(
            {**defaults, **clients.overrides("target", "producer"), **required}
        )
        # the settings (the cluster's, secrets included) only as a digest: the key is never logged either
        key = tid + "|" + hashlib.sha256(repr(sorted((k, str(v)) for k, v in conf.items())).encode()).hexdigest()
        with self._lock:
            self._expire()
            cached = self._idle.pop(key, None)
        if cached is not None:
            cached[1].fresh = False
            return cached[1]
        fatal = FatalError()
        producer = clients.producer("target", defaults, {**required, "error_cb": fatal})
        clients.detach(producer)  # it outlives these clients (the cache owns it)
        return SlotProducer(tid, producer, fatal, key)

    def give_back(self, sp: SlotProducer) -> None:
        """Keep a healthy, initialised producer for the slot's next attempt in this process."""
        if not sp.initialised or sp.fatal.error is not None:
            return
        with self._lock:
            self._idle[sp.key] = (time.monotonic(), sp)
            self._expire()

    def _expire(self) -> None:
        now = time.monotonic()
        for key, (since, _) in list(self._idle.items()):
            if now - since > self.idle_s:
                del self._idle[key]
        while len(self._idle) > self.size:
            del self._idle[min(self._idle, key=lambda k: self._idle[k][0])]

    def clear(self) -> None:
        with self._lock:
            self._idle.clear()

    def __len__(self) -> int:
        return len(self._idle)


CACHE = ProducerCache()  # this process's (a Spark Connect server's Python worker lives on between runs)


class ConsumerPool:
    """The lanes' source consumers of this process (assign mode: a consumer is not tied to a
    partition), kept between runs like the slot producers: a run over many quiet partitions does
    not build a consumer per lane again. One idle longer than `idle_s` (or past `size`) is closed."""

    def __init__(self, size: int = 4 * CACHE_SIZE, idle_s: float = CACHE_IDLE_S) -> None:
        self.size, self.idle_s = size, idle_s
        self._idle: dict[str, list[tuple[float, Any]]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(clients: FlowClients, defaults: dict[str, Any], required: dict[str, Any]) -> str:
        conf = {**defaults, **clients.overrides("source", "consumer"), **required}
        conf = clients.connection("source").settings(conf)
        return hashlib.sha256(repr(sorted((k, str(v)) for k, v in conf.items())).encode()).hexdigest()

    def checkout(self, clients: FlowClients, defaults: dict[str, Any], required: dict[str, Any]) -> tuple[str, Any]:
        key = self.key(clients, defaults, required)
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                return key, idle.pop()[1]
        consumer = clients.consumer("source", defaults, required)
        clients.detach(consumer)
        return key, consumer

    def give_back(self, key: str, consumer: Any) -> None:
        """Keep a consumer for the next lane (unassigned); close what is too old or too many."""
        try:
            consumer.unassign()
        except Exception:  # noqa: BLE001 - a consumer that cannot be unassigned is not reused
            self._close(consumer)
            return
        gone = []
        with self._lock:
            self._idle.setdefault(key, []).append((time.monotonic(), consumer))
            now = time.monotonic()
            for items in self._idle.values():
                gone += [c for t, c in items if now - t > self.idle_s]
                items[:] = [(t, c) for t, c in items if now - t <= self.idle_s]
            while sum(len(v) for v in self._idle.values()) > self.size:
                k = min((k for k in self._idle if self._idle[k]), key=lambda k: self._idle[k][0][0])
                gone.append(self._idle[k].pop(0)[1])
        for c in gone:
            self._close(c)

    @staticmethod
    def _close(consumer: Any) -> None:
        with contextlib.suppress(Exception):
            consumer.close()

    def clear(self) -> None:
        with self._lock:
            items = [c for v in self._idle.values() for _, c in v]
            self._idle.clear()
        for c in items:
            self._close(c)


LANES = ConsumerPool()


@dataclass(frozen=True)
class Claim:
    """Who established a slot's epoch last: the run's lease owner and the attempt (Spark's number)."""

    owner: str
    attempt: int
    run: str = ""

    def to_json(self) -> bytes:
        return json.dumps(
            {"v": 1, "owner": self.owner, "attempt": self.attempt, "run": self.run, "at": int(time.time() * 1000)},
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes | None) -> Claim | None:
        try:
            d = json.loads(raw or b"")
            return cls(str(d["owner"]), int(d["attempt"]), str(d.get("run", "")))
        except (ValueError, KeyError, TypeError):
            return None


def establish(
    clients: FlowClients,
    sp: SlotProducer,
    slot: int,
    parts: list[Part],
    claim: Claim,
    outage: Outage,
    faults: Faults = NO_FAULTS,
) -> None:
    """Establish the attempt's epoch with `sp` (module doc): init_transactions when it is new, an
    aborted transaction over those of the `parts` its epoch has not covered that hold a transaction
    open, the claim committed. Fencing
    surfaces as the KafkaException of the call that found it; an outage is ridden through up to
    `outage`'s bound (a TransactionAbortedError when the aborted transaction did not reach every
    partition: the caller starts again with a new producer)."""
    flow, target = clients.flow, clients.flow.target
    if not flow.exactly_once:
        sp.initialised = True
        return
    pr, where = sp.producer, sp.transactional_id
    if not sp.initialised:
        # connect first (one metadata request): init_transactions on a cold producer waits for its
        # retry timer when the broker connection is not up yet (~0.3 s)
        topic = progress_topic(flow)
        meta_s, init_s = call_timeout_s(outage.bound_s, 30), call_timeout_s(outage.bound_s, 60)
        retrying(lambda: pr.list_topics(topic, timeout=meta_s), outage, target, f"metadata of {topic!r}")
        retrying(lambda: pr.init_transactions(init_s), outage, target, f"init_transactions ({where})")
        sp.initialised = True
    todo = [p for p in dict.fromkeys(parts) if p not in sp.closed]
    pending = open_transactions(clients, todo)
    if pending:
        abort_s = call_timeout_s(outage.bound_s, 60)
        abort = lambda: retrying(lambda: pr.abort_transaction(abort_s), outage, target, f"aborting ({where})")  # noqa: E731
        abort_pending(pr, pending, abort, where, target)
    sp.closed.update(todo)
    nprog = clients.partitions("target", progress_topic(flow))
    pr.begin_transaction()
    pr.produce(progress_topic(flow), claim.to_json(), claim_key(slot), key_partition(claim_key(slot), nprog))
    commit(pr, outage, target, f"the claim of {where}")
    faults.reached("after_init")


def commit(pr: Any, outage: Outage, target: str, what: str) -> None:
    """commit_transaction, again while its outcome is unknown; an abortable failure is a
    TransactionAbortedError (the caller drops the producer), fencing its KafkaException."""
    while True:
        try:
            pr.commit_transaction(call_timeout_s(outage.bound_s, 60))
            return
        except KafkaException as exc:
            e = kafka_error(exc)
            if e is not None and e.txn_requires_abort() and not e.fatal():
                raise TransactionAbortedError(f"{what} was not committed: {e.str()}") from None
            if e is not None and e.retriable() and not e.fatal():
                outage.wait(target, f"committing {what}", exc)
                continue
            raise


def read_claim(clients: FlowClients, slot: int) -> Claim | None:
    """The slot's last committed claim (None: none, or unreadable)."""
    return Claim.from_json(last_value(clients, claim_key(slot)))
