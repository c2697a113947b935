"""Pure tests of the verify comparison (mirrorflow.ops.verify.verify_walk) and its window parsing."""
from __future__ import annotations

import pytest

from mirrorflow.errors import ConfigError
from mirrorflow.ops.verify.verify import When
from mirrorflow.ops.verify.verify_walk import Rec, Sides, deleted_on_target, encode, group_runs, walk_partition
from mirrorflow.state.offset_map import Run


def rec(offset: int, n: int | None = None, ts: int = 1000, **kw) -> Rec:
    n = offset if n is None else n
    fields = {"key": f"k{n}".encode(), "value": f"v{n}".encode(), "headers": (("h", b"1"),), "timestamp": ts + n}
    fields.update(kw)
    return Rec(offset, **fields)


def reader(records: list[Rec]):
    """A Reader over in-memory records; it remembers what was asked."""
    asked = []

    def read(a: int, b: int):
        asked.append((a, b))
        return iter([r for r in records if a <= r.offset < b])

    read.asked = asked
    return read


def copy(src: list[Rec], runs: list[Run]) -> list[Rec]:
    """The target records a faithful copy writes for `runs`."""
    by_src = {r.offset: r for r in src}
    return [Rec(r.tgt + i, by_src[r.src + i].key, by_src[r.src + i].value, by_src[r.src + i].headers,
                by_src[r.src + i].timestamp) for r in runs for i in range(r.count)]


def walk(ranges, runs, src, tgt, sides=Sides(), all_runs=None):
    return walk_partition(ranges, runs, all_runs or runs, reader(src), reader(tgt), sides)


# source 0..19: a compaction hole at 5..7, one transaction's marker at target 6 (runs 0..4 -> 0..4, 8..19 -> 7..18)
SRC = [rec(o) for o in range(20) if not 5 <= o < 8]
RUNS = [Run(0, 0, 5), Run(8, 7, 12)]


def test_a_faithful_copy_matches_with_equal_checksums():
    tally = walk([(0, 20)], RUNS, SRC, copy(SRC, RUNS))
    r = tally.ranges[0]
    assert (r.source_records, r.target_records, r.matched, r.mismatches) == (17, 17, 17, 0)
    assert (r.tgt_from, r.tgt_to) == (0, 19)
    assert r.source_checksum == r.target_checksum and len(r.source_checksum) == 32
    assert tally.counts == {} and tally.first is None


@pytest.mark.parametrize("field, value, kind", [("key", b"other", "key"), ("value", None, "value"),
                                                 ("headers", (("h", b"2"),), "headers"),
                                                 ("timestamp", 5, "timestamp")])
def test_each_field_that_differs_is_named(field, value, kind):
    tgt = copy(SRC, RUNS)
    tgt[9] = tgt[9]._replace(**{field: value})
    tally = walk([(0, 20)], RUNS, SRC, tgt)
    assert tally.counts == {kind: 1}
    assert (tally.first.kind, tally.first.source_offset, tally.first.target_offset) == (kind, 12, 11)
    assert tally.ranges[0].matched == 16 and tally.ranges[0].source_checksum != tally.ranges[0].target_checksum


def test_timestamps_are_not_compared_where_the_copy_could_not_keep_them():
    src = [rec(o, ts=-1 - o) for o in range(3)]  # no CreateTime: the producer's clock stood in
    tgt = [Rec(o, r.key, r.value, r.headers, 99999) for o, r in enumerate(src)]
    runs = [Run(0, 0, 3)]
    tally = walk([(0, 3)], runs, src, tgt)
    assert tally.counts == {} and tally.ranges[0].source_checksum == tally.ranges[0].target_checksum
    appended = [Rec(o, r.key, r.value, r.headers, 5, log_append=True) for o, r in enumerate(SRC[:3])]
    assert walk([(0, 3)], runs, SRC[:3], appended).counts == {}
    assert encode(src[0], True) != encode(src[0], False)


def test_a_record_between_two_runs_is_extra_and_a_marker_gap_is_not():
    tgt = copy(SRC, RUNS) + [rec(5, n=99)]  # target offset 5: between the runs (6 would be the marker)
    tally = walk([(0, 20)], RUNS, SRC, sorted(tgt, key=lambda r: r.offset))
    assert tally.counts == {"extra": 1}
    assert (tally.first.kind, tally.first.source_offset, tally.first.target_offset) == ("extra", None, 5)
    assert tally.ranges[0].target_records == 18 and tally.ranges[0].matched == 17


def test_a_record_a_failback_kept_on_the_target_is_counted_apart_not_extra():
    """After a failback, the reverse flow's target (the old source) keeps its divergence and split
    brain between the runs: verify names them, a planned failover back is not blocked by them."""
    tgt = sorted(copy(SRC, RUNS) + [rec(5, n=99)], key=lambda r: r.offset)
    tally = walk([(0, 20)], RUNS, SRC, tgt, Sides(kept=((5, 6),)))
    assert tally.counts == {} and tally.kept == 1 and tally.first is None
    assert tally.ranges[0].target_records == 17 and tally.ranges[0].matched == 17 and tally.ranges[0].ok
    # a record outside the kept ranges is still extra
    assert walk([(0, 20)], RUNS, SRC, tgt, Sides(kept=((4, 5),))).counts == {"extra": 1}


