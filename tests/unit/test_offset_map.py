"""Pure tests of exact offset translation (mirrorflow.state.offset_map)."""
from __future__ import annotations

from mirrorflow.state.offset_map import MapEntry, PartitionMap, Run, Translation, merge_ranges, subtract_ranges, uncovered


def E(src_from, src_to, runs, tgt_end, lost=0):
    return MapEntry("t", 0, src_from, src_to, tuple(Run(*r) for r in runs), tgt_end, lost)


def test_empty_map_is_none():
    assert PartitionMap([]).translate(5) == Translation(5, None, "none")


def test_contiguous_copy_is_exact_everywhere():
    m = PartitionMap([E(0, 100, [(0, 0, 100)], 100), E(100, 200, [(100, 101, 100)], 201)])
    assert m.translate(0) == Translation(0, 0, "exact")
    assert m.translate(99) == Translation(99, 99, "exact")
    # the transaction marker of the first transaction sits at target offset 100
    assert m.translate(100) == Translation(100, 101, "exact")
    assert m.translate(199) == Translation(199, 200, "exact")
    assert m.translate(200) == Translation(200, 201, "end")
    assert m.translate(250) == Translation(250, 201, "ahead", 50)
    assert m.covered == [(0, 200)]
    assert m.target_of(150) == 151 and m.target_of(200) is None


def test_gaps_inside_a_transaction_are_exact():
    # source 0..9 with a compaction hole at 3..5 and a marker at 8; records 0,1,2,6,7,9 copied
    m = PartitionMap([E(0, 10, [(0, 0, 3), (6, 3, 2), (9, 5, 1)], 6)])
    assert m.translate(3) == Translation(3, 3, "exact")  # next record is 6 -> target 3
    assert m.translate(5) == Translation(5, 3, "exact")
    assert m.translate(8) == Translation(8, 5, "exact")
    assert m.translate(10) == Translation(10, 6, "end")


def test_trailing_aborted_records_are_end():
    # the transaction covers 0..20 but only 0..9 were committed records (10..19 aborted + marker)
    m = PartitionMap([E(0, 20, [(0, 0, 10)], 10)])
    assert m.translate(12) == Translation(12, 10, "end")
    assert m.translate(20) == Translation(20, 10, "end")


def test_before_first_copied_offset():
    m = PartitionMap([E(50, 60, [(50, 0, 10)], 10, lost=50)])
    t = m.translate(20)
    assert t == Translation(20, 0, "before", 30)
    assert m.lost == 50


def test_backfill_hole_is_gap():
    m = PartitionMap([E(0, 10, [(0, 0, 10)], 10), E(20, 30, [(20, 11, 10)], 21)])
    assert m.translate(10) == Translation(10, 11, "gap", 10)
    assert m.translate(15) == Translation(15, 11, "gap", 5)
    assert m.translate(20) == Translation(20, 11, "exact")
    assert m.covered == [(0, 10), (20, 30)]


def test_gap_event_without_records():
    m = PartitionMap([E(100, 100, [], 0, lost=100)])
    assert m.translate(100) == Translation(100, 0, "end")
    assert m.translate(40) == Translation(40, 0, "before", 60)
    assert m.translate(120) == Translation(120, 0, "ahead", 20)


def test_entry_order_does_not_matter_and_runs_merge():
    a, b = E(0, 5, [(0, 0, 5)], 5), E(5, 10, [(5, 5, 5)], 10)
    m = PartitionMap([b, a])
    assert m.runs == [Run(0, 0, 10)]
    assert m.translate(7).target_offset == 7


def test_at_least_once_duplicates_keep_earliest_copy():
    # a retry re-copied 100..199 after the first attempt had written them at 0..99
    m = PartitionMap([E(100, 200, [(100, 0, 100)], 100), E(100, 300, [(100, 100, 200)], 300)])
    assert m.translate(150) == Translation(150, 50, "exact")
    assert m.translate(250) == Translation(250, 250, "exact")
    assert m.translate(300) == Translation(300, 300, "end")


def test_range_helpers():
    assert merge_ranges([(5, 7), (0, 3), (3, 4), (6, 9), (10, 10)]) == [(0, 4), (5, 9)]
    r = [(0, 4), (5, 9)]
    assert uncovered(r, 0, 10) == 2
    assert uncovered(r, 4, 5) == 1
    assert uncovered(r, 6, 8) == 0
    assert subtract_ranges(0, 12, r) == [(4, 5), (9, 12)]
    assert subtract_ranges(5, 9, r) == []
