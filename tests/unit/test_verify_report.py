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
