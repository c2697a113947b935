"""Pure tests of the 'verified up to' marks a verify records and trusts (mirrorflow.ops.verify.verified_marks:
next_mark, mark_problem; the walk's target_from) and their codec."""
from __future__ import annotations

from mirrorflow.ops.verify.verified_marks import mark_problem, next_mark
from mirrorflow.ops.verify.verify_walk import Rec, Sides, walk_partition
from mirrorflow.state.offset_map import Run
from mirrorflow.state.records import Progress, VerifiedMark

MARK = VerifiedMark("orders", 0, 0, 100, 104, "SRC", "A.orders", "TGT", 0, 1, "ada", 100)
PROG = Progress("orders", 0, 150, ((0, 150),), 160, topic_id="SRC", target_topic="A.orders", target_topic_id="TGT")


def test_the_codec_round_trips():
    assert VerifiedMark.from_json(MARK.to_json()) == MARK


def test_the_mark_grows_only_contiguously_from_the_first_copied_offset():
    assert next_mark([(0, 150)], 0, 1 << 62, None) == (0, 150)
    assert next_mark([(10, 50), (60, 150)], 0, 1 << 62, None) == (10, 50)  # a hole: never past it
    assert next_mark([(0, 150)], 20, 1 << 62, None) is None  # a window above the start proves nothing
    assert next_mark([(0, 150)], 100, 120, MARK) == (0, 120)
    assert next_mark([(0, 150)], 100, 1 << 62, MARK) == (0, 150)
    assert next_mark([(0, 100)], 100, 1 << 62, MARK) is None  # nothing new
    assert next_mark([(0, 150)], 101, 1 << 62, MARK) is None


def test_a_mark_is_trusted_only_while_it_describes_the_partition():
    assert mark_problem(MARK, PROG, "SRC", "A.orders", "TGT", 160) is None
    cases = {
        "re-seeded since (map epoch 0 -> 1)": (PROG.__class__(**{**PROG.__dict__, "epoch": 1}), "SRC", "TGT", 160),
        "source topic was recreated since (topic ID SRC -> NEW)": (PROG, "NEW", "TGT", 160),
        "target topic was recreated since (topic ID TGT -> NEW)": (PROG, "SRC", "NEW", 160),
        "ahead of what is copied (the flow's progress is at 90)": (
            PROG.__class__(**{**PROG.__dict__, "next": 90, "covered": ((0, 90),)}), "SRC", "TGT", 160),
        "copied below it changed since (copied: 0..100; verified: 10..100; a backfill?)": (PROG, "SRC", "TGT", 160),
        "target partition ends at 50, below the verified copies' end 104": (PROG, "SRC", "TGT", 50),
    }
    for why, (prog, src, tgt, end) in cases.items():
        mark = VerifiedMark(**{**MARK.__dict__, "src_from": 10}) if "backfill" in why else MARK
        problem = mark_problem(mark, prog, src, "A.orders", tgt, end)
        assert problem is not None and why in problem, (why, problem)
    assert "remote topic is 'B.orders' now" in mark_problem(MARK, PROG, "SRC", "B.orders", "TGT", 160)


def test_a_record_between_the_verified_copies_and_the_next_copy_is_extra_from_target_from():
    src = [Rec(o, b"k", b"v%d" % o, (), 1000 + o) for o in range(10, 20)]
    runs = [Run(10, 12, 10)]  # source 10..19 at target 12..21; a rogue record at target 11
    tgt = [Rec(11, b"x", b"rogue", (), 5), *(Rec(12 + i, r.key, r.value, (), r.timestamp) for i, r in enumerate(src))]

    def reader(recs):
        return lambda a, b: iter([r for r in recs if a <= r.offset < b])

    missed = walk_partition([(10, 20)], runs, runs, reader(src), reader(tgt), Sides())
    assert missed.counts == {}  # the span starts at the first run: the rogue is not read
    found = walk_partition([(10, 20)], runs, runs, reader(src), reader(tgt), Sides(), target_from=11)
    assert found.counts == {"extra": 1} and found.first.target_offset == 11
