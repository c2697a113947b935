"""A copy task slot's transactional producer, kept across runs in this process, and the lanes'
source consumers.

A task slot (state.task_slots) has one transactional.id; every attempt at the slot's partitions,
in every run, uses it. Creating the producer and `init_transactions` cost a cold connection and a
round trip to the transaction coordinator, so a Python process that copies many runs (a Spark
Connect server's workers live on between runs) keeps the producer of each slot it copied in a
cache (`ProducerCache`): an attempt checks it out (no two attempts ever share one), gives it back
when it ends well, and drops it when it failed or was fenced. What an attempt does with it (its
epoch, its claim, its transactions) is replication.task.copy_transaction's.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.replication.task.budget import CopyBudget
from mirrorflow.replication.task.reader import TRANSACTION_TIMEOUT_MS
from mirrorflow.replication.task.write_failures import FatalError

MAX_MESSAGE_BYTES = 1_000_000_000  # librdkafka's maximum: let the BROKER decide what is too large
BATCH_BYTES = 1_000_000  # a producer batch (MessageSet) at most...
BATCH_MARGIN = 512  # ...and this far below the smallest max.message.bytes of the task's target topics

# The producer's settings a user may override (`producer.*`); its batching comes from the task's
# memory budget (replication.task.budget.CopyBudget.producer), `producer_required` is applied on top.
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
    known: set[str] = field(default_factory=set)  # topics whose metadata it asked for (TaskCopier._rounds)


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
        return key, self._new(clients, defaults, required)

    def renew(self, clients: FlowClients, defaults: dict[str, Any], required: dict[str, Any], old: Any) -> Any:
        """A new consumer in place of `old`, which is closed (a lane whose reads stalled: see
        replication.task.reader.RangeReader); never one from the pool."""
        self._close(old)
        return self._new(clients, defaults, required)

    @staticmethod
    def _new(clients: FlowClients, defaults: dict[str, Any], required: dict[str, Any]) -> Any:
        consumer = clients.consumer("source", defaults, required)
        clients.detach(consumer)
        return consumer

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
