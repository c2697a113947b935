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


# -- folding (snapshots) and pruning ------------------------------------------------------------
import random  # noqa: E402

from mirrorflow.state.offset_map import Folded, merge_runs  # noqa: E402


def eos_history(n, start=0, size=10, tgt=0, holes=False, seed=1):
    """n exactly-once transactions of `size` source offsets each: a commit marker after each on the
    target; with `holes`, random compaction holes inside the transactions."""
    rnd = random.Random(seed)
    out, s, t = [], start, tgt
    for _ in range(n):
        runs, run = [], None
        for o in range(s, s + size):
            if holes and rnd.random() < 0.3:
                run = None
                continue
            if run is None:
                run = [o, t, 0]
                runs.append(run)
            run[2] += 1
            t += 1
        out.append(E(s, s + size, [tuple(r) for r in runs], t))
        s, t = s + size, t + 1  # the marker
    return out


def translations(m, lo, hi):
    return [m.translate(g) for g in range(lo, hi)]


def test_fold_then_tail_translates_like_all_entries():
    for seed in range(5):
        entries = eos_history(40, start=7, holes=True, seed=seed)
        entries.insert(0, E(7, 7, [], 0, lost=7))  # a gap event first
        full = PartitionMap(entries)
        for cut in (0, 1, 13, 40):
            base = PartitionMap(entries[:cut]).folded()
            again = PartitionMap(entries[cut:], base=base)
            assert translations(again, 0, 420) == translations(full, 0, 420), (seed, cut)
            assert again.runs == full.runs and again.lost == full.lost == 7 and again.entries == 41
            # folding a fold changes nothing
            assert PartitionMap((), base=again.folded()).folded() == again.folded()


def test_fold_keeps_the_earliest_copy_whatever_the_order():
    # at-least-once: a retry re-copied 100..199 later (higher target offsets), then copied on
    a = E(0, 150, [(0, 0, 150)], 150)
    b = E(100, 300, [(100, 500, 200)], 700)
    c = E(120, 140, [(120, 900, 20)], 920)
    full = PartitionMap([a, b, c])
    assert full.runs == [Run(0, 0, 150), Run(150, 550, 150)]
    for first in ([a], [b], [c], [a, c], [b, c]):
        rest = [e for e in (a, b, c) if e not in first]
        folded = PartitionMap(rest, base=PartitionMap(first).folded())
        assert folded.runs == full.runs
        assert translations(folded, 0, 320) == translations(full, 0, 320)


def test_merge_runs_is_the_per_offset_minimum():
    runs = [Run(0, 10, 5), Run(2, 3, 5), Run(4, 100, 10)]
    out = merge_runs(runs)
    best = {}
    for r in runs:
        for i in range(r.count):
            best[r.src + i] = min(best.get(r.src + i, 1 << 60), r.tgt + i)
    assert {r.src + i: r.tgt + i for r in out for i in range(r.count)} == best
    assert out == [Run(0, 10, 2), Run(2, 3, 5), Run(7, 103, 7)]


def test_pruned_is_exact_at_and_above_the_floor():
    entries = eos_history(30, holes=True, seed=3)
    full = PartitionMap(entries)
    for floor in (0, 1, 55, 100, 299, 300, 350):
        p = full.pruned(floor)
        assert p.floor == floor and all(r.src >= floor for r in p.runs)
        assert translations(p, floor, 360) == translations(full, floor, 360), floor
        # and after a round trip through a snapshot plus new entries
        more = eos_history(5, start=300, tgt=full.tgt_end + 1, seed=4)
        both = PartitionMap(more, base=p.folded())
        assert translations(both, floor, 400) == translations(PartitionMap(entries + more), floor, 400)


def test_below_the_floor_resumes_at_a_known_position_at_or_before_it():
    full = PartitionMap(eos_history(10))  # source 0..99, transactions of 10, a marker after each
    p = full.pruned(35)
    assert p.translate(35) == full.translate(35) == Translation(35, 38, "exact")
    # below the source's log start and every group: a landmark, never the floor's record (38)
    assert p.translate(20) == Translation(20, 22, "pruned")
    assert p.translate(25).target_offset <= 27 and p.translate(25).status == "pruned"
    assert p.target_of(20) is None and p.start == 0 and p.records == 65
    # a floor at or below the first covered offset prunes nothing: "before" stays "before"
    late = PartitionMap([E(50, 60, [(50, 0, 10)], 10, lost=50)]).pruned(40)
    assert late.translate(20) == Translation(20, 0, "before", 30)
    # the floor never goes down
    assert p.pruned(10).floor == 35