def test_target_records_gone_are_missing_unless_the_target_is_compacted():
    tgt = [r for r in copy(SRC, RUNS) if r.offset >= 3]
    tally = walk([(0, 20)], RUNS, SRC, tgt, Sides(target_log_start=3))
    assert tally.counts == {"missing": 3}
    assert (tally.first.source_offset, tally.first.target_offset) == (0, 0)
    assert "below the target's log start 3" in tally.first.detail
    holey = [r for r in copy(SRC, RUNS) if r.offset != 10]
    assert walk([(0, 20)], RUNS, SRC, holey).counts == {"missing": 1}
    compacted = walk([(0, 20)], RUNS, SRC, holey, Sides(target_compacted=True))
    assert compacted.counts == {} and compacted.ranges[0].compacted == 1
    assert compacted.ranges[0].source_checksum == compacted.ranges[0].target_checksum


def test_source_records_gone_are_source_missing_unless_the_source_is_compacted():
    tgt = copy(SRC, RUNS)
    src = [r for r in SRC if r.offset != 12]
    assert walk([(0, 20)], RUNS, src, tgt).counts == {"source-missing": 1}
    ok = walk([(0, 20)], RUNS, src, tgt, Sides(source_compacted=True))
    assert ok.counts == {} and ok.ranges[0].compacted == 1 and ok.ranges[0].matched == 16


def test_a_committed_source_record_no_run_places_is_missing():
    src = [*SRC, rec(6)]
    tally = walk([(0, 20)], RUNS, sorted(src, key=lambda r: r.offset), copy(SRC, RUNS))
    assert tally.counts == {"missing": 1}
    assert (tally.first.source_offset, tally.first.target_offset) == (6, None)


def test_an_out_of_order_copy_is_walked_per_group_and_each_extra_counted_once():
    # latest first: source 100..199 -> target 0..99, then a backfill of 0..99 -> target 101..200
    src = [rec(o) for o in range(200)]
    runs = [Run(0, 101, 100), Run(100, 0, 100)]
    assert group_runs(runs) == [[runs[0]], [runs[1]]]
    tgt = sorted(copy(src, runs) + [rec(100, n=7777)], key=lambda r: r.offset)  # extra at target 100 (the marker)
    src_read, tgt_read = reader(src), reader(tgt)
    tally = walk_partition([(0, 200)], runs, runs, src_read, tgt_read, Sides())
    assert tally.counts == {"extra": 1} and tally.ranges[0].matched == 200
    assert src_read.asked == [(0, 100), (100, 200)] and tgt_read.asked == [(101, 201), (0, 101)]


def test_only_the_covered_ranges_are_read():
    src = [rec(o) for o in range(30)]
    runs = [Run(0, 0, 10), Run(20, 11, 10)]  # 10..19 not copied (a hole in the ledger)
    src_read = reader(src)
    tally = walk_partition([(0, 10), (20, 30)], runs, runs, src_read, reader(copy(src, runs)), Sides())
    assert [r.matched for r in tally.ranges] == [10, 10] and tally.counts == {}
    assert src_read.asked == [(0, 10), (20, 30)]


@pytest.mark.parametrize("text, option, expected", [
    ("earliest", "--from", When("earliest")), ("latest", "--to", When("latest")), ("start", "--from", When("start")),
    ("offset:42", "--from", When("offset", 42)),
    ("2026-01-01T00:00:00.123Z", "--to", When("time", 1767225600123)),
    ("2026-01-01T01:00:00+01:00", "--to", When("time", 1767225600000)),
])
def test_when_parses_every_form(text, option, expected):
    """verify's window bounds are backfill's WHEN (one parser); empty means earliest/latest in verify_flow."""
    assert When.parse(text, option) == expected


@pytest.mark.parametrize("text, message", [("yesterday", "expected earliest"),
                                           ("offset:x", "offset:N needs a non-negative integer"),
                                           ("2026-01-01T00:00:00", "needs a time zone")])
def test_when_refuses_what_it_cannot_place(text, message):
    with pytest.raises(ConfigError, match=message) as err:
        When.parse(text, "--from")
    assert str(err.value).startswith("--from: ")


def test_copies_below_the_targets_log_start_are_one_stretch_per_run_of_deleted_copies():
    """verify leaves these source ranges out (not checkable, said in the report): the target's retention or
    delete-records took their copies. A stretch spans the gaps between deleted runs (no split per marker)."""
    assert deleted_on_target(RUNS, 0) == []
    assert deleted_on_target(RUNS, 3) == [(0, 3)]
    assert deleted_on_target(RUNS, 5) == [(0, 5)]
    assert deleted_on_target(RUNS, 9) == [(0, 10)]  # over the gap 5..8, into the second run (tgt 7, 8)
    assert deleted_on_target(RUNS, 99) == [(0, 20)]
    # a backfill copied older records after newer ones: only the runs below the log start, each its own stretch
    reordered = [Run(0, 10, 5), Run(5, 0, 5), Run(10, 15, 5)]
    assert deleted_on_target(reordered, 5) == [(5, 10)]
    assert deleted_on_target(reordered, 12) == [(0, 2), (5, 10)]
    assert deleted_on_target(reordered, 17) == [(0, 12)]
