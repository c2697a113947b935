"""The failover's and the failback's human step under Airflow's real scheduler: `airflow standalone`
with a logged-in user `admin` (the simple auth manager, not all-admins), the DAGs triggered and
answered through the REST API the Required Actions page uses (PATCH .../hitlDetails). One Airflow
for all: a rejection changes nothing (group offsets, flow state, no failover record) and the run
fails saying "rejected by admin"; then an approval commits on the target exactly the offsets the
approval page showed, and the failover record names admin as the approver. Then the failback the
same way: rejected, the run fails and the reverse flow stays stopped; approved, it starts exactly the
plan the page showed and its record names admin."""
from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
import uuid

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow_dev.processes import free_port
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import flow_state, read_control
from tests.airflow.standalone import (
    airflow,
    airflow_env,
    scheduler_alive,
    scheduler_saw_pause,
    standalone,
    unpause_when_ready,
)
from tests.integration.test_failover import commit, committed_offsets
from tests.integration.test_replicate import records
from tests.support import create_topic, produce, write_config

pytestmark = pytest.mark.airflow


class Api:
    """Airflow's public REST API as the logged-in user."""

    def __init__(self, port: int, user: str, password: str) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.token = self.call("POST", "/auth/token", {"username": user, "password": password})["access_token"]

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        req = urllib.request.Request(self.base + path, method=method,
                                     data=None if body is None else json.dumps(body).encode())
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "application/json")
        if getattr(self, "token", None):
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read() or b"{}")

    def wait(self, what: str, probe, deadline_s: float, log) -> object:
        deadline = time.monotonic() + deadline_s
        while True:
            scheduler_alive(log)
            try:
                got = probe()
            except urllib.error.HTTPError as exc:
                if exc.code not in (404, 500, 503):  # not there yet, or SQLite busy beside the scheduler
                    raise
                got = None
            except TimeoutError:  # the api-server did not answer within a minute (a loaded machine): ask again
                got = None
            if got:
                return got
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(3)


