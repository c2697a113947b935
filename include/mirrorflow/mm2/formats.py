"""MirrorMaker 2's binary record formats: OffsetSync, Checkpoint and Heartbeat.

Byte for byte what `connect-mirror(-client)` writes and reads (Kafka protocol "types" encoding:
big-endian INT16/INT32/INT64, STRING = INT16 length + UTF-8), so Java tools such as
`RemoteClusterUtils.translateOffsets` read our records unchanged, and we read theirs.

Decoding is as lenient as Java's: bytes after the last field are ignored and the value's
`version` is parsed but any version is read as the V0 body (Java only `assert`s it).
A malformed record raises FormatError, which readers skip, as MM2 skips SchemaExceptions.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mirrorflow.errors import MirrorflowError

VERSION = 0
STRING_MAX = 32767


class FormatError(MirrorflowError):
    """A record is not in MM2's format (truncated, negative or oversized string length, ...)."""


class _Reader:
    """A cursor over bytes with MM2's read rules (no check that the buffer is fully consumed)."""

    def __init__(self, data: bytes | None, what: str):
        if data is None:
            raise FormatError(f"{what}: no bytes (null)")
        self.data = bytes(data)
        self.pos = 0
        self.what = what

    def _take(self, n: int, field: str) -> bytes:
        if self.pos + n > len(self.data):
            raise FormatError(
                f"{self.what}: truncated while reading {field} "
                f"(needs {n} bytes at {self.pos}, has {len(self.data) - self.pos})"
            )
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def int16(self, field: str) -> int:
        return struct.unpack(">h", self._take(2, field))[0]

    def int32(self, field: str) -> int:
        return struct.unpack(">i", self._take(4, field))[0]

    def int64(self, field: str) -> int:
        return struct.unpack(">q", self._take(8, field))[0]

    def string(self, field: str) -> str:
        n = self.int16(field)
        if n < 0:
            raise FormatError(f"{self.what}: {field} has a negative length {n}")
        raw = self._take(n, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"{self.what}: {field} is not UTF-8 ({exc.reason})") from None


_INT16, _INT32, _CHECKPOINT_VALUE = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">hqq")


def _checkpoint_fields(key: bytes | None, value: bytes | None) -> tuple[str, str, int, int, int, str] | None:
    """A well-formed checkpoint's fields in a few struct calls (a checkpoint pass loads every
    checkpoint of the topic: 110,000 took 13 s through _Reader); None: let _Reader decode it and
    say what is wrong."""
    try:
        if key is None or value is None:
            return None
        n = _INT16.unpack_from(key, 0)[0]
        group, p = key[2 : 2 + n], 2 + n
        m = _INT16.unpack_from(key, p)[0]
        topic, p = key[p + 2 : p + 2 + m], p + 2 + m
        partition = _INT32.unpack_from(key, p)[0]
        _, upstream, downstream = _CHECKPOINT_VALUE.unpack_from(value, 0)
        k = _INT16.unpack_from(value, 18)[0]
        metadata = value[20 : 20 + k]
        if n < 0 or m < 0 or k < 0 or len(group) != n or len(topic) != m or len(metadata) != k:
            return None
        return group.decode("utf-8"), topic.decode("utf-8"), partition, upstream, downstream, metadata.decode("utf-8")
    except (struct.error, UnicodeDecodeError, TypeError):
        return None


def _string(s: str, field: str) -> bytes:
    if s is None:
        raise FormatError(f"{field} may not be null")
    b = s.encode("utf-8")
    if len(b) > STRING_MAX:
        raise FormatError(f"{field} is {len(b)} bytes long, more than {STRING_MAX}")
    return struct.pack(">h", len(b)) + b


@dataclass(frozen=True)
class OffsetSync:
    """(upstream topic-partition, upstream offset) -> downstream offset of the same record.

    Key: topic STRING (the upstream, not renamed, name), partition INT32.
    Value: upstreamOffset INT64, offset INT64 (no version header).
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _string(self.topic, "topic") + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">qq", self.upstream_offset, self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        k = _Reader(key, "offset sync key")
        topic, partition = k.string("topic"), k.int32("partition")
        v = _Reader(value, "offset sync value")
        return cls(topic, partition, v.int64("upstreamOffset"), v.int64("offset"))


@dataclass(frozen=True)
class Checkpoint:
    """A consumer group's committed upstream offset and its downstream (target) equivalent.

    Key: group STRING, topic STRING (the downstream, renamed topic), partition INT32.
    Value: version INT16 (0), upstreamOffset INT64, offset INT64, metadata STRING.
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group, "group") + _string(self.topic, "topic") + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">hqq", VERSION, self.upstream_offset, self.downstream_offset) + _string(
            self.metadata or "", "metadata"
        )

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        fast = _checkpoint_fields(key, value)
        if fast is not None:
            return cls(*fast)
        k = _Reader(key, "checkpoint key")
        group, topic, partition = k.string("group"), k.string("topic"), k.int32("partition")
        v = _Reader(value, "checkpoint value")
        v.int16("version")  # any version is read as V0, as Java does outside -ea
        return cls(group, topic, partition, v.int64("upstreamOffset"), v.int64("offset"), v.string("metadata"))


@dataclass(frozen=True)
class Heartbeat:
    """Proof of life of a flow: emitted by herder source->target with the wall-clock time.

    Key: sourceClusterAlias STRING, targetClusterAlias STRING.
    Value: version INT16 (0), timestamp INT64 (ms since the epoch).
    """

    source: str
    target: str
    timestamp: int

    def key(self) -> bytes:
        return _string(self.source, "sourceClusterAlias") + _string(self.target, "targetClusterAlias")

    def value(self) -> bytes:
        return struct.pack(">hq", VERSION, self.timestamp)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        k = _Reader(key, "heartbeat key")
        source, target = k.string("sourceClusterAlias"), k.string("targetClusterAlias")
        v = _Reader(value, "heartbeat value")
        v.int16("version")
        return cls(source, target, v.int64("timestamp"))
