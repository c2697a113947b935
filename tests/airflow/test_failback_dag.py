"""The failback DAG, bound like the failover DAG: Params, the preflight's plan (with its id), a dry
run that stops after it, a Reject that fails the run naming who rejected and starts nothing, a plan
whose state moved while the approval waited (the start refuses it, naming what moved), and an
approved run (answered while dag.test() waits, as the HITL endpoint records it) that starts exactly
the approved plan and records the approver in the failback record and the status."""

from __future__ import annotations

import json
import os

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.ops.dr.failover import failover
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import flow_state, read_control
from tests.airflow.lineage_support import lineage, record_lineage
from tests.airflow.test_failover_dag import answer_when_asked
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_failback.py")


def test_failback_dag_dry_run_then_approved_start(tmp_path, source, target, airflow_db, unique, monkeypatch,
                                                  capfd):
    pfx = unique("fbdag")
    topic = f"{pfx}.orders"
    common = {"topics": f"{pfx}\\..*", "replication.policy.class": "IdentityReplicationPolicy",
              "state.topic.partitions": 2, "heartbeats.replication.enabled": False}
    # aliases KA/KB: flows of their own, so their states touch no other test's flow
    cfg = write_config(tmp_path / "mf.yaml", {"KA": source, "KB": target},
                       {"KA->KB": common, "KB->KA": {**common, "standby": True}})
    fwd, rev = cfg.flow("KA->KB"), cfg.flow("KB->KA")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, fwd, ["topics"]).ok
    produce(source, topic, records(30, 1))
    assert run_once(cfg, fwd, mode="direct").records == 30
    produce(source, topic, records(4, 1, seed="late"))  # never replicated
    assert failover(cfg, fwd).done
    produce(target, topic, records(3, 1, seed="wait"))  # written on B before the failback

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_failback__KA-KB")
    assert type(dag.timetable).__name__ == "NullTimetable"
    assert set(dag.params.keys()) == {"dry_run", "reseed", "accept_loss", "approval_timeout_minutes", "approvers"}
    assert dag.get_task("approve_failback").task_type == "FailbackApproval"

    conf = {"dry_run": True, "reseed": False, "accept_loss": False, "approval_timeout_minutes": 60,
            "approvers": None}
    run = dag.test(run_conf=conf)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"preflight": "success", "go_on": "success", "approve_failback": "skipped", "start": "skipped"}
    pre = [ti for ti in run.get_task_instances() if ti.task_id == "preflight"][0].xcom_pull(task_ids="preflight")
    assert pre["diverged"] == 4 and f"{topic}[0]: 4 records at offsets 30..34" in pre["text"], pre["text"]
    assert pre["to_copy"] == 3 and pre["split"] == 0 and "written on KB outside KA->KB: 3 records" in pre["text"]
    with FlowClients(cfg, rev) as clients:
        assert flow_state(clients).state == "stopped"

    def tasks(run) -> tuple[dict, dict]:
        tis = {ti.task_id: ti for ti in run.get_task_instances()}
        return {t: ti.state for t, ti in tis.items()}, tis["preflight"].xcom_pull(task_ids="preflight")

    # rejected: the run fails naming who rejected it; nothing starts
    seen: dict = {}
    capfd.readouterr()
    answer = answer_when_asked(dag.dag_id, "Reject", "mallory", seen, task_id="approve_failback")
    run = dag.test(run_conf={**conf, "dry_run": False})
    answer.join(5)
    states, pre = tasks(run)
    assert run.state == "failed" and states["approve_failback"] == "failed", states
    assert states["start"] in ("upstream_failed", "skipped"), states
    plan_id = pre["plan_id"]
    out = "".join(capfd.readouterr())
    assert f"failback plan {plan_id} rejected by mallory: nothing started, KB->KA is unchanged" in out, out[-3000:]
    # the approval page: the report as printed, headed by its plan
    assert seen["subject"] == f"Start KB->KA (failback of KA->KB): plan {plan_id}"
    assert seen["body"].startswith(f"**Failback plan `{plan_id}`** of flow `KA->KB`: starts `KB->KA`")
    assert f"```text\n{pre['text']}\n```" in seen["body"] and "dry run" not in seen["body"]
    with FlowClients(cfg, rev) as clients:
        assert flow_state(clients).state == "stopped" and read_control(clients, "failback") is None

    # the state moves while the approval waits (a topic the reverse flow now copies appears on B):
    # the start executes nothing but the approved plan, so it refuses and names what moved
    new_topic = f"{pfx}.refunds"
    answer = answer_when_asked(dag.dag_id, "Approve", "erin", seen, task_id="approve_failback",
                               before=lambda: create_topic(target, new_topic, 1))
    capfd.readouterr()
    run = dag.test(run_conf={**conf, "dry_run": False})
    answer.join(5)
    states, pre = tasks(run)
    assert states["approve_failback"] == "success" and states["start"] == "failed", states
    out = "".join(capfd.readouterr())
    assert f"failback of KA->KB: nothing started: the state moved since plan {pre['plan_id']} was made" in out, (
        out[-3000:])
    assert f"{new_topic}[0]: a new partition on 'KB'" in out and "Run the preflight again and approve the new " \
        "plan." in out, out[-3000:]
    with FlowClients(cfg, rev) as clients:
        assert flow_state(clients).state == "stopped" and read_control(clients, "failback") is None

    # approved, with a response timeout of its own: the start is exactly the approved plan, by its approver
    answer = answer_when_asked(dag.dag_id, "Approve", "erin", seen, task_id="approve_failback")
    record_lineage(dag)
    run = dag.test(run_conf={**conf, "dry_run": False, "approval_timeout_minutes": 9})
    answer.join(5)
    states, pre = tasks(run)
    assert states == {"preflight": "success", "go_on": "success", "approve_failback": "success",
                      "start": "success"}, states
    from datetime import timedelta

    assert timedelta(minutes=8) < seen["timeout"] - seen["asked"] <= timedelta(minutes=9), seen
    started = [ti for ti in run.get_task_instances() if ti.task_id == "start"][0].xcom_pull(task_ids="start")
    assert started["plan_id"] == pre["plan_id"] and started["approved_by"] == "erin", started
    # OpenLineage: the reverse flow it started copies the topics on KB back to KA (identity policy: same names)
    assert lineage("mirrorflow_failback__KA-KB.start", run.run_id)[-1] == (
        "COMPLETE", [(f"kafka://{target.bootstrap_servers}", t) for t in (topic, new_topic)],
        [(f"kafka://{source.bootstrap_servers}", t) for t in (topic, new_topic)])
    with FlowClients(cfg, rev) as clients:
        assert flow_state(clients).state == "running"
        record = read_control(clients, "failback")
    assert record["plan"] == pre["plan_id"] and record["approved_by"] == "erin", record
    assert [(s["topic"], s["to_copy"]) for s in record["seeds"]] == [(topic, 3), (new_topic, 0)], record
    [line] = json.loads(cli(cfg, "status", "--flow", "KB->KA", "--json").stdout)[0]["operations"]
    assert line.startswith("started by the failback of KA->KB at ") and (
        f", plan {pre['plan_id']} approved by erin") in line, line
    produce(target, topic, records(6, 1, seed="onB"))
    assert sync_flow(cfg, rev, ["topics"]).ok  # the topic born on B during the outage reaches A
    assert run_once(cfg, rev, mode="direct").records == 9  # only what B got after the failover
    assert len(consume_all(source, topic)) == 43
