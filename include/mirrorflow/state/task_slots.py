"""Copy task slots: which transactional producer commits which source partitions, and since when.

A copy task commits the batches of many source partitions in one transaction with ONE transactional
producer (replication.task.task_producer), as MirrorMaker 2's exactly-once task does. Exactly-once needs
every attempt at a partition, in every run, to use the same transactional.id (a newer attempt's
init_transactions then fences every older one), so the partitions are dealt onto `tasks.max` task
SLOTS by a stable rule, MM2's: the flow's source partitions sorted by (topic, partition), dealt
round-robin (`deal`). Slot s of generation g has the transactional.id
`mirrorflow-<client_name>-task/g<g>/<s>` (`TaskLayout.transactional_id`: under the prefix the
flow's ACLs grant, ops.required_acls; a `/` cannot occur in a topic name, so it never equals a
per-partition id of the scheme before slots, `names.transactional_id`).

The deal is a GENERATION, recorded on the target: a `TaskLayout` record (JSON, format version
`FORMAT_VERSION`) in the progress topic under the key `LAYOUT_KEY`, written outside transactions
(readers of progress skip its key; `read_layout` reads it read_uncommitted, so an open copy
transaction on its partition never holds it back). When the deal changes -- tasks.max changed,
partitions or topics added or removed (the `fingerprint` of the sorted partitions), the scheme --
the run first fences every transactional.id of the old generation (init_transactions per id, in
parallel: librdkafka has no fenceProducers), then records the next generation
(state.fencing.ensure_layout).
A crash between the two fences again next time. A flow copied before slots existed (no layout
record, but lease or progress records: it ran) gets the per-partition ids of all its partitions
fenced once, with their pending transactions ended (state.fencing.fence_ids), before its first
generation is recorded.
"""

from __future__ import annotations

import hashlib
import json
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import StateError
from mirrorflow.kafka.retry import retry_call
from mirrorflow.kafka.topic_admin import produce_all
from mirrorflow.state.names import SLOTS, progress_topic, reader_group, task_transactional_id

Key = tuple[str, int]
SCHEME = "round-robin"  # MM2's: sorted (topic, partition), dealt onto the slots in turn
FORMAT_VERSION = 1
LAYOUT_KEY = b'{"tasks":"layout"}'


def claim_key(slot: int) -> bytes:
    """The key of a slot's claim record (replication.task.task_producer): who established its epoch last."""
    return json.dumps({"tasks": "claim", "slot": slot}, sort_keys=True, separators=(",", ":")).encode()


def key_partition(key: bytes, partitions: int) -> int:
    """The progress partition of a record keyed `key` (the layout, a claim): crc32 like state keys."""
    return zlib.crc32(key) % max(1, partitions)


def fingerprint(partitions: Iterable[Key]) -> str:
    """What a deal depends on besides the slot count: the flow's source partitions."""
    h = hashlib.sha256()
    for t, p in sorted(set(partitions)):
        h.update(f"{t}\0{p}\n".encode())
    return h.hexdigest()[:20]


def deal(partitions: Iterable[Key], slots: int) -> dict[Key, int]:
    """Each partition's slot: the sorted partitions dealt round-robin onto `slots` slots (pure)."""
    n = max(1, int(slots))
    return {tp: i % n for i, tp in enumerate(sorted(set(partitions)))}


@dataclass(frozen=True)
class TaskLayout:
    """One generation of the deal: its number, its slots and the partitions it was dealt from."""

    generation: int
    slots: int
    fingerprint: str
    scheme: str = SCHEME

    def transactional_id(self, flow: FlowConfig, slot: int) -> str:
        return task_transactional_id(flow, self.generation, slot)

    def transactional_ids(self, flow: FlowConfig) -> list[str]:
        return [self.transactional_id(flow, s) for s in range(self.slots)]

    def matches(self, slots: int, print_: str) -> bool:
        return self.scheme == SCHEME and self.slots == slots and self.fingerprint == print_

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskLayout:
        return cls(int(d["generation"]), int(d["slots"]), str(d["fingerprint"]), str(d.get("scheme", SCHEME)))

    def to_json(self) -> bytes:
        return json.dumps({"v": FORMAT_VERSION, **self.to_dict()}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> TaskLayout:
        try:
            d = json.loads(raw)
            if int(d.get("v", 0)) > FORMAT_VERSION:
                raise StateError(
                    f"the task layout record has format version {d['v']}, newer than this mirrorflow reads "
                    f"({FORMAT_VERSION}): upgrade mirrorflow"
                )
            return cls.from_dict(d)
        except (ValueError, KeyError, TypeError) as exc:
            raise StateError(f"the task layout record cannot be read ({exc}): {raw[:200]!r}") from None


def provisional(partitions: Sequence[Key], slots: int) -> TaskLayout:
    """A deal that is not recorded (generation 0: a dry run, which copies nothing)."""
    return TaskLayout(0, max(1, int(slots)), fingerprint(partitions))


# -- the record on the target ----------------------------------------------------------------------
def read_layout(clients: FlowClients) -> TaskLayout | None:
    """The recorded generation (None: none yet). Read uncommitted: the record is never written in a
    transaction, and a copy transaction open on its partition must not hold the read back."""
    raw = last_value(clients, LAYOUT_KEY, committed=False)
    return TaskLayout.from_json(raw) if raw else None


def last_value(clients: FlowClients, key: bytes, committed: bool = True) -> bytes | None:
    """The latest value under `key` in the flow's progress topic (the layout, a slot's claim)."""
    topic = progress_topic(clients.flow)
    n = clients.partitions("target", topic)
    if not n:
        return None
    reader = clients.reader("target", group=reader_group(clients.flow, SLOTS), committed=committed)
    raw = None
    try:
        for m in reader.read(topic, [key_partition(key, n)], clients.admin_timeout, keys={key}):
            raw = m.value()
    finally:
        clients.release(reader.consumer)
    return raw


def write_layout(clients: FlowClients, layout: TaskLayout) -> None:
    """Record `layout` (acknowledged, retried through an outage like state_writer.write_acknowledged)."""
    topic = progress_topic(clients.flow)
    n = clients.partitions("target", topic)
    records = [(LAYOUT_KEY, layout.to_json(), int(time.time() * 1000))]
    conn, conf = clients.connection("target"), clients.overrides("target", "producer")
    what = f"writing the task layout (generation {layout.generation}) of flow {clients.flow.name}"
    retry_call(
        lambda: produce_all(conn, topic, records, key_partition(LAYOUT_KEY, n), conf, 15.0),
        conn.alias,
        what,
        clients.outage_timeout,
    )
