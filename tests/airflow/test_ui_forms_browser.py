"""The trigger form of every generated DAG in Airflow's real React UI (Debian's headless Chromium, Airflow's
API server in this process, the DAGs of the real dags/ folder serialized into the test's Airflow DB): a
logged-in user opens each DAG's Trigger form, the Trigger button is enabled with the defaults, and
submitting it creates a run whose conf is the defaults. Reseed's topic is required: its form marks the
field required and keeps Trigger disabled until a topic is typed. An invalid regex typed into a regex
field is refused in the form (the API's 400, with the message naming the param) and no run exists.
The replicate DAG's Backfill form (same dialog) creates a backfill of the chosen days. The status page is
where the README says: Browse > Mirrorflow. No scheduler runs there: the runs stay
queued; what they do is tested by the DAGs' own tests, and the journeys under Airflow's real scheduler
(replicate, sync, checkpoint, verify, backfill, failover with its approval) in test_ui_journeys_browser.py."""
from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from tests.browser_support import api_server, browser, log_in  # noqa: F401 - fixtures
from tests.support import write_config

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

DAGS = Path(__file__).resolve().parents[2] / "dags"
KINDS = ("replicate", "sync", "checkpoint", "verify", "backfill", "failover", "failback", "reseed", "takeover",
         "drill", "translate", "heartbeat")
# one field of each kind typed into (every DAG's schema refusing bad values: test_dag_params)
REGEX_FIELDS = {"replicate": "topics", "checkpoint": "groups"}
WAIT_S = 120  # a loaded machine's UI (not a timing assertion)


def serialize_dags() -> dict:
    """The real dags/ folder, parsed and written to the Airflow DB as the dag-processor does."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    sync_bag_to_db(bag, "dags-folder", None)
    return bag.dags


def runs_of(dag_id: str) -> list:
    from airflow.models import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        return [(r.run_id, r.conf) for r in session.query(DagRun).filter(DagRun.dag_id == dag_id)]


class TriggerForm:
    """A DAG's Trigger form in the UI, found by what the UI renders (the DAG page's "Trigger Dag" button,
    the fields named `element_<param>`, the submit button's test id)."""

    def __init__(self, driver, base_url: str, dag_id: str, fields: bool = True) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        self.by, self.ec, self.driver = By, ec, driver
        self.wait = WebDriverWait(driver, WAIT_S)
        driver.get(f"{base_url}/dags/{dag_id}")
        self.wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, 'button[aria-label="Trigger Dag"]'))).click()
        if fields:  # a DAG without Params (the heartbeat DAG) has a form of the run's options only
            self.wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '[name^="element_"]')))
        self.submit = self.wait.until(ec.presence_of_element_located(
            (By.CSS_SELECTOR, '[data-testid="trigger-dag-submit"]')))

    def field(self, param: str):
        return self.wait.until(self.ec.element_to_be_clickable((self.by.NAME, f"element_{param}")))

    def marked_required(self, param: str) -> bool:
        """The field is marked required (its label's "*") and shown invalid while empty."""
        field = self.field(param)
        root = field.find_element(self.by.XPATH, './ancestor::*[@data-scope="field"][@data-part="root"][1]')
        label = root.find_element(self.by.CSS_SELECTOR, 'label[data-part="label"]')
        return label.text.rstrip().endswith("*") and field.get_attribute("aria-invalid") == "true"

    def trigger_enabled(self) -> bool:
        """Whether the Trigger button is (or within seconds becomes) enabled: the form validates as it renders."""
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            WebDriverWait(self.driver, 10).until(lambda _: self.submit.is_enabled())
        except TimeoutException:
            return False
        return True

    def press_trigger(self) -> None:
        self.driver.execute_script("arguments[0].scrollIntoView(); arguments[0].click()", self.submit)

    def error(self) -> str:
        """The form's text once the API's refusal shows in it."""
        dialog = (self.by.CSS_SELECTOR, '[role="dialog"][aria-modal="true"]')
        self.wait.until(self.ec.text_to_be_present_in_element(dialog, "400 Bad Request"))
        return self.driver.find_element(*dialog).text


def browse_menu(driver, base_url: str) -> dict[str, str]:
    """The UI's Browse menu: each item's name and where it leads (the README sends users there)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(base_url)
    wait = WebDriverWait(driver, WAIT_S)
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, 'button[aria-label="Browse"]'))).click()
    items = wait.until(ec.visibility_of_all_elements_located((By.CSS_SELECTOR, 'a[role="menuitem"]')))
    return {i.get_attribute("data-value"): i.get_attribute("href") for i in items}


def backfill_from_form(form: TriggerForm, day: date) -> None:
    """Choose Backfill in the Trigger form, a range of one whole day (the date fields; the UI keeps the
    day, not the time typed), and press Run Backfill."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    by, driver = form.by, form.driver
    # the dialog re-renders as it switches: an element found a moment ago may be gone, find it again
    wait = WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
    driver.find_element(by.CSS_SELECTOR, 'label[for$=":radio:input:backfill"]').click()

    def type_day(d) -> bool:
        """Into the open picker: the day, and a time (the UI needs one to take the value)."""
        field = next(e for e in d.find_elements(by.CSS_SELECTOR, 'input[placeholder="YYYY/MM/DD"]') if e.is_displayed())
        field.click()
        field.send_keys(day.strftime("%Y/%m/%d"), Keys.ENTER)
        hour = next(e for e in d.find_elements(by.CSS_SELECTOR, 'input[placeholder="HH:mm"]') if e.is_displayed())
        hour.click()
        hour.send_keys("00:00", Keys.ENTER)
        return True

    for picker in (0, 1):  # From, To
        wait.until(lambda d, k=picker: d.find_elements(by.CSS_SELECTOR, '[data-testid="datetime-input"]')[k].click()
                   or True)
        time.sleep(1)  # the previous picker closes, this one opens
        wait.until(type_day)
        time.sleep(1)
    driver.find_element(by.XPATH, '//*[normalize-space()="Date Range"]').click()  # closes the picker
    run = form.wait.until(form.ec.element_to_be_clickable((by.XPATH, '//button[normalize-space()="Run Backfill"]')))
    driver.execute_script("arguments[0].scrollIntoView(); arguments[0].click()", run)


