"""The operator's journeys through Airflow's real UI, under Airflow's real scheduler: one `airflow
standalone` (scheduler, dag-processor, api-server, triggerer; LocalExecutor on the session's
PostgreSQL) for all of them, driven in Debian's headless Chromium as a person does it: sign in on
the login page, open a DAG, press Trigger, fill the form, press Trigger; then read what the UI
shows. Runs that do not depend on each other run side by side; the data is small.

Two flows of their own (aliases unique to the test, the session's clusters):

* flow 1 (the whole life of a flow): **sync** from its form creates on the target the remote topic of
  a topic it lacks; **replicate**, side by side, copies every record exactly once and the status page
  counts them; **checkpoint**
  and **verify** side by side: the status page's consumer groups show where the application's group
  resumes on the target (the copy of the record it had not read yet), the verify log says MATCH;
  **failover** with "Groups" filled in: the approval is found in Browse > Required Actions, its
  report shows the plan id and per group and partition where it resumes, line by line (a real
  failover, not a "dry run"); the Approve button commits exactly those offsets on the target (the
  group reads on from the record the report promised; a group the regex left out is untouched) and
  the status page shows the flow failed over, the failover and its approver; a replicate run of the
  failed-over flow ends with every task skipped and the run's page (from the DAG's "Latest Run")
  shows its note: why, and that the next step is the failback;
* flow 2, started at `latest`: the manual **backfill** DAG from its form with its defaults (earliest
  to where the flow began) copies exactly the history; then the control DAG's form pauses it with a
  reason, and a replicate run's page shows the note naming the pause, the user and the resume;
* data-aware scheduling: a user's DAG scheduled on flow 1's remote topic (its Asset, the Kafka
  provider's `kafka://<target>/<topic>`) runs once, after the replicate run that copied the records,
  and gets the copied offsets in the triggering event's extra; a second replicate run that copied
  nothing and the skipped runs trigger nothing; the backfill's event carries what it copied.
"""
from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow_dev.processes import free_port
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import flow_state, read_control
from tests.airflow.standalone import (
    airflow,
    airflow_env,
    query,
    scheduler_alive,
    scheduler_saw_pause,
    standalone,
    unpause_when_ready,
)
from tests.airflow.test_failover_approval import Api
from tests.airflow.test_ui_forms_browser import WAIT_S, TriggerForm, browse_menu
from tests.browser_support import browser, log_in_with_password  # noqa: F401 - fixture
from tests.integration.test_failover import commit, committed_offsets, first_record_after_resume
from tests.support import admin, consume_all, create_topic, produce, wait_for_topic, write_config

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

USER, PASSWORD = "admin", "journeys"
RUN_S = 900  # a loaded machine's spark-submit under the scheduler (a bound, not a timing assertion)


