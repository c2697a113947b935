"""Golden bytes for MM2's record formats (layouts of Checkpoint.java, Heartbeat.java and OffsetSync.java in Kafka's connect/mirror-client and connect/mirror) and lenient decoding."""
from __future__ import annotations

import pytest

from mirrorflow.mm2.formats import Checkpoint, FormatError, Heartbeat, OffsetSync


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace("|", " "))


def test_offset_sync_golden_bytes():
    s = OffsetSync("topic1", 0, 100, 50)
    assert s.key() == h("00 06 74 6f 70 69 63 31 00 00 00 00")
    assert s.value() == h("00 00 00 00 00 00 00 64 00 00 00 00 00 00 00 32")
    assert OffsetSync.decode(s.key(), s.value()) == s


def test_checkpoint_golden_bytes():
    c = Checkpoint("cg1", "A.topic1", 2, 100, 51, "")
    assert c.key() == h("00 03 63 67 31 00 08 41 2e 74 6f 70 69 63 31 00 00 00 02")
    assert len(c.key()) == 19
    assert c.value() == h("00 00 | 00 00 00 00 00 00 00 64 | 00 00 00 00 00 00 00 33 | 00 00")
    assert len(c.value()) == 20
    m = Checkpoint("cg1", "A.topic1", 2, 100, 51, "m")
    assert len(m.value()) == 21 and m.value().endswith(h("00 01 6d"))
    assert Checkpoint.decode(c.key(), c.value()) == c
    assert Checkpoint.decode(m.key(), m.value()) == m


def test_heartbeat_golden_bytes():
    hb = Heartbeat("A", "B", 1_700_000_000_000)
    assert hb.key() == h("00 01 41 00 01 42")
    assert hb.value() == h("00 00 | 00 00 01 8b cf e5 68 00")
    assert Heartbeat.decode(hb.key(), hb.value()) == hb


def test_decode_is_lenient_like_java():
    c = Checkpoint("g", "A.t", 0, 7, 9, "meta")
    # trailing bytes after the last field are ignored
    assert Checkpoint.decode(c.key() + b"\xff\xff", c.value() + b"extra") == c
    # any version is read as the V0 body (Java only asserts the version)
    v1 = b"\x00\x01" + c.value()[2:]
    assert Checkpoint.decode(c.key(), v1) == c
    hb = Heartbeat("A", "B", 5)
    assert Heartbeat.decode(hb.key() + b"x", b"\x00\x07" + hb.value()[2:] + b"yy") == hb
    s = OffsetSync("t", 3, 1, 2)
    assert OffsetSync.decode(s.key() + b"\x00", s.value() + b"\x00") == s


def test_unicode_strings_use_utf8_byte_lengths():
    c = Checkpoint("grüppe", "A.tøpic", 1, 1, 1, "é")
    assert c.key()[:2] == b"\x00\x07"  # 'grüppe' is 7 bytes in UTF-8
    assert Checkpoint.decode(c.key(), c.value()) == c


@pytest.mark.parametrize("key,value", [
    (b"\x00\x05ab", b""),                                   # string longer than the buffer
    (b"\xff\xff", b""),                                     # negative length
    (None, None),                                           # tombstone / null
    (Checkpoint("g", "t", 0, 1, 1).key(), b"\x00\x00\x00"),  # truncated value
    (Checkpoint("g", "t", 0, 1, 1).key()[:-1], Checkpoint("g", "t", 0, 1, 1).value()),  # truncated partition
])
def test_malformed_records_raise_format_error(key, value):
    with pytest.raises(FormatError):
        Checkpoint.decode(key, value)


def test_encode_rejects_oversized_strings_and_negative_lengths_roundtrip():
    with pytest.raises(FormatError):
        Checkpoint("g" * 40000, "t", 0, 1, 1).key()
    # negative offsets are representable (Java uses -1 for "older than any sync")
    c = Checkpoint("g", "t", 0, -1, -1)
    assert Checkpoint.decode(c.key(), c.value()) == c


def test_fast_checkpoint_decode_matches_the_careful_reader():
    """Checkpoint.decode takes a struct fast path for well-formed records (a pass loads every
    checkpoint); the fields are those the field-by-field reader gives, malformed ones still fail."""
    from mirrorflow.mm2.formats import _checkpoint_fields

    for c in (Checkpoint("g", "A.t", 0, 7, 9, "meta"), Checkpoint("grüppe", "A.tøpic", 3, 1, 2, ""),
              Checkpoint("", "", -1, 0, 0, "")):
        assert _checkpoint_fields(c.key(), c.value()) == (c.group, c.topic, c.partition, c.upstream_offset,
                                                          c.downstream_offset, c.metadata)
        assert Checkpoint.decode(c.key() + b"\x00", c.value() + b"zz") == c
    good = Checkpoint("g", "t", 0, 1, 1)
    assert _checkpoint_fields(good.key()[:-1], good.value()) is None  # truncated partition: the reader says why
    assert _checkpoint_fields(good.key(), good.value()[:-1]) is None  # truncated metadata length
    assert _checkpoint_fields(b"\xff\xff", good.value()) is None      # negative length
    with pytest.raises(FormatError, match="not UTF-8"):
        Checkpoint.decode(b"\x00\x01\xff" + good.key()[3:], good.value())