def test_a_floor_past_everything_copied_keeps_end_and_ahead():
    full = PartitionMap(eos_history(3))  # covers 0..29
    p = full.pruned(50)
    assert p.runs == [] and p.covered == []
    assert translations(p, 50, 60) == translations(full, 50, 60)
    assert p.translate(50) == Translation(50, full.tgt_end, "ahead", 20)


def test_max_runs_raises_the_floor():
    full = PartitionMap(eos_history(100))  # 100 runs (one per transaction)
    p = full.pruned(max_runs=10)
    assert len(p.runs) == 10 and p.floor == 900
    assert translations(p, 900, 1010) == translations(full, 900, 1010)
    assert full.pruned(max_runs=200) is full
    # below the raised floor: landmarks, exact at each of them, an earlier position between them
    assert p.translate(899) == full.translate(899) and p.translate(890) == full.translate(890)
    assert all(p.translate(g).target_offset <= full.translate(g).target_offset for g in range(900))


def test_a_newer_epoch_drops_the_folded_base():
    old = PartitionMap(eos_history(5)).folded()
    marker = MapEntry("t", 0, 0, 0, (), 0, epoch=1)
    new = MapEntry("t", 0, 0, 10, (Run(0, 0, 10),), 10, epoch=1)
    m = PartitionMap([marker, new], base=old)
    assert m.epoch == 1 and m.entries == 2 and m.runs == [Run(0, 0, 10)] and m.floor == 0
    # an entry of an older epoch after a newer base is ignored
    base = m.folded()
    late = PartitionMap([E(50, 60, [(50, 60, 10)], 70)], base=base)
    assert late.runs == [Run(0, 0, 10)] and late.entries == 2
    assert Folded().entries == 0 and PartitionMap((), base=Folded()).translate(3).status == "none"


# -- snapshot records ---------------------------------------------------------------------------
import json  # noqa: E402

import pytest  # noqa: E402

from mirrorflow.errors import StateError  # noqa: E402
from mirrorflow.state.snapshot import (  # noqa: E402
    Marker,
    Snapshot,
    SnapshotView,
    decode_runs,
    encode_runs,
    marker_key,
    parse_marker_key,
)
from mirrorflow.state.state_topics import parse_key, state_key  # noqa: E402


def test_snapshot_round_trip_and_delta_runs():
    m = PartitionMap(eos_history(50, start=100, holes=True, seed=7) + [E(600, 600, [], 0, lost=3)]).pruned(130)
    snap = Snapshot("t", 0, m.folded(), {1: 4242}, 17)
    back = Snapshot.from_json(snap.to_json())
    assert back == snap
    assert translations(PartitionMap((), base=back.folded), 100, 700) == translations(m, 100, 700)
    # exactly-once transactions after the first cost three small numbers each
    flat = encode_runs(PartitionMap(eos_history(4, start=10)).folded().runs)
    assert flat == [10, 0, 10, 0, 1, 10, 0, 1, 10, 0, 1, 10]
    assert decode_runs(flat) == (Run(10, 0, 10), Run(20, 11, 10), Run(30, 22, 10), Run(40, 33, 10))
    with pytest.raises(StateError, match="triples"):
        decode_runs([1, 2])


def test_snapshot_newer_format_is_refused_and_keys_do_not_mix():
    raw = json.loads(Snapshot("t", 0, Folded()).to_json())
    raw["v"] = 99
    with pytest.raises(StateError, match="v99 is newer"):
        Snapshot.from_json(json.dumps(raw).encode())
    assert Marker.from_json(Marker(3, 100).to_json()).folded_to == 100
    assert parse_marker_key(marker_key(3)) == 3 and parse_key(marker_key(3)) is None
    assert parse_marker_key(state_key("t", 3)) is None


def test_folded_to_is_the_later_of_the_snapshot_and_its_partition_marker():
    snap = Snapshot("t", 0, Folded(), {1: 50})
    view = SnapshotView(2, 2, {("t", 0): snap}, {1: 80})
    assert view.trusted and view.folded_to(("t", 0), 1) == 80 and view.folded_to(("t", 9), 1) == 80
    assert view.folded_to(("t", 0), 0) is None
    # different partition counts: a marker says nothing about a snapshot in another partition
    other = SnapshotView(2, 3, {("t", 0): snap}, {1: 80})
    assert not other.trusted and other.folded_to(("t", 0), 1) == 50 and other.folded_to(("t", 9), 1) is None