def backfills_of(dag_id: str) -> list[tuple]:
    """(from, to, logical dates of its runs) of each backfill of the DAG."""
    from airflow.models import DagRun
    from airflow.models.backfill import Backfill
    from airflow.utils.session import create_session

    with create_session() as session:
        return [(b.from_date, b.to_date, sorted(r.logical_date for r in session.query(DagRun).filter(
                    DagRun.dag_id == dag_id, DagRun.backfill_id == b.id)))
                for b in session.query(Backfill).filter(Backfill.dag_id == dag_id)]


def clear_runs(dag_ids: list[str]) -> None:
    """Runs an earlier test of this worker made of the same DAG ids (the metadata DB is the session's) would
    count as this test's."""
    from airflow.models import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        session.query(DagRun).filter(DagRun.dag_id.in_(dag_ids)).delete(synchronize_session=False)


def wait_for_run(dag_id: str, count: int) -> list:
    deadline = time.monotonic() + WAIT_S
    while len(runs := runs_of(dag_id)) < count:
        assert time.monotonic() < deadline, f"no run of {dag_id} after pressing Trigger"
        time.sleep(0.5)
    return runs


def test_every_trigger_form_submits_its_defaults_and_refuses_a_bad_regex(
        tmp_path, source, target, airflow_db, monkeypatch, api_server, browser):  # noqa: F811
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": "ui\\..*", "schedule": "0 * * * *"}})  # hourly: 24 runs a day
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    dags = serialize_dags()
    # every mirrorflow DAG of the flow, the kinds above at least
    ids = {d.removeprefix("mirrorflow_").removesuffix("__A-B"): d for d in sorted(dags) if d.endswith("__A-B")}
    assert set(KINDS) <= set(ids), ids
    clear_runs(list(ids.values()))
    log_in(browser, api_server)
    assert browse_menu(browser, api_server)["Mirrorflow"] == f"{api_server}/plugin/mirrorflow"  # the status page
    for kind, dag_id in ids.items():
        params = dags[dag_id].params
        defaults = {name: params.get_param(name).value for name in params}
        # translate's one Param is a JSON object (Spark's startingOffsets form): a JSON editor, no element_ field
        form = TriggerForm(browser, api_server, dag_id, fields=bool(defaults) and kind != "translate")
        if kind == "failback":  # this config has no B->A: the form says so and no run can be made
            assert form.marked_required("reverse_flow") and not form.submit.is_enabled()
            assert "Reverse flow B-&gt;A is not in this config" in form.driver.page_source  # its label
            form.field("reverse_flow").send_keys("B->A")
            form.press_trigger()
            assert "Invalid input for param reverse_flow" in form.error()
            assert runs_of(dag_id) == [], "a failback run was created for a config without its reverse flow"
            continue
        if kind == "translate":  # its offsets have no default: the form refuses to trigger until they are given
            assert not form.trigger_enabled(), "translate triggered without the offsets to translate"
            assert runs_of(dag_id) == []
            continue
        if kind == "reseed":
            assert form.marked_required("topic") and not form.submit.is_enabled(), "reseed's topic must be required"
            form.field("topic").send_keys("ui.orders")
            defaults["topic"] = "ui.orders"
        assert form.trigger_enabled(), f"{dag_id}: the Trigger button is disabled with the defaults"
        form.press_trigger()
        runs = wait_for_run(dag_id, 1)  # a slow UI may take a second press as a second run: each has the defaults
        assert runs and all(conf == defaults for _, conf in runs), (dag_id, runs)
        if kind in REGEX_FIELDS:
            name = REGEX_FIELDS[kind]
            form = TriggerForm(browser, api_server, dag_id)
            form.field(name).send_keys("orders(")
            form.press_trigger()
            assert f"Invalid input for param {name}: 'orders(' is not a 'regex'" in form.error(), dag_id
            assert len(runs_of(dag_id)) == 1, f"{dag_id}: a run was created with an invalid regex"
        if kind == "replicate":  # the Backfill form of the same dialog: one past day, hourly runs
            day = (datetime.now(UTC) - timedelta(days=2)).date()
            backfill_from_form(TriggerForm(browser, api_server, dag_id), day)
            deadline = time.monotonic() + WAIT_S
            while not (made := backfills_of(dag_id)) or len(made[0][2]) < 24:  # created one by one
                assert time.monotonic() < deadline, "no backfill after pressing Run Backfill"
                time.sleep(0.5)
            start = datetime.combine(day, datetime.min.time(), UTC)
            [(lo, hi, dates)] = made
            assert (lo, hi) == (start, start + timedelta(days=1, milliseconds=-1))
            assert dates == [start + timedelta(hours=h) for h in range(24)]
