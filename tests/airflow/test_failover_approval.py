"""The failover's human step under Airflow's real scheduler: `airflow standalone` with a
logged-in user `admin` (the simple auth manager, not all-admins), the failover DAG triggered and
answered through the REST API the Required Actions page uses (PATCH .../hitlDetails). One Airflow
for both: a rejection changes nothing (group offsets, flow state, no failover record) and the run
fails saying "rejected by admin"; then an approval commits on the target exactly the offsets the
approval page showed, and the failover record names admin as the approver."""
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
from mirrorflow.replication.runner import run_once
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
            if got:
                return got
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(3)


def test_failover_approval_and_rejection_through_the_rest_api(tmp_path, source, target, unique):
    started = time.monotonic()
    tag = uuid.uuid4().hex[:6]
    src, tgt = f"HA{tag}", f"HB{tag}"
    pfx = unique("hitl")
    topic, app, moved = f"{pfx}.orders", f"{pfx}-app", f"{pfx}-moved"
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target}, {f"{src}->{tgt}": {
        "topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
        "heartbeats.replication.enabled": False, "emit.heartbeats.enabled": False}})
    flow = cfg.flow(f"{src}->{tgt}")
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
    dag_id = f"mirrorflow_failover__{flow.id}"
    log = tmp_path / "standalone.log"
    airflow(env, "db", "migrate")
    with standalone(env, log) as proc:
        unpause_when_ready(proc, log, home / "airflow.db", port, [dag_id])
        api = Api(port, "admin", "approve-me")
        runs = f"/api/v2/dags/{dag_id}/dagRuns"

        def ask(conf: dict) -> tuple[str, dict]:
            """Trigger a run; wait until its approval is pending; return (run id, the approval's details)."""
            run_id = api.call("POST", runs, {"logical_date": None, "conf": conf})["dag_run_id"]
            ti = f"{runs}/{run_id}/taskInstances/approve_failover"

            def pending() -> dict | None:
                state = api.call("GET", ti)["state"]
                assert state not in ("failed", "upstream_failed", "skipped"), (state, api.call("GET", f"{runs}/{run_id}"))
                return api.call("GET", f"{ti}/-1/hitlDetails") if state == "awaiting_input" else None

            detail = api.wait("the approval", pending, 600, log)
            api.wait("the scheduler to see the task paused",
                     lambda: scheduler_saw_pause(log, "approve_failover", run_id), 60, log)
            return run_id, detail

        def answer(run_id: str, option: str) -> str:
            api.call("PATCH", f"{runs}/{run_id}/taskInstances/approve_failover/-1/hitlDetails",
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
    after = {g: committed_offsets(target, g, remote, 2) for g in before}
    assert {(g, p): o for g, offs in after.items() for p, o in offs.items() if o >= 0} == shown
    with FlowClients(cfg, flow) as clients:
        record = read_control(clients, "failover")
        state = flow_state(clients)
    assert state.state == "stopped" and state.failed_over, state  # its next step: the failback
    assert record["approved_by"] == "admin" and record["plan"] == plan_id, record
    print(f"approval + rejection under the scheduler: {time.monotonic() - started:.0f} s")
