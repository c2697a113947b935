"""A partition's verify verdict on holes: a mismatch while the flow runs, its failover's RPO once it failed over."""

from mirrorflow.ops.verify.verify_report import PartitionVerify


def test_a_hole_fails_a_running_flow_and_is_the_rpo_of_a_failed_over_one():
    running = PartitionVerify("t", 0, "A.t", source_start=1, source_end=30, holes=[(0, 2)], not_copied=[(0, 2)])
    assert not running.ok
    assert running.line().endswith(
        "HOLES: 2 source offsets below the copied ones are not on the target (0..2); the next replicate run "
        "copies them (those below the source's log start 1 are gone: it names them lost)"
    )
    assert "not copied yet: 0..2" in running.detail_lines()
    over = PartitionVerify(
        "t", 0, "A.t", source_start=1, source_end=30, holes=[(0, 2)], not_copied=[(0, 2)], failed_over=True
    )
    assert over.ok
    assert over.line() == (
        "t[0] -> A.t[0]: ok, 0 of 0 source records match (0 on the target) in 0 range(s); 2 source offsets below "
        "the copied ones were not copied when the flow failed over (0..2): its failover reported them not "
        "replicated; a failback keeps those the source holds apart there (those below the source's log start 1 "
        "are gone)"
    )
    assert "not copied (failed over: the flow copies nothing more): 0..2" in over.detail_lines()
    over.counts["missing"] = 1  # a failover excuses no mismatch
    assert not over.ok


def test_offsets_with_no_copy_that_the_flow_does_not_own_are_named_apart():
    """Below the flow's origin, or accounted for in its progress with no copy (what a failback kept apart on
    the source): not the flow's to copy, not 'not copied yet'."""
    from mirrorflow.ops.verify.verify import _owned
    from mirrorflow.state.records import Progress

    # a round trip's failback accounted 10..20 (kept apart) above copies 0..10 and 20..34; the flow began at 0
    prog = Progress("t", 0, 36, ((0, 36),), 27, origin=0)
    assert _owned([(10, 20), (36, 40)], prog) == ([(36, 40)], [(10, 20)])
    # a flow that started at 5 (latest): 0..5 was never its own
    late = Progress("t", 0, 8, ((5, 8),), 3, origin=5)
    assert _owned([(0, 5), (8, 9)], late) == ([(8, 9)], [(0, 5)])
    pv = PartitionVerify("t", 0, "A.t", not_copied=[(8, 9)], not_owned=[(0, 5)])
    assert pv.ok and pv.detail_lines() == [
        "not copied yet: 8..9",
        "not the flow's to copy (before its origin, or kept apart on the source by a failback): 0..5",
    ]
