"""Browser-test fixtures: Airflow's API server (UI, REST API, plugins) in a thread of the test process on
the test's Airflow DB, and a headless Debian Chromium driven by Selenium, logged in the way Airflow's UI
login does (the `_token` JWT cookie). Import the fixtures into a test module to use them."""
from __future__ import annotations

import shutil
import threading
import time

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@pytest.fixture
def api_server(airflow_db, monkeypatch):
    """Airflow's API app (with the plugins) on a free port, in a thread of this process."""
    import uvicorn
    from airflow.configuration import conf

    if not conf.get("api_auth", "jwt_secret", fallback=""):
        # the server refuses to start without one; 64 bytes: PyJWT warns about shorter SHA-512 keys
        monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "mirrorflow-browser-test-" + "0" * 40)

    from airflow.api_fastapi.app import create_app

    from mirrorflow_dev.processes import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(300):  # startup, not a timing assertion
        if server.started:
            break
        time.sleep(0.1)
    assert server.started, "the Airflow API server did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


@pytest.fixture
def browser():
    pytest.importorskip("selenium", reason="selenium is not installed (requirements.txt; scripts/bootstrap)")
    if not CHROMIUM or not DRIVER:
        pytest.skip("Debian's chromium and chromium-driver are not installed (scripts/bootstrap installs them "
                    "with apt-get when run as root)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--force-prefers-reduced-motion", "--blink-settings=preferredColorScheme=1"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield driver
    driver.quit()


def admin_token() -> str:
    """A JWT for Airflow's simple auth manager's admin (what its login page issues)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))


def log_in_with_password(browser, base_url: str, user: str, password: str) -> None:
    """Sign in through Airflow's login page (the simple auth manager's form), as a person does."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 120)  # a loaded machine's UI, not a timing assertion
    browser.get(base_url + "/")
    wait.until(ec.element_to_be_clickable((By.NAME, "username"))).send_keys(user)
    browser.find_element(By.NAME, "password").send_keys(password)
    browser.find_element(By.CSS_SELECTOR, 'button[type="submit"]').click()
    wait.until(lambda d: any(c["name"] == "_token" for c in d.get_cookies()))


def log_in(browser, base_url: str) -> str:
    """Log the browser in as admin (the cookie Airflow's UI login sets); returns the token."""
    token = admin_token()
    browser.get(f"{base_url}/api/v2/version")  # a page of the server's origin before its cookie can be set
    browser.add_cookie({"name": "_token", "value": token, "path": "/"})
    return token
