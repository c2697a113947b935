"""MirrorSourceConnector offsets in Kafka Connect's offsets topic, as each MM2 deployment names them:
dedicated mode (`MirrorSourceConnector`), a Connect cluster (any name, e.g. the DR guide's
`A-to-B-MirrorSourceConnector`) and Strimzi (`A->B.MirrorSourceConnector`); and which connector a
takeover continues from."""
from __future__ import annotations

import base64

import pytest

from mirrorflow.mm2.connect_offsets import (
    SourceOffset,
    decode_source_offset,
    dedicated_offsets_topic,
    strimzi_connector,
)
from mirrorflow.ops.takeover.from_mm2 import TakeoverError, _is_copy, choose_connector


@pytest.mark.parametrize("connector", ["MirrorSourceConnector", "A-to-B-MirrorSourceConnector",
                                       "A->B.MirrorSourceConnector"])
def test_a_source_offset_is_read_whatever_the_connector_is_called(connector):
    # Connect's JsonConverter (schemas off) as the worker writes it; key order is not guaranteed
    key = f'["{connector}",{{"partition":1,"topic":"orders","cluster":"A"}}]'.encode()
    assert decode_source_offset(key, b'{"offset":41}') == SourceOffset(connector, "A", "orders", 1, 41)
    assert decode_source_offset(key, None) == SourceOffset(connector, "A", "orders", 1, None)  # a tombstone


@pytest.mark.parametrize("key,value", [
    (b'["A-to-B-MirrorCheckpointConnector",{"group":"g","topic":"A.t","partition":0}]', b'{"offset":0}'),
    (b'["A->B.MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]', b'{"offset":0}'),
    (b'["some-jdbc-source",{"table":"t"}]', b'{"id":3}'),
    (b"not json", b'{"offset":1}'),
    (b'["MirrorSourceConnector",{"cluster":"A","topic":"t","partition":"x"}]', b'{"offset":1}'),
    (b'["MirrorSourceConnector",{"cluster":"A","topic":"t","partition":0}]', b'{"position":1}'),
    (None, b'{"offset":1}'),
])
def test_other_records_of_the_offsets_topic_are_not_source_offsets(key, value):
    assert decode_source_offset(key, value) is None


def test_the_deployments_names():
    assert dedicated_offsets_topic("A") == "mm2-offsets.A.internal"
    assert strimzi_connector("my-source", "my-target") == "my-source->my-target.MirrorSourceConnector"


FOUND = {
    ("A-to-B-MirrorSourceConnector", "A"): {("t", 0): 5},
    ("C->B.MirrorSourceConnector", "C"): {("u", 0): 7},
}


def test_the_only_connector_for_the_source_is_chosen():
    assert choose_connector(FOUND, "offs", "A", None) == "A-to-B-MirrorSourceConnector"
    assert choose_connector(FOUND, "offs", "C", "C->B.MirrorSourceConnector") == "C->B.MirrorSourceConnector"
    assert choose_connector(FOUND, "offs", "Z", None) is None  # MM2 never stored one for this source


def test_a_named_connector_without_offsets_lists_what_there_is():
    with pytest.raises(TakeoverError) as e:
        choose_connector(FOUND, "offs", "A", "MirrorSourceConnector")
    assert str(e.value) == (
        "connector 'MirrorSourceConnector' stored no offsets for source alias 'A' in 'offs'; MirrorSourceConnector "
        "offsets found there: 'A-to-B-MirrorSourceConnector' (source alias 'A', 1 partition(s)), "
        "'C->B.MirrorSourceConnector' (source alias 'C', 1 partition(s)) (name one with --mm2-connector, the "
        "source alias with --mm2-source)")


def test_two_connectors_for_one_source_are_never_guessed_between():
    found = {**FOUND, ("MirrorSourceConnector", "A"): {("t", 0): 3}}
    with pytest.raises(TakeoverError, match=r"^2 connectors stored offsets for source alias 'A' in 'offs': "
                       r"'A-to-B-MirrorSourceConnector' .*'MirrorSourceConnector' .*--mm2-connector"):
        choose_connector(found, "offs", "A", None)
    assert choose_connector(found, "offs", "A", "MirrorSourceConnector") == "MirrorSourceConnector"


def test_a_copy_through_connects_simple_header_converter_is_recognised():
    src = (b"k", b"v", (("n", b"\x00\x01"), ("e", None)), 10)
    assert _is_copy(src, src)
    assert _is_copy((b"k", b"v", (("n", base64.b64encode(b"\x00\x01")), ("e", None)), 10), src)
    assert not _is_copy((b"k", b"v", (("n", b"AAF="), ("e", None)), 10), src)  # another value
    assert not _is_copy((b"k", b"w", (("n", b"\x00\x01"), ("e", None)), 10), src)
    assert not _is_copy((b"k", b"v", (("n", b"\x00\x01"),), 10), src)
    assert not _is_copy((b"k", b"v", (("m", b"\x00\x01"), ("e", None)), 10), src)
