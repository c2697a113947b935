"""The next step a flow that does not copy names (skipped runs, their notes in Airflow, the status page):
resume after a person's pause or stop, the failback after a failover (never a resume), the config
for a declared state, the reverse flow's failback for a standby."""
from __future__ import annotations

from mirrorflow.state.flow_state import FlowState

AT = 1_800_000_000_000  # 2027-01-15T08:00:00Z


def test_a_running_flow_has_no_next_step_and_skips_nothing():
    assert FlowState().next_step("A->B") is None and FlowState().skip_reason("A->B", "copy") is None


def test_paused_or_stopped_by_a_person_resumes():
    resume = ("resume it when ready: `mirrorflow flow resume --flow A->B`, the DAG mirrorflow_control__A-B "
              "(action resume) or the Resume button on the status page")
    paused = FlowState("paused", "B upgrade", "ada", AT)
    assert paused.next_step("A->B") == resume
    assert paused.skip_reason("A->B", "copy") == (
        f"flow A->B is paused by ada since 2027-01-15T08:00:00+00:00 (on the target): B upgrade: no copying. "
        f"Next step: {resume}")
    assert paused.skip_reason("A->B", "checkpoint") is None  # checkpoints go on while paused
    assert FlowState("stopped", "", "ada", AT).next_step("A->B") == resume


def test_failed_over_fails_back_not_resumes():
    st = FlowState("stopped", "failed over to 'B' (unplanned), plan 0123456789ab approved by carol", "root@h", AT,
                   cause="failover")
    assert st.failed_over
    step = st.next_step("A->B")
    assert step == (
        "fail back once A is back: `mirrorflow failback --flow A->B` or the DAG mirrorflow_failback__A-B (it starts "
        "B->A, so what was written on B reaches A); not a resume. A->B itself runs again after a planned failover "
        "of B->A and its failback")
    assert st.skip_reason("A->B", "checkpoint").endswith(f"no checkpoints and group sync. Next step: {step}")
    assert "flow resume" not in step
    # a person's stop after a failover is a person's stop: that one resumes
    assert not FlowState("stopped", "", "ada", AT).failed_over


def test_declared_in_the_config_or_standby():
    assert FlowState("stopped", "declared in the config", declared_in="config").next_step("A->B") == (
        "remove the flow's `state: stopped` from the config (a resume cannot lift it)")
    assert FlowState("stopped", "standby", declared_in="standby").next_step("B->A") == (
        "none while A->B runs: this flow starts with the failback of A->B (`mirrorflow failback --flow A->B`), "
        "after A->B was failed over")


def test_a_conditional_flow_state_record_applies_only_over_the_state_it_was_decided_on():
    from mirrorflow.state.flow_state import applies, revision

    old = {"state": "running", "at": 5}  # an older release's record: no id
    failover = {"state": "stopped", "cause": "failover", "id": "f1", "at": 9}
    assert revision(None) == "" and revision(old) == "at:5" and revision(failover) == "f1"
    assert applies(old, failover)  # unconditional: a failover, a failback
    assert applies(old, {"state": "paused", "id": "p1", "after": "at:5"})
    assert not applies(failover, {"state": "paused", "id": "p1", "after": "at:5"})  # decided before it
    assert applies(None, {"state": "paused", "id": "p1", "after": ""}) and not applies(old, {"after": ""})