class Airflow:
    """The standalone Airflow of the test: its database, log and REST API (for what the UI's log view
    shows), and the runs of its DAGs."""

    def __init__(self, db: str, log: Path, port: int) -> None:
        self.db, self.log, self.port = db, log, port
        self.base = f"http://127.0.0.1:{port}"
        self.api: Api | None = None

    def manual_runs(self, dag_id: str) -> list[tuple[str, str]]:
        return query(self.db, "SELECT run_id, state FROM dag_run WHERE dag_id = ? AND run_type = 'manual' "
                              "ORDER BY id", dag_id)

    def trigger(self, browser, dag_id: str, **typed: str) -> str:  # noqa: F811
        """Open the DAG's Trigger form, type `typed` into its fields, press Trigger; the new run's id."""
        before = len(self.manual_runs(dag_id))
        form = TriggerForm(browser, self.base, dag_id)
        for name, text in typed.items():
            form.field(name).send_keys(text)
        assert form.trigger_enabled(), f"{dag_id}: Trigger is disabled"
        form.press_trigger()
        deadline = time.monotonic() + WAIT_S
        while len(made := self.manual_runs(dag_id)) <= before:
            assert time.monotonic() < deadline, f"no run of {dag_id} after pressing Trigger"
            time.sleep(0.5)
        return made[-1][0]

    def finished(self, dag_id: str, run_id: str) -> str:
        """Wait for the run to end; its state."""
        deadline = time.monotonic() + RUN_S
        while True:
            [(state,)] = query(self.db, "SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", dag_id, run_id)
            if state in ("success", "failed"):
                return state
            assert time.monotonic() < deadline, f"{dag_id} {run_id} still {state}: {self.tasks(dag_id, run_id)}"
            scheduler_alive(self.log)
            time.sleep(2)

    def succeeded(self, dag_id: str, run_id: str) -> dict[str, str]:
        """The run ended "success": its tasks' states."""
        state = self.finished(dag_id, run_id)
        assert state == "success", (dag_id, run_id, state, self.tasks(dag_id, run_id))
        return self.tasks(dag_id, run_id)

    def tasks(self, dag_id: str, run_id: str) -> dict[str, str]:
        return dict(query(self.db, "SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = ?",
                          dag_id, run_id))

    def note(self, dag_id: str, run_id: str) -> str | None:
        rows = query(self.db, "SELECT n.content FROM dag_run r JOIN dag_run_note n ON n.dag_run_id = r.id "
                              "WHERE r.dag_id = ? AND r.run_id = ?", dag_id, run_id)
        return rows[0][0] if rows else None

    def log_of(self, dag_id: str, run_id: str, task_id: str) -> str:
        """The task's log as the UI's log view gets it (the REST API, as the signed-in user)."""
        if self.api is None:
            self.api = Api(self.port, USER, PASSWORD)
        return json.dumps(self.api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/"
                                               f"{task_id}/logs/1"))


def click(element) -> bool:
    """Clicks inside a wait_for probe: the table re-rendered between finding a link and clicking it is a
    stale element, looked up again, not a failure (a full run failed on one, 2026-11-29)."""
    element.click()
    return True


def wait_for(what: str, probe, timeout: float = WAIT_S):
    """probe()'s first true value; elements the UI re-renders meanwhile are looked up again."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout  # a wait for a loaded machine's UI, not a timing assertion
    while True:
        try:
            got = probe()
        except (NoSuchElementException, StaleElementReferenceException):
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def status_card(browser, base: str, flow: str):  # noqa: F811
    """The flow's card on the status page (Browse > Mirrorflow), freshly loaded."""
    from selenium.webdriver.common.by import By

    browser.get(f"{base}/mirrorflow/")
    return wait_for("the status page", lambda: browser.find_element(By.CSS_SELECTOR, f'section[data-flow="{flow}"]'))


def shown(card, key: str) -> str:
    from selenium.webdriver.common.by import By

    return card.find_element(By.CSS_SELECTOR, f'[data-k="{key}"]').text


def group_rows(browser, card) -> dict[tuple[str, int], tuple[int, int]]:  # noqa: F811
    """The card's consumer groups table, opened as a person does: (group, partition) -> (source offset,
    resumes at (target))."""
    from selenium.webdriver.common.by import By

    card.find_element(By.CSS_SELECTOR, 'details[id^="groups-"] summary').click()
    flow = card.get_attribute("data-flow")

    def read() -> dict:  # the page replaces its cards every 10 s (an open table stays open)
        rows = browser.find_elements(By.CSS_SELECTOR, f'section[data-flow="{flow}"] details[id^="groups-"] tr')[1:]
        cells = [[td.text for td in row.find_elements(By.TAG_NAME, "td")][:5] for row in rows]
        return {(g, int(p)): (int(u.replace(",", "")), int(r.replace(",", ""))) for g, _, p, u, r in cells if g}

    return wait_for("the groups table", read)


