"""'Verified up to' marks: how far each source partition was verified, kept on the target.

A verify that passed over a stretch of a partition records it (records.VerifiedMark), so the next
one -- a planned failover's, `mirrorflow verify --since-last` -- checks only what was copied after
it instead of the flow's whole history. One record per source partition in the flow's progress
topic (compacted: the latest mark of a partition counts), under the key
`{"verified":{"partition":P,"topic":T}}`, which the progress readers skip (it names no topic and
partition at its top level). Marks are written outside transactions (idempotent producer,
acks=all, like the control records) and read read_uncommitted, so an open copy transaction in the
same partition never holds a read back. Whether a mark may be trusted is the verify's decision
(ops.verify.verified_marks): it checks the mark against the partition as it is now.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable

from mirrorflow.clients import FlowClients
from mirrorflow.errors import ClusterError, StateError
from mirrorflow.state.names import STATE_READER, progress_topic, reader_group
from mirrorflow.state.records import VerifiedMark
from mirrorflow.state.state_writer import write_acknowledged

Key = tuple[str, int]


def mark_key(topic: str, partition: int) -> bytes:
    return json.dumps({"verified": {"partition": partition, "topic": topic}}, separators=(",", ":")).encode()


def _partition(key: bytes, n: int) -> int:
    return zlib.crc32(key) % max(1, n)


def read_marks(clients: FlowClients, keys: Iterable[Key]) -> dict[Key, VerifiedMark | StateError]:
    """The latest mark of each of `keys` that has one; a mark this mirrorflow cannot read (a newer
    format, a broken record) is returned as the StateError saying why (the verify trusts nothing)."""
    topic = progress_topic(clients.flow)
    n = clients.partitions("target", topic)
    wanted = {mark_key(t, p): (t, p) for t, p in keys}
    if not n or not wanted:
        return {}
    reader = clients.reader("target", group=reader_group(clients.flow, STATE_READER), committed=False)
    found: dict[Key, VerifiedMark | StateError | None] = {}
    try:
        parts = sorted({_partition(k, n) for k in wanted})
        for m in reader.read(topic, parts, timeout=120, keys=set(wanted)):
            k = wanted[m.key()]
            try:
                found[k] = None if m.value() is None else VerifiedMark.from_json(m.value())
            except StateError as exc:
                found[k] = exc
            except (ValueError, KeyError, TypeError) as exc:
                found[k] = StateError(f"unreadable verified record ({exc.__class__.__name__}: {exc})")
    finally:
        clients.release(reader.consumer)
    return {k: v for k, v in found.items() if v is not None}


def write_marks(clients: FlowClients, marks: Iterable[VerifiedMark]) -> int:
    """Record `marks` on the target (acknowledged, written again through a broker restart up to
    broker.outage.max.seconds; StateError otherwise: never reported as recorded unless it is).
    Returns how many were written."""
    topic = progress_topic(clients.flow)
    n = clients.partitions("target", topic)
    by_part: dict[int, list[tuple[bytes, bytes, int]]] = {}
    for m in marks:
        key = mark_key(m.topic, m.partition)
        by_part.setdefault(_partition(key, n), []).append((key, m.to_json(), m.at))
    try:
        for part, records in sorted(by_part.items()):
            write_acknowledged(clients, topic, records, part, f"recording what verify checked of {clients.flow.name}")
    except ClusterError as exc:
        raise StateError(f"cannot record the verified marks of flow {clients.flow.name}: {exc}") from None
    return sum(len(r) for r in by_part.values())