def test_failover_approval_and_rejection_through_the_rest_api(standalone_turn, tmp_path, source, target, unique):
    started = time.monotonic()
    tag = uuid.uuid4().hex[:6]
    src, tgt = f"HA{tag}", f"HB{tag}"
    pfx = unique("hitl")
    topic, app, moved = f"{pfx}.orders", f"{pfx}-app", f"{pfx}-moved"
    props = {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
             "heartbeats.replication.enabled": False, "emit.heartbeats.enabled": False}
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": props, f"{tgt}->{src}": {**props, "standby": True}})
    flow, rev = cfg.flow(f"{src}->{tgt}"), cfg.flow(f"{tgt}->{src}")
    remote = f"{src}.{topic}"
    create_topic(source, topic, 2)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(40, 2))
    assert run_once(cfg, flow, mode="direct").records == 40
    commit(source, app, topic, {0: 7, 1: 13})
    commit(source, moved, topic, {0: 15})
    commit(target, moved, remote, {0: 3})  # it already has an offset on the target, below its checkpoint
    assert {app, moved} <= set(emit_checkpoints(cfg, flow).groups)
    before = {app: committed_offsets(target, app, remote, 2), moved: committed_offsets(target, moved, remote, 2)}
    assert before == {app: {0: -1001, 1: -1001}, moved: {0: 3, 1: -1001}}

    home = tmp_path / "airflow"
    home.mkdir()
    (home / "passwords.json").write_text(json.dumps({"admin": "approve-me"}))
    port = free_port()
    env = airflow_env(home, port, cfg.path, tmp_path / "runs",
                      AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="False",
                      AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin",
                      AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(home / "passwords.json"))
    dag_id, back_id = f"mirrorflow_failover__{flow.id}", f"mirrorflow_failback__{flow.id}"
    log = tmp_path / "standalone.log"
    airflow(env, "db", "migrate")
    with standalone(env, log) as proc:
        unpause_when_ready(proc, log, home / "airflow.db", port, [dag_id, back_id])
        api = Api(port, "admin", "approve-me")
        runs = f"/api/v2/dags/{dag_id}/dagRuns"

        def ask(conf: dict, runs: str = runs, task: str = "approve_failover") -> tuple[str, dict]:
            """Trigger a run; wait until its approval is pending; return (run id, the approval's details)."""
            run_id = api.call("POST", runs, {"logical_date": None, "conf": conf})["dag_run_id"]
            ti = f"{runs}/{run_id}/taskInstances/{task}"

            def pending() -> dict | None:
                state = api.call("GET", ti)["state"]
                assert state not in ("failed", "upstream_failed", "skipped"), (state, api.call("GET", f"{runs}/{run_id}"))
                return api.call("GET", f"{ti}/-1/hitlDetails") if state == "awaiting_input" else None

            detail = api.wait("the approval", pending, 600, log)
            api.wait("the scheduler to see the task paused",
                     lambda: scheduler_saw_pause(log, task, run_id), 60, log)
            return run_id, detail

        def answer(run_id: str, option: str, runs: str = runs, task: str = "approve_failover") -> str:
            api.call("PATCH", f"{runs}/{run_id}/taskInstances/{task}/-1/hitlDetails",
                     {"chosen_options": [option], "params_input": {}})
            return api.wait("the run's end", lambda: (s := api.call("GET", f"{runs}/{run_id}")["state"]) in (
                "success", "failed") and s, 600, log)

        # 1. rejected: nothing changes, the run fails saying who rejected it
        run_id, detail = ask({"mode": "unplanned"})
        assert re.search(r"Fail over .* plan [0-9a-f]{12}$", detail["subject"]), detail["subject"]
        assert answer(run_id, "Reject") == "failed"
        plan_id = detail["subject"].rsplit(" ", 1)[1]
        rejected = f"failover plan {plan_id} rejected by admin: nothing committed"
        # the resumed task's lines reach the log API a moment after the run's state (seen in a suite run)
        api.wait("the rejection in the task's log", lambda: rejected in json.dumps(
            api.call("GET", f"{runs}/{run_id}/taskInstances/approve_failover/logs/1")), 60, log)
        assert api.call("GET", f"{runs}/{run_id}/taskInstances/commit")["state"] in ("skipped", "upstream_failed")
        assert {g: committed_offsets(target, g, remote, 2) for g in before} == before
        with FlowClients(cfg, flow) as clients:
            assert flow_state(clients).state == "running" and read_control(clients, "failover") is None

        # 2. approved (admin is the assigned approver): the commit is what the page showed
        run_id, detail = ask({"mode": "unplanned", "approvers": "admin"})
        assert [u["id"] for u in detail["assigned_users"]] == ["admin"]
        body = detail["body"]
        assert body.startswith(f"**Failover plan `{plan_id}`**") and "```text\n" in body and "dry run" not in body
        shown = {(g, int(p)): int(o) for g, p, o in re.findall(
            rf"    ({re.escape(pfx)}-\w+) resumes {re.escape(remote)}\[(\d)\] at (\d+)", body)}
        assert set(shown) == {(app, 0), (app, 1), (moved, 0)}, body
        assert answer(run_id, "Approve") == "success"

        # 3. the failback, bound the same way: B's own records wait to go back to A
        create_topic(target, topic, 1)
        produce(target, topic, records(3, 1, seed="onB"))
        back_runs = f"/api/v2/dags/{back_id}/dagRuns"
        run_id, detail = ask({}, back_runs, "approve_failback")
        assert answer(run_id, "Reject", back_runs, "approve_failback") == "failed"
        back_plan = detail["subject"].rsplit(" ", 1)[1]
        assert re.fullmatch(r"[0-9a-f]{12}", back_plan) and detail["body"].startswith(
            f"**Failback plan `{back_plan}`** of flow `{flow.name}`: starts `{rev.name}`"), detail
        refused = f"failback plan {back_plan} rejected by admin: nothing started, {rev.name} is unchanged"
        api.wait("the failback's rejection in the task's log", lambda: refused in json.dumps(
            api.call("GET", f"{back_runs}/{run_id}/taskInstances/approve_failback/logs/1")), 60, log)
        with FlowClients(cfg, rev) as clients:
            assert flow_state(clients).state == "stopped" and read_control(clients, "failback") is None
        run_id, detail = ask({"approvers": "admin", "approval_timeout_minutes": 30}, back_runs, "approve_failback")
        assert detail["subject"].endswith(f"plan {back_plan}") and "written on " in detail["body"], detail
        assert answer(run_id, "Approve", back_runs, "approve_failback") == "success"
        with FlowClients(cfg, rev) as clients:
            assert flow_state(clients).state == "running"
            back_record = read_control(clients, "failback")
        assert back_record["plan"] == back_plan and back_record["approved_by"] == "admin", back_record
        assert [(s["topic"], s["to_copy"]) for s in back_record["seeds"]] == [(topic, 3)], back_record
    after = {g: committed_offsets(target, g, remote, 2) for g in before}
    assert {(g, p): o for g, offs in after.items() for p, o in offs.items() if o >= 0} == shown
    with FlowClients(cfg, flow) as clients:
        record = read_control(clients, "failover")
        state = flow_state(clients)
    assert state.state == "stopped" and state.failed_over, state  # its next step: the failback
    assert record["approved_by"] == "admin" and record["plan"] == plan_id, record
    print(f"approval + rejection under the scheduler: {time.monotonic() - started:.0f} s")