def latest_run_note(browser, base: str, dag_id: str) -> str:  # noqa: F811
    """From the DAG's page, its "Latest Run" link, then the note on the run's page (its full text: the
    page shows its first line, a click shows the rest)."""
    from selenium.webdriver.common.by import By

    browser.get(f"{base}/dags/{dag_id}")
    wait_for("the Latest Run link", lambda: click(browser.find_element(
        By.XPATH, '//*[@data-testid="stat"][.//h2[normalize-space()="Latest Run"]]//a')))
    note = wait_for("the run's note", lambda: browser.find_element(By.XPATH, '//p[contains(., "Next step:")]'))
    return note.get_attribute("textContent")


def approve_in_required_actions(browser, airflow: Airflow, subject: str) -> str:  # noqa: F811
    """Browse > Required Actions, the approval whose subject is `subject`, its Required Action tab: the
    report (returned, as the page shows it); then the Approve button."""
    from selenium.webdriver.common.by import By

    browser.get(browse_menu(browser, airflow.base)["Required Actions"])
    wait_for(f"the approval {subject!r}", lambda: click(browser.find_element(
        By.XPATH, f'//td[@data-testid="table-cell-subject"]//a[normalize-space()="{subject}"]')))
    report = wait_for("the report", lambda: browser.find_element(By.CSS_SELECTOR, "code.language-text")
                      .get_attribute("textContent"))
    wait_for("the Approve button", lambda: click(browser.find_element(By.CSS_SELECTOR, '[data-testid="hitl-option-Approve"]')))
    return report


