"""The status page in a real headless Chromium (Debian's `chromium` + `chromium-driver`, driven by
Selenium) against real clusters: Airflow's API server (uvicorn, this process) serves the plugin, the
browser is refused without a login, logs in with Airflow's JWT cookie, and the numbers it shows are
the flow's. The screenshot goes to the test's tmp_path, or to MIRRORFLOW_SCREENSHOT when set:
scripts/screenshot-status regenerates docs/status-page.png (README and docs/monitoring.md show it)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.replication.run.runner import run_once
from tests.browser_support import api_server, browser, log_in  # noqa: F401 - fixtures
from tests.support import create_topic, load_offset_map, produce, write_config

pytestmark = [pytest.mark.integration, pytest.mark.airflow]


def test_status_page_in_a_real_browser(source, target, unique, tmp_path, monkeypatch, api_server, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    topic = unique("orders")
    src, tgt = unique("SA"), unique("SB")  # aliases of its own: the flow's state holds only this test's
    create_topic(source, topic, partitions=2)
    create_topic(target, f"{src}.{topic}", partitions=2)
    now = int(time.time() * 1000)
    group = unique("billing")
    c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 9), TopicPartition(topic, 1, 12)], asynchronous=False)
    c.close()
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"topics": topic, "groups": group, "tasks.max": 2,
                                          "sync.group.offsets.enabled": True,
                                          "heartbeats.replication.enabled": False}})
    flow = cfg.flow(f"{src}->{tgt}")
    # three runs (30, 20, then 10 records): three points on the chart
    for n, count in enumerate((30, 20, 10)):
        produce(source, topic, [{"partition": i % 2, "key": b"k%d" % i, "value": b"v" * 100, "timestamp": now + i}
                                for i in range(count)])
        report = run_once(cfg, flow, mode="direct", directory=tmp_path / f"run{n}")
        assert report.ok and report.records == count
    assert emit_checkpoints(cfg, flow).errors == {}
    produce(source, topic, [{"partition": 1, "value": b"late", "timestamp": now + 100}] * 3)  # lag 3, not copied
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    browser.get(f"{api_server}/mirrorflow/")
    assert "Not authenticated" in browser.page_source  # no login, no page

    log_in(browser, api_server)
    browser.get(f"{api_server}/mirrorflow/")
    card = browser.find_element(By.CSS_SELECTOR, f'section[data-flow="{flow.name}"]')

    def shown(key: str) -> str:
        return card.find_element(By.CSS_SELECTOR, f'[data-k="{key}"]').text

    assert shown("state") == "running"
    assert shown("lag") == "3"
    assert shown("records") == "60"
    assert shown("lost") == "0"
    assert shown("last-run").endswith("ago, ok")
    assert shown("run-records").startswith("10 rec, ")
    assert shown("window").startswith("60 rec, ")
    assert shown("problems") == "No problems."
    assert card.find_element(By.CSS_SELECTOR, '[data-k="chart-lag"]').get_attribute("data-points") == "3"
    links = {a.text: a.get_attribute("href") for a in card.find_elements(By.CSS_SELECTOR, ".links a")}
    assert links["replicate"].endswith(f"/dags/mirrorflow_replicate__{flow.id}")

    # per-partition detail and the groups on demand
    card.find_element(By.CSS_SELECTOR, "details[id^=parts] summary").click()
    rows = [r.text for r in card.find_elements(By.CSS_SELECTOR, "details[id^=parts] tr")][1:]
    assert rows[0].startswith(f"{topic} 0 30 30 0 ") and rows[1].startswith(f"{topic} 1 30 33 3 "), rows
    card.find_element(By.CSS_SELECTOR, "details[id^=groups] summary").click()
    grows = [r.text for r in card.find_elements(By.CSS_SELECTOR, "details[id^=groups] tr")][1:]
    # where each group resumes on the target: the copy of its committed source offset, per the offset map
    maps = load_offset_map(cfg, flow, [(topic, 0), (topic, 1)])
    at = {p: maps[(topic, p)].target_of(o) for p, o in ((0, 9), (1, 12))}
    assert grows == [f"{group} {src}.{topic} 0 9 {at[0]} - missing write",
                     f"{group} {src}.{topic} 1 12 {at[1]} - missing write"]
    shot = Path(os.environ.get("MIRRORFLOW_SCREENSHOT") or tmp_path / "status-page.png")
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
