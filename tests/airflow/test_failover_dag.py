"""The failover DAG: Params form, preflight, a dry run that stops after it, and a run whose approval
is answered while dag.test() waits for it (recorded in Airflow's database the way the HITL REST
endpoint records it; the real endpoint under the real scheduler is test_scheduler's
test_failover_approval_and_rejection): the commit executes exactly the approved plan and records the approver.
The DAG runs from a DR-site Airflow whose config has another deployment.id than the one that ran
the flow: without the take_over Param its preflight fails naming it; with it the approval page
says the commit takes the flow over, and it does."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import flow_state, read_control
from tests.airflow.lineage_support import lineage, record_lineage
from tests.integration.test_failover import commit, committed_offsets, first_record_after_resume
from tests.integration.test_replicate import records
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_failover.py")


def answer_when_asked(dag_id: str, option: str, user: str, seen: dict, task_id: str = "approve_failover",
                      before=None) -> threading.Thread:
    """In a thread: wait for the approval task to park in AWAITING_INPUT, keep the page's subject and
    body in `seen`, call `before()` (something that happens while the approval waits), then record
    `option` by `user` as the HITL PATCH endpoint does (response columns, then handle_event_submit,
    which resumes the task)."""
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance as TI
    from airflow.models.trigger import handle_event_submit
    from airflow.triggers.base import TriggerEvent
    from airflow.utils import timezone
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    waited = [before is None]  # before() was called (or there is none)

    def run() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                if answered():
                    return
            except Exception as exc:  # noqa: BLE001 - e.g. SQLite's "database is locked" beside dag.test(): ask again
                sys.stderr.write(f"answer_when_asked: {exc!r}; asking again\n")
            time.sleep(0.5)
        sys.stderr.write(f"answer_when_asked: {task_id} of {dag_id} was not asked for within 600 s\n")

    def answered() -> bool:
        with create_session() as session:
            ti = session.scalar(select(TI).where(
                TI.dag_id == dag_id, TI.task_id == task_id,
                TI.state == TaskInstanceState.AWAITING_INPUT))
            detail = None if ti is None else session.scalar(select(HITLDetail).where(HITLDetail.ti_id == ti.id))
            if detail is not None and not waited[0]:
                seen.update(subject=detail.subject, body=detail.body)
            elif detail is not None:
                seen.update(subject=detail.subject, body=detail.body, timeout=ti.trigger_timeout,
                            asked=timezone.utcnow())
                detail.responded_by = {"id": user, "name": user}
                detail.responded_at = timezone.utcnow()
                detail.chosen_options = [option]
                detail.params_input = {}
                handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti,
                                    session=session)
                return True
        if detail is not None and not waited[0]:  # outside the session: it may take a while
            waited[0] = True  # once, even if it fails
            before()
        return False

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_failover_dag_dry_run_then_approved_commit(tmp_path, source, target, airflow_db, unique, monkeypatch,
                                                   capfd):
    pfx = unique("fodag")
    topic, group, busy = f"{pfx}.orders", f"{pfx}-app", f"{pfx}-busy"
    # source alias F: a flow of its own (F->B), so its stopped state touches no other test's flow;
    # its state namespace is this test's, so the DR site's deployment.id is the only difference
    flows = {"F->B": {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
                      "heartbeats.replication.enabled": False}}
    main = write_config(tmp_path / "main.yaml", {"F": source, "B": target}, flows,
                        defaults={"state.namespace": pfx, "deployment.id": "main-site"})
    cfg = write_config(tmp_path / "mf.yaml", {"F": source, "B": target}, flows,
                       defaults={"state.namespace": pfx, "deployment.id": "dr-site"})
    flow = cfg.flow("F->B")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(40, 1))
    assert run_once(main, main.flow("F->B"), mode="direct").records == 40  # the main site ran the flow
    commit(source, group, topic, {0: 17})
    commit(source, busy, topic, {0: 9})
    assert {group, busy} <= set(emit_checkpoints(cfg, flow).groups)

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_failover__F-B")
    assert type(dag.timetable).__name__ == "NullTimetable"
    assert set(dag.params.keys()) == {"mode", "groups", "max_lag", "take_over", "dry_run", "approval_timeout_minutes",
                                      "approvers"}
    assert dag.params["approval_timeout_minutes"] == 60 and dag.params["take_over"] is False
    assert dag.get_task("approve_failover").task_type == "FailoverApproval"

    # another deployment owns the flow: without take_over the preflight fails and names the Param
    capfd.readouterr()
    run = dag.test(run_conf={"dry_run": False})
    assert {ti.task_id: ti.state for ti in run.get_task_instances()}["preflight"] == "failed"
    out = "".join(capfd.readouterr())  # the task's log (dag.test() logs to the console)
    assert "its state on cluster 'B' belongs to deployment 'main-site'; this config is deployment 'dr-site'" in \
        out and "(in Airflow: the failover DAG's Param take_over)" in out, out[-3000:]

    run = dag.test(run_conf={"dry_run": True, "take_over": True})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"preflight": "success", "go_on": "success", "approve_failover": "skipped", "commit": "skipped"}
    pre = [ti for ti in run.get_task_instances() if ti.task_id == "preflight"][0].xcom_pull(task_ids="preflight")
    assert pre["not_replicated"] == 0 and f"{group} resumes F.{topic}[0] at" in pre["text"], pre["text"]
    assert "(unplanned, dry run): dry run: nothing changed" in pre["text"]
    assert "take-over: takes flow F->B over from deployment 'main-site', which owns its state on 'B'" in pre["text"]
    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "running"

    # every Param given: dag.test() keeps the previous run_conf in the DAG object's params
    seen: dict = {}
    member = Consumer({**target.client_config(), "group.id": busy, "enable.auto.commit": False,
                       "session.timeout.ms": 10000})  # `busy` has an active member on B: left alone
    member.subscribe([f"F.{topic}"])
    for _ in range(150):
        if member.assignment():
            break
        member.poll(0.2)
    answer = answer_when_asked(dag.dag_id, "Approve", "carol", seen)
    record_lineage(dag)
    run = dag.test(run_conf={"mode": "unplanned", "groups": None, "max_lag": None, "take_over": True,
                             "dry_run": False, "approval_timeout_minutes": 7, "approvers": None})
    answer.join(5)
    member.close()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert states == {"preflight": "success", "go_on": "success", "approve_failover": "success",
                      "commit": "success"}, states
    pre = tis["preflight"].xcom_pull(task_ids="preflight")
    plan_id = pre["plan_id"]
    # the approval page: the report as printed, in a code block, named by its plan, never a "dry run"
    assert seen["subject"] == f"Fail over F->B to B: plan {plan_id}"
    assert seen["body"].startswith(f"**Failover plan `{plan_id}`** of flow `F->B`")
    assert f"```text\n{pre['text']}\n```" in seen["body"] and "dry run" not in seen["body"]
    assert "**It first takes the flow over** (confirmed with `take_over`)" in seen["body"], seen["body"]
    assert f"plan {plan_id}, nothing committed yet" in pre["text"]
    # the run's approval_timeout_minutes is the response timeout Airflow enforces
    from datetime import timedelta

    assert timedelta(minutes=6) < seen["timeout"] - seen["asked"] <= timedelta(minutes=7), seen
    done = tis["commit"].xcom_pull(task_ids="commit")
    assert done["plan_id"] == plan_id and done["approved_by"] == "carol"
    # OpenLineage: the commit moved the groups of the source topic onto its remote topic
    assert lineage("mirrorflow_failover__F-B.commit", run.run_id)[-1] == (
        "COMPLETE", [(f"kafka://{source.bootstrap_servers}", topic)],
        [(f"kafka://{target.bootstrap_servers}", f"F.{topic}")])
    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "stopped"
        record = read_control(clients, "failover")
    # exactly the approved plan's offsets, and who approved it
    want = {g[0]: {f"{x[0]}:{x[1]}": x[2] for x in g[5] if x[4] == "write"} for g in pre["plan"]["groups"]
            if g[3] != "left-alone"}
    assert record["groups"] == want and record["approved_by"] == "carol" and record["plan"] == plan_id
    assert record["take_over"].startswith(f"took flow F->B over for the failover of plan {plan_id}: its lease was "
                                          "free; its state belonged to deployment 'main-site', now to deployment "
                                          "'dr-site'; fenced the copy transactions of 1 partition(s)"), record
    from mirrorflow.errors import DeploymentConflictError
    from mirrorflow.state.lease import FlowLease

    with FlowClients(main, main.flow("F->B")) as clients, pytest.raises(DeploymentConflictError,
                                                                         match="belongs to deployment 'dr-site'"):
        FlowLease(clients, "main-run", "a run of the main site").acquire()  # the flow is the DR site's now
    assert committed_offsets(target, group, f"F.{topic}", 1) == {0: want[group][f"F.{topic}:0"]}
    wanted = consume_all(source, topic)[17]
    _, msg = first_record_after_resume(target, group, f"F.{topic}", 0)
    assert (msg.key(), msg.value()) == (wanted.key, wanted.value)

    # once more: nothing to do, said by the preflight; nothing to approve
    run = dag.test(run_conf={"mode": "unplanned", "groups": None, "max_lag": None, "take_over": False,
                             "dry_run": False, "approval_timeout_minutes": 7, "approvers": None})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"preflight": "success", "go_on": "success", "approve_failover": "skipped", "commit": "skipped"}
    pre = [ti for ti in run.get_task_instances() if ti.task_id == "preflight"][0].xcom_pull(task_ids="preflight")
    assert pre["plan_id"] is None and f"plan {plan_id} approved by carol and is stopped" in pre["text"], pre["text"]
    assert f"groups still to move: {busy}" in pre["text"], pre["text"]

    # groups left alone at the failover: the groups Param moves the group left alone, approved and committed as a failover
    answer = answer_when_asked(dag.dag_id, "Approve", "dave", seen)
    run = dag.test(run_conf={"mode": "unplanned", "groups": busy, "max_lag": None, "take_over": False,
                             "dry_run": False, "approval_timeout_minutes": 7, "approvers": None})
    answer.join(5)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert set(states.values()) == {"success"}, states
    pre = [ti for ti in run.get_task_instances() if ti.task_id == "preflight"][0].xcom_pull(task_ids="preflight")
    assert pre["plan"]["moves_after"] == plan_id and "groups left alone at the failover" in seen["body"]
    wanted = consume_all(source, topic)[9]
    _, msg = first_record_after_resume(target, busy, f"F.{topic}", 0)
    assert (msg.key(), msg.value()) == (wanted.key, wanted.value)
    with FlowClients(cfg, flow) as clients:
        assert read_control(clients, "failover") == record and flow_state(clients).state == "stopped"
