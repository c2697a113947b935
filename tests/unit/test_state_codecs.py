"""State record codecs and placement (pure)."""
from __future__ import annotations

import json

import pytest

from mirrorflow.config import parse
from mirrorflow.errors import StateError
from mirrorflow.state.landmarks import Span
from mirrorflow.state.names import offset_map_topic, progress_topic, transactional_id
from mirrorflow.state.offset_map import MapEntry, Run
from mirrorflow.state.records import Progress, decode_entry, encode_entry
from mirrorflow.state.state_topics import parse_key, state_key, state_partition


def flow():
    return parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
                  "flows": {"A->B": {}}}).flow("A->B")


def test_names_are_internal_and_per_flow():
    f = flow()
    assert progress_topic(f) == "mirrorflow.A-B.progress.internal"
    assert offset_map_topic(f) == "mirrorflow.A-B.offset-map.internal"
    assert transactional_id(f, "orders", 3) == "mirrorflow-A-B-orders-3"
    from mirrorflow.mm2.filters import FlowFilters
    for t in (progress_topic(f), offset_map_topic(f)):  # never replicated by a reverse flow
        assert not FlowFilters.for_flow(f).should_replicate_topic(t)


def test_key_and_partition_are_deterministic():
    assert state_key("orders", 3) == b'{"partition":3,"topic":"orders"}'
    assert parse_key(state_key("orders", 3)) == ("orders", 3)
    assert parse_key(b"garbage") is None
    assert state_partition("orders", 3, 16) == state_partition("orders", 3, 16)
    assert {state_partition("t", p, 4) for p in range(64)} == {0, 1, 2, 3}


def test_entry_round_trip():
    e = MapEntry("orders", 3, 100, 200, (Run(100, 7, 50), Run(160, 57, 40)), 97, lost=12)
    assert decode_entry(encode_entry(e)) == e
    assert "spans" not in json.loads(encode_entry(e))  # as entries were before spans
    # a failback's seed of a pruned map (ops.dr.failback_seeds): spans, flat as in snapshots
    seeded = MapEntry("orders", 3, 0, 100, (Run(60, 40, 10),), 97, spans=(Span(0, 50, 3, 35, 30),))
    assert json.loads(encode_entry(seeded))["spans"] == [0, 50, 3, 35, 30]
    assert decode_entry(encode_entry(seeded)) == seeded
    # an entry as a mirrorflow before spans wrote it reads as it did
    old = b'{"v":1,"topic":"orders","partition":3,"from":0,"to":10,"runs":[[0,0,10]],"tgt_end":11,"ts":1}'
    assert decode_entry(old) == MapEntry("orders", 3, 0, 10, (Run(0, 0, 10),), 11)


def test_progress_round_trip_and_advance():
    p = Progress.empty("orders", 3).advanced(0, 100, 100, 100, 1234)
    p = p.advanced(130, 150, 121, 20, 2000, lost_range=(100, 130))
    assert p.next == 150 and p.covered == ((0, 100), (130, 150)) and p.lost == 30 and p.gaps == ((100, 130),)
    assert p.records == 120 and p.tgt_end == 121 and p.last_timestamp == 2000
    assert Progress.from_json(p.to_json()) == p


def test_newer_format_is_refused():
    with pytest.raises(StateError):
        Progress.from_json(b'{"v":99,"topic":"t","partition":0,"next":1}')


# -- progress is what was copied --------------------------------------------------------------------
def test_progress_moves_only_over_what_was_copied_or_named_lost():
    from mirrorflow.state.records import Progress

    fresh = Progress.empty("t", 0)
    anchored = fresh.advanced(20, 20, 0, 0, -1)  # latest: an anchor at 20, the flow owns 20 on
    assert (anchored.next, anchored.origin, anchored.covered) == (20, 20, ())
    # a unit cut short at 98, then the next unit copied: next stays at the hole
    p = fresh.advanced(0, 98, 98, 98, 1).advanced(1000, 2000, 1098, 1000, 2)
    assert (p.next, p.high, p.holes(), p.holes(3000)) == (98, 2000, [(98, 1000)], [(98, 1000), (2000, 3000)])
    assert p.last_timestamp == 2
    filled = p.advanced(98, 1000, 2000, 902, 1)  # the hole, copied later: next jumps the island
    assert (filled.next, filled.covered, filled.holes()) == (2000, ((0, 2000),), [])
    assert filled.last_timestamp == 2  # older records do not make the newest copied timestamp older
    # a hole part of which source retention took: named lost, accounted for
    lost = fresh.advanced(0, 10, 10, 10, 1).advanced(50, 60, 20, 10, 2).advanced(15, 50, 30, 35, 3, (10, 15))
    assert (lost.next, lost.lost, lost.holes()) == (60, 5, [])
    # a backfill below where the flow started is not the flow's to copy: no hole, next stays
    below = anchored.advanced(20, 25, 5, 5, 9).advanced(0, 7, 12, 7, 1)
    assert (below.next, below.holes()) == (25, [])


def test_progress_from_an_earlier_release_is_read_with_next_at_its_first_hole():
    import json

    from mirrorflow.state.records import Progress

    old = json.loads(Progress("t", 0, 3000, ((0, 98), (1000, 2000), (2000, 3000)), 1176, records=1176).to_json())
    old.pop("origin")
    p = Progress.from_json(json.dumps(old).encode())
    assert (p.next, p.origin, p.owned_from, p.holes()) == (98, -1, 0, [(98, 1000)])
    # without holes it reads as written; and the origin survives a round trip
    q = Progress.from_json(Progress("t", 0, 40, ((0, 40),), 40, origin=0).to_json())
    assert (q.next, q.origin) == (40, 0)
