"""Pause and resume from the status page's buttons in a real headless Chromium against Airflow's API
server: the click reaches the target (state and history name the logged-in user), the page shows it,
a reason being typed survives the page's refresh, and a viewer gets no buttons."""
from __future__ import annotations

import time

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.history import read_history
from tests.integration.test_status_browser import api_server, browser  # noqa: F401 - fixtures
from tests.integration.test_status import own_flow

pytestmark = [pytest.mark.integration, pytest.mark.airflow]


def _wait(what, check, timeout: float = 60):
    """check()'s first true value; the page replaces its flows every 10 s, so an element found just
    before may be gone: looked up again."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout  # a wait for the page, not a timing assertion
    while time.monotonic() < deadline:
        try:
            value = check()
        except (StaleElementReferenceException, NoSuchElementException):
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_pause_and_resume_buttons_in_a_real_browser(source, target, unique, tmp_path, monkeypatch, api_server,
                                                    browser):
    from selenium.webdriver.common.by import By

    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    cfg, flow, _ = own_flow(tmp_path, source, target, unique, "btn")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))

    def log_in(user: str, role: str) -> None:
        browser.get(f"{api_server}/mirrorflow/api/flows")  # the cookie's origin
        browser.delete_all_cookies()
        token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=user, role=role))
        browser.add_cookie({"name": "_token", "value": token, "path": "/"})  # what Airflow's UI login sets
        browser.get(f"{api_server}/mirrorflow/")

    def card():
        return browser.find_element(By.CSS_SELECTOR, f'section[data-flow="{flow.name}"]')

    def shown(css: str) -> str:
        return card().find_element(By.CSS_SELECTOR, css).text

    def type_reason(text: str) -> bool:
        field = card().find_element(By.CSS_SELECTOR, ".control input")
        field.clear()
        field.send_keys(text)
        return True

    def stored() -> tuple[str, list[tuple[str, str, str, str]]]:
        with FlowClients(cfg, flow) as clients:
            return flow_state(clients).state, [(o.kind, o.by, o.via, o.reason) for o in read_history(clients)]

    log_in("vera", "viewer")
    assert card().find_elements(By.CSS_SELECTOR, ".control") == []  # a viewer gets no buttons

    log_in("ada", "admin")
    assert card().find_element(By.CSS_SELECTOR, ".control").get_attribute("data-flow-id") == flow.id
    _wait("the reason typed", lambda: type_reason("B upgrade"))
    _wait("the pause button", lambda: card().find_element(By.CSS_SELECTOR, 'button[data-action="pause"]').click()
          or True)
    answer = _wait("the pause's answer", lambda: "paused" in (t := shown('[data-k="control-result"]')) and t)
    assert answer.startswith(f"{flow.name}: paused by ada since ") and answer.endswith("(on the target): B upgrade")
    assert stored() == ("paused", [("pause", "ada", "status-page", "B upgrade")])
    # the page refreshes itself: the badge and the history line show the pause
    _wait("the paused badge", lambda: shown('[data-k="state"]') == "paused")
    history = _wait("the history", lambda: shown('[data-k="history"]'))
    assert history.startswith("pause ") and history.endswith(" by ada (status-page): B upgrade"), history
    attention = _wait("what needs attention",
                      lambda: browser.find_element(By.CSS_SELECTOR, '[data-k="attention"]').text)
    assert f"{flow.name}: The flow is not copying: it is paused by ada since " in attention

    # a reason being typed is still there after the next refresh (every 10 s)
    updated = browser.find_element(By.ID, "updated").text
    _wait("the reason typed", lambda: type_reason("upgrade done"))
    _wait("a refresh", lambda: browser.find_element(By.ID, "updated").text != updated, timeout=30)
    assert _wait("the reason", lambda: card().find_element(By.CSS_SELECTOR, ".control input").get_attribute("value")) \
        == "upgrade done"
    _wait("the resume button", lambda: card().find_element(By.CSS_SELECTOR, 'button[data-action="resume"]').click()
          or True)
    _wait("the resume's answer", lambda: "running" in shown('[data-k="control-result"]'))
    assert stored() == ("running", [("pause", "ada", "status-page", "B upgrade"),
                                    ("resume", "ada", "status-page", "upgrade done")])