@contextlib.contextmanager
def page_kept_on_failure(browser, where: Path):  # noqa: F811
    """On a failure, the page the browser shows (screenshot and HTML) is kept in `where`."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            browser.save_screenshot(str(where / "page.png"))
            (where / "page.html").write_text(browser.page_source)
            print(f"the browser's last page ({browser.current_url}): {where}/page.png, page.html")
        raise


DOWNSTREAM = '''
import json
from pathlib import Path

import pendulum
from airflow.sdk import DAG, task

from mirrorflow_airflow.assets import remote_topic_asset
from mirrorflow_airflow.hooks import MirrorflowHook

cfg = MirrorflowHook().get_conn()
ORDERS = remote_topic_asset(cfg, cfg.flow({flow!r}), {topic!r})

with DAG("downstream_of_replication", schedule=[ORDERS], start_date=pendulum.datetime(2026, 1, 1), catchup=False):

    @task
    def consume(triggering_asset_events=None):
        Path({out!r}).write_text(json.dumps([e.extra for e in triggering_asset_events[ORDERS]]))

    consume()
'''


def dags_with_downstream(where: Path, flow: str, topic: str, out: Path) -> Path:
    """A DAGs folder: the repository's DAG files and a user's DAG scheduled on `topic`'s remote topic."""
    import shutil

    from tests.airflow.standalone import ROOT

    where.mkdir()
    for f in (ROOT / "dags").glob("*.py"):
        shutil.copy(f, where / f.name)
    (where / "downstream_of_replication.py").write_text(DOWNSTREAM.format(flow=flow, topic=topic, out=str(out)))
    return where


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def test_operator_journeys_through_the_ui_under_the_real_scheduler(standalone_turn, tmp_path, source, target, unique,
                                                                    airflow_postgres, browser):  # noqa: F811
    started = time.monotonic()
    tag = uuid.uuid4().hex[:6]
    a1, b, a2 = f"JA{tag}", f"JB{tag}", f"JC{tag}"  # aliases of their own: the flows' state is this test's
    pfx = unique("jour")
    topic, audit, app, other = f"{pfx}.orders", f"{pfx}.audit", f"{pfx}-app", f"{pfx}-other"
    history_topic = f"{pfx}b.events"
    quiet = {"schedule": "", "heartbeats.replication.enabled": False, "emit.heartbeats.enabled": False,
             # no sync concern on a timer: the sync DAG runs only from its form (a manual run syncs topics)
             "refresh.topics.enabled": False, "sync.topic.configs.enabled": False, "sync.topic.acls.enabled": False,
             "state.topic.partitions": 2, "tasks.max": 2}
    cfg = write_config(tmp_path / "mf.yaml", {a1: source, b: target, a2: source}, {
        f"{a1}->{b}": {**quiet, "topics": f"{pfx}\\..*", "groups": f"{pfx}-.*",
                       "emit.checkpoints.interval.seconds": 3600},  # one scheduled pass at the unpause
        f"{a2}->{b}": {**quiet, "topics": f"{pfx}b\\..*", "initial.position": "latest",
                       "emit.checkpoints.enabled": False}})
    f1, f2 = cfg.flow(f"{a1}->{b}"), cfg.flow(f"{a2}->{b}")
    remote, new_remote, history_remote = f"{a1}.{topic}", f"{a1}.{audit}", f"{a2}.{history_topic}"
    dag = {kind: f"mirrorflow_{kind}__{f1.id}" for kind in ("sync", "replicate", "checkpoint", "verify", "failover")}
    dag2 = {kind: f"mirrorflow_{kind}__{f2.id}" for kind in ("backfill", "control", "replicate")}

    home = tmp_path / "airflow"
    home.mkdir()
    (home / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
    port = free_port()
    consumed = tmp_path / "consumed.json"  # what the downstream DAG's task got
    dags = dags_with_downstream(tmp_path / "dags", f1.name, topic, consumed)
    env = airflow_env(home, port, cfg.path, tmp_path / "runs", database=airflow_postgres(),
                      AIRFLOW__CORE__DAGS_FOLDER=str(dags),
                      AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="False",
                      AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=f"{USER}:admin",
                      AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(home / "passwords.json"))
    af = Airflow(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"], tmp_path / "standalone.log", port)
    airflow(env, "db", "migrate")
    with standalone(env, af.log) as proc, page_kept_on_failure(browser, tmp_path):
        # the clusters' side while Airflow starts (it reads only the config before the DAGs are unpaused)
        # flow 1: 10 records per partition, the value names its source offset; and a topic the target lacks
        create_topic(source, topic, 2)
        create_topic(target, remote, 2)
        create_topic(source, audit, 3)
        produce(source, topic, [{"partition": p, "key": f"k{i}".encode(), "value": f"p{p}-{i}".encode()}
                                for i in range(10) for p in (0, 1)])
        # flow 2 started at `latest` after 6 records per partition of history; 2 live ones since (not backfilled)
        create_topic(source, history_topic, 2)
        create_topic(target, history_remote, 2)
        produce(source, history_topic, [{"partition": p, "value": f"old{p}-{i}".encode()}
                                        for i in range(6) for p in (0, 1)])
        assert run_once(cfg, f2, mode="direct").records == 0
        produce(source, history_topic, [{"partition": p, "value": f"live{p}".encode()} for p in (0, 1)])
        unpause_when_ready(proc, af.log, af.db, port, [*dag.values(), *dag2.values(), "downstream_of_replication"])
        up = time.monotonic()
        log_in_with_password(browser, af.base, USER, PASSWORD)

        # side by side: sync and replicate (flow 1), the backfill (flow 2, its form's defaults: earliest to
        # where the flow began)
        assert new_remote not in admin(target).list_topics(timeout=10).topics
        sync_run = af.trigger(browser, dag["sync"])
        replicate_run = af.trigger(browser, dag["replicate"])
        backfill_run = af.trigger(browser, dag2["backfill"])
        assert af.succeeded(dag["sync"], sync_run)["topics_and_partitions"] == "success"
        wait_for_topic(target, new_remote, 3)  # the remote topic the sync created, with the source's partitions

        assert af.succeeded(dag2["backfill"], backfill_run)["copy"] == "success"
        history = consume_all(target, history_remote)
        assert sorted(r.value for r in history) == sorted(f"old{p}-{i}".encode() for i in range(6) for p in (0, 1))
        # flow 2 paused from the control DAG's form (action's default: pause), then a replicate run
        pause_run = af.trigger(browser, dag2["control"], reason="B maintenance")

        assert set(af.succeeded(dag["replicate"], replicate_run).values()) == {"success"}
        noop_run = af.trigger(browser, dag["replicate"])  # nothing new to copy: no Asset event
        src, dst = consume_all(source, topic), consume_all(target, remote)
        assert [r.content() for r in dst] == [r.content() for r in src]  # each record once, in order
        card = status_card(browser, af.base, f1.name)
        assert (shown(card, "records"), shown(card, "lag")) == ("20", "0")

        # checkpoint and verify side by side; the application read 3 and 5 records, another group 2
        commit(source, app, topic, {0: 3, 1: 5})
        commit(source, other, topic, {0: 2})
        checkpoint_run = af.trigger(browser, dag["checkpoint"])
        verify_run = af.trigger(browser, dag["verify"])
        af.succeeded(dag2["control"], pause_run)
        paused_run = af.trigger(browser, dag2["replicate"])
        assert af.succeeded(dag["checkpoint"], checkpoint_run)["checkpoint"] == "success"
        # where each group resumes on the target: the copy of the first record it has not read
        copy_of = {(r.partition, r.value): r.offset for r in dst}
        resumes = {(app, 0): (3, copy_of[(0, b"p0-3")]), (app, 1): (5, copy_of[(1, b"p1-5")]),
                   (other, 0): (2, copy_of[(0, b"p0-2")])}
        assert group_rows(browser, status_card(browser, af.base, f1.name)) == resumes
        assert af.succeeded(dag["replicate"], noop_run) == {"plan": "success", "copy": "skipped", "report": "success"}
        # the user's DAG ran once, after the copy: the event's extra says what was copied where
        [(downstream_run,)] = wait_for("the downstream DAG's run", lambda: query(
            af.db, "SELECT run_id FROM dag_run WHERE dag_id = 'downstream_of_replication'"), RUN_S)
        assert af.succeeded("downstream_of_replication", downstream_run) == {"consume": "success"}
        [extra] = json.loads(consumed.read_text())
        assert extra == {"flow": f1.name, "source_cluster": a1, "target_cluster": b, "kind": "replicate",
                         "run": extra["run"], "source_topic": topic, "target_topic": remote, "records": 20,
                         "partitions": [{"partition": p, "source_offsets": [0, 10], "records": 10,
                                         "target_offsets": [min(r.offset for r in dst if r.partition == p),
                                                            max(r.offset for r in dst if r.partition == p) + 1]}
                                        for p in (0, 1)]}, extra
        assert af.succeeded(dag["verify"], verify_run)["verify"] == "success"
        verified = af.log_of(dag["verify"], verify_run, "verify")
        assert "MATCH: every copied record is on the target, exactly" in verified
        assert f"{topic}[0] -> {remote}[0]: ok, 10 of 10 source records match" in verified

        # failover of the application's group (the form's Groups), approved in Required Actions
        failover_run = af.trigger(browser, dag["failover"], groups=app)
        deadline = time.monotonic() + RUN_S
        while af.tasks(dag["failover"], failover_run).get("approve_failover") != "awaiting_input":
            assert time.monotonic() < deadline and af.tasks(dag["failover"], failover_run).get("preflight") != \
                "failed", af.tasks(dag["failover"], failover_run)
            scheduler_alive(af.log)
            time.sleep(2)
        wait_for("the scheduler to see the approval wait",
                 lambda: scheduler_saw_pause(af.log, "approve_failover", failover_run), RUN_S)
        [(subject,)] = query(af.db, "SELECT h.subject FROM hitl_detail h JOIN task_instance t ON t.id = h.ti_id "
                                    "WHERE t.dag_id = ? AND t.run_id = ?", dag["failover"], failover_run)
        plan_id = subject.rsplit(" ", 1)[1]
        assert subject == f"Fail over {f1.name} to {b}: plan {plan_id}"
        report = approve_in_required_actions(browser, af, subject)
        lines = report.splitlines()
        assert lines[0] == f"failover of flow {f1.name} to cluster '{b}' (unplanned): plan {plan_id}, nothing " \
                           "committed yet", report
        assert "dry run" not in report and f"  plan: {plan_id}" in lines
        promised = {(app, int(p)): int(o) for p, o in re.findall(
            rf"^    {re.escape(app)} resumes {re.escape(remote)}\[(\d)\] at (\d+)$", report, re.M)}
        assert promised == {k: v[1] for k, v in resumes.items() if k[0] == app}, report
        assert other not in report
        assert af.succeeded(dag["failover"], failover_run)["commit"] == "success"
        assert committed_offsets(target, app, remote, 2) == {p: promised[(app, p)] for p in (0, 1)}
        assert committed_offsets(target, other, remote, 2) == {0: -1001, 1: -1001}  # not in Groups: untouched
        for p, first in ((0, b"p0-3"), (1, b"p1-5")):  # the group reads on from its first unread record
            assert first_record_after_resume(target, app, remote, p)[1].value() == first
        with FlowClients(cfg, f1) as clients:
            record, state = read_control(clients, "failover"), flow_state(clients)
        assert (record["plan"], record["approved_by"], state.failed_over) == (plan_id, USER, True)
        card = status_card(browser, af.base, f1.name)
        assert shown(card, "state") == "failed over"
        assert shown(card, "operations") == (f"unplanned failover at {iso(record['at'])} by {record['by']}, plan "
                                             f"{plan_id} approved by {USER}")
        assert shown(card, "history").splitlines()[0].startswith("failover ")
        assert f" by {USER} (airflow): unplanned failover to '{b}', plan {plan_id}" in shown(card, "history")

        # runs of a failed-over and of a paused flow: every task skipped, and the run's note says why and what next
        stopped_run = af.trigger(browser, dag["replicate"])
        assert set(af.succeeded(dag["replicate"], stopped_run).values()) == {"skipped"}
        failed_over = (f"flow {f1.name} is {state.describe()}: no copying. Next step: fail back once {a1} is back: "
                       f"`mirrorflow failback --flow {f1.name}` or the DAG mirrorflow_failback__{f1.id} (it starts "
                       f"{b}->{a1}, so what was written on {b} reaches {a1}); not a resume. {f1.name} itself runs "
                       f"again after a planned failover of {b}->{a1} and its failback")
        assert af.note(dag["replicate"], stopped_run) == failed_over
        assert latest_run_note(browser, af.base, dag["replicate"]) == failed_over.replace("`", "")  # Markdown
        assert set(af.succeeded(dag2["replicate"], paused_run).values()) == {"skipped"}
        with FlowClients(cfg, f2) as clients:
            paused = flow_state(clients)
        assert (paused.state, paused.by, paused.reason) == ("paused", USER, "B maintenance")
        resume = (f"flow {f2.name} is paused by {USER} since {iso(paused.at)} (on the target): B maintenance: no "
                  f"copying. Next step: resume it when ready: `mirrorflow flow resume --flow {f2.name}`, the DAG "
                  f"mirrorflow_control__{f2.id} (action resume) or the Resume button on the status page")
        assert af.note(dag2["replicate"], paused_run) == resume
        assert latest_run_note(browser, af.base, dag2["replicate"]) == resume.replace("`", "")
        done = time.monotonic()
        # one downstream run in all: the no-op and the skipped replicate runs emitted no event
        assert query(af.db, "SELECT count(*) FROM dag_run WHERE dag_id = 'downstream_of_replication'") == [(1,)]
        [(backfilled,)] = query(af.db, "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                                       "WHERE a.uri LIKE ?", f"%/{history_remote}")
        backfilled = json.loads(backfilled) if isinstance(backfilled, str) else backfilled
        assert (backfilled["kind"], backfilled["records"], [p["records"] for p in backfilled["partitions"]]) == \
            ("backfill", 12, [6, 6])
    assert len(consume_all(target, history_remote)) == 12  # the live records wait for a replicate run
    print(f"journeys: {done - up:.0f} s with Airflow up, {done - started:.0f} s in all")
