"""The failover plan: serialisable, its id derived from its content, and what counts as
'moved' between the preflight and the commit (pure logic; the real brokers are in
tests/integration/test_failover.py)."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from mirrorflow.errors import StateError
from mirrorflow.groups.offset_sync import GroupSyncPlan, PartitionSync
from mirrorflow.ops.dr.failover_drain import drain_refusal
from mirrorflow.ops.dr.failover_plan import FailoverPlan, PartitionRPO, plan_moves


def plan(**changes) -> FailoverPlan:
    base = FailoverPlan(
        "A->B", "B", "unplanned", None,
        (PartitionRPO("orders", 0, "A.orders", 40, 42, None, 1_000), PartitionRPO("heartbeats", 0, "A.heartbeats", 9, 9)),
        (
            GroupSyncPlan("app", "missing", 0, "sync", (PartitionSync("A.orders", 0, 17, None, "write"),)),
            GroupSyncPlan("busy", "active", 2, "left-alone", (PartitionSync("A.orders", 0, 5, 3, "skip-active"),),
                          "2 active member(s) on the target"),
        ),
        at_ms=123,
    )
    return replace(base, **changes)


def test_round_trip_and_id_from_content_only():
    p = plan()
    again = FailoverPlan.from_dict(p.to_dict())
    assert again == p and again.id == p.id and len(p.id) == 12
    assert plan(at_ms=999).id == p.id  # when it was made is not its content
    assert plan(mode="planned").id != p.id
    assert p.commits() == {"app": {"A.orders:0": 17}}
    tampered = p.to_dict()
    tampered["groups"][0][5][0][2] = 18
    with pytest.raises(StateError, match=f"failover plan {p.id}: its content does not match its id"):
        FailoverPlan.from_dict(tampered)
    with pytest.raises(StateError, match="not a failover plan"):
        FailoverPlan.from_dict({"flow": "A->B"})


def test_what_moved():
    p = plan()
    assert plan_moves(p, plan(at_ms=5)) == []
    # heartbeats move while the flow runs: not a dependency; the group sync putting `app` where the plan would is fine
    synced = (replace(p.groups[0], action="up-to-date",
                      partitions=(PartitionSync("A.orders", 0, 17, 17, "skip-equal"),)), p.groups[1])
    assert plan_moves(p, plan(partitions=(p.partitions[0], replace(p.partitions[1], replicated_to=12)),
                              groups=synced)) == []
    # a left-alone group's own commits on the target do not matter either
    busy = replace(p.groups[1], partitions=(PartitionSync("A.orders", 0, 5, 4, "skip-active"),))
    assert plan_moves(p, plan(groups=(p.groups[0], busy))) == []
    assert plan_moves(p, plan(partitions=(replace(p.partitions[0], replicated_to=41), p.partitions[1]))) == [
        "orders[0] replicated up to 40 in the plan, now 41"]
    moved = (GroupSyncPlan("app", "empty", 0, "sync", (PartitionSync("A.orders", 0, 20, 2, "write"),)), p.groups[1])
    assert plan_moves(p, plan(groups=moved)) == ["group app A.orders[0]: checkpoint moved from 17 to 20"]
    moved = (GroupSyncPlan("app", "empty", 0, "sync", (PartitionSync("A.orders", 0, 17, 2, "write"),)), p.groups[1])
    assert plan_moves(p, plan(groups=moved)) == [
        "group app A.orders[0]: committed offset on the target moved from none to 2"]
    joined = (GroupSyncPlan("app", "active", 1, "left-alone", p.groups[0].partitions, "1 active member(s)"),
              p.groups[1])
    assert plan_moves(p, plan(groups=joined)) == ["group app: now has 1 active member(s) on the target"]
    new = (*p.groups, GroupSyncPlan("late", "missing", 0, "sync", ()))
    assert plan_moves(p, plan(groups=new)) == ["group late: has checkpoints now, not in the plan"]


def test_a_planned_plan_whose_verify_failed_cannot_be_committed():
    assert plan(mode="planned", verify_ok=True).blocked is None
    assert "verify found partitions" in plan(mode="planned", verify_ok=False).blocked
    assert "describe failed" in plan(errors={"g": "describe failed: x"}).blocked


def test_a_plan_moving_groups_after_the_failover_is_bound_to_it():
    """The plan that moves groups left alone names the failover it follows; that is part of its id."""
    p = plan(moves_after="abc123def456")
    assert p.id != plan().id and FailoverPlan.from_dict(p.to_dict()) == p
    assert plan(moves_after="000000000000").id != p.id
    assert FailoverPlan.from_dict({**plan().to_dict(), "moves_after": None}).id == plan().id


def test_a_drain_left_with_lag_stops_unless_that_lag_is_accepted():
    """After its runs the drain goes on only with lag 0, or at most the stated max lag."""
    lags = {("orders", 0): 0, ("orders", 1): 7, ("pay", 3): 12}
    msg = drain_refusal("A->B", 5, lags, None)
    assert msg == (
        "planned failover of A->B: the drain did not reach lag 0 in 5 replicate run(s): lag 19 on pay[3] 12, "
        "orders[1] 7. Nothing changed. Stop the source's producers and run the failover again, or accept the lag "
        "(--max-lag 19 / Param max_lag): those offsets are not on the target after the failover."
    )
    assert "lag 19 (more than the accepted 18) on pay[3] 12, orders[1] 7." in drain_refusal("A->B", 5, lags, 18)
    assert drain_refusal("A->B", 5, lags, 19) is None
    assert drain_refusal("A->B", 1, {("orders", 0): 0}, None) is None
    assert drain_refusal("A->B", 2, {}, 0) is None


def test_a_failover_plan_keeps_what_each_partition_reads_again_through_its_record():
    from mirrorflow.groups.render import resume_note

    parts = (PartitionSync("A.t", 0, 80, None, "write", "", 12), PartitionSync("A.t", 1, 5, None, "write", "", 0),
             PartitionSync("A.t", 2, 9, None, "write", "", None), PartitionSync("A.t", 3, 9, 20, "skip-ahead", "", 4))
    plan = FailoverPlan("A->B", "B", "unplanned", None, (PartitionRPO("t", 0, "A.t", 100, 100),),
                        (GroupSyncPlan("g", "missing", 0, "sync", parts),), 1)
    back = FailoverPlan.from_dict(json.loads(json.dumps(plan.to_dict())))  # through XCom, as the DAG's approval
    assert back == plan and [x.reread for x in back.groups[0].partitions] == [12, 0, None, 4]
    assert [resume_note(x) for x in back.groups[0].partitions] == [
        " (earlier: re-reads at most 12 record(s) it had read, skips none)",
        "",
        " (unchecked: the offset map does not place this checkpoint (MirrorMaker 2 wrote it, or an older "
        "mirrorflow pruned the map there))",
        "",  # kept at its offset on the target, which is ahead
    ]
    # what Required Actions shows for the approval: the plan's report, with the same notes
    from mirrorflow.ops.dr.failover_report import FailoverReport

    shown = FailoverReport("A->B", "B", "unplanned", False, plan=back).markdown()
    assert "g resumes A.t[0] at 80 (earlier: re-reads at most 12 record(s) it had read, skips none)" in shown
    assert "g resumes A.t[1] at 5\n" in shown
    # a plan recorded before the field existed reads as exact (0)
    old = plan.to_dict()
    old["groups"][0][5] = [row[:6] for row in old["groups"][0][5]]
    old.pop("id")
    assert [x.reread for x in FailoverPlan.from_dict(old).groups[0].partitions] == [0, 0, 0, 0]


def test_the_failover_plan_and_report_tell_the_applications_to_read_committed():
    """Application owners learn from the plan (the CLI's report, the approval page) and from the
    report of the commit that their consumers must read read_committed: the log holds aborted copies."""
    from mirrorflow.ops.dr.failover_report import FailoverReport

    for done in (False, True):  # the preflight's plan, then the commit's report
        rep = FailoverReport("A->B", "B", "unplanned", False, plan=plan(), done=done)
        [line] = [x for x in rep.lines() if x.startswith("  applications: ")]
        assert "consumers of the replicated topics on 'B' must read with isolation.level=read_committed" in line
        assert "aborted copies" in line and "read_uncommitted" in line
        assert rep.to_dict()["applications"] == line.removeprefix("  applications: ")
    head = FailoverReport("A->B", "B", "planned", False, plan=plan()).markdown().split("\n\n", 1)[0]
    assert "**Application owners**" in head and "`isolation.level=read_committed`" in head
    # no plan (a preflight that failed before it): nothing to approve, no line
    assert not [x for x in FailoverReport("A->B", "B", "unplanned", False).lines() if "applications" in x]


def test_a_flow_is_failed_over_only_when_its_failover_stopped_it():
    """The failover record outlives the failover (a round trip runs the flow again with it): a person's
    stop then, or a state the config declares, is no failover. A release before `cause` named the plan."""
    from mirrorflow.state.flow_state import FlowState

    done = {"plan": "3f9c0a1b2c4d", "at": 1}
    why = "failed over to 'B' (unplanned), plan 3f9c0a1b2c4d approved by admin"
    assert FlowState("stopped", why, cause="failover").left_by(done)
    assert FlowState("stopped", why).left_by(done)  # an earlier release: no cause
    assert not FlowState("stopped", "maintenance", "alice").left_by(done)
    assert not FlowState("stopped", why.replace("3f9c0a1b2c4d", "0123456789ab")).left_by(done)  # another failover's
    assert not FlowState("stopped", "declared in the config", declared_in="config").left_by(done)
    assert not FlowState("running").left_by(done)
    assert not FlowState("stopped", why).left_by({"at": 1})  # a record without a plan id: only the cause says
