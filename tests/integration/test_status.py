"""The status page: per-partition lag from the target's state topics, behind an Airflow login."""
from __future__ import annotations

import pytest

from mirrorflow.ops import status
from mirrorflow.replication.runner import run_once
from tests.support import create_topic, produce, write_config

pytestmark = pytest.mark.integration


def test_flow_status_and_status_page(source, target, unique, tmp_path, monkeypatch, airflow_db):
    topic = unique("status")
    create_topic(source, topic, partitions=2)
    # aliases of its own, so the flow's state topics hold only this test's progress
    src, tgt = unique("SA"), unique("SB")
    create_topic(target, f"{src}.{topic}", partitions=2)
    produce(source, topic, [{"partition": i % 2, "key": b"k", "value": b"v%d" % i} for i in range(10)])
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"topics": topic, "tasks.max": 2, "heartbeats.replication.enabled": False}})
    flow = cfg.flow(f"{src}->{tgt}")
    (tmp_path / "run").mkdir()
    run_once(cfg, flow, mode="direct", directory=tmp_path / "run")
    produce(source, topic, [{"partition": 1, "value": b"late"}] * 3)  # not yet copied: lag 3 on partition 1

    st = status.flow_status(cfg, flow)
    assert st.error is None
    assert [(p.topic, p.partition, p.next, p.end, p.lag, p.records) for p in st.partitions] == [
        (topic, 0, 5, 5, 0, 5), (topic, 1, 5, 8, 3, 5)]
    assert st.lag == 3 and st.records == 10
    text = status.render_text([st])
    assert f"{topic}-1: next 5, end 8, lag 3" in text

    # the plugin page, served by Airflow's own API app: refused without a login, right with one
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(tmp_path / "mf.yaml"))
    from fastapi.testclient import TestClient

    from airflow.api_fastapi.app import create_app
    client = TestClient(create_app())
    assert client.get("/mirrorflow/api/flows").status_code == 401
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.api_fastapi.app import get_auth_manager
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    resp = client.get("/mirrorflow/api/flows", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200
    [flow_json] = resp.json()
    assert flow_json["flow"] == f"{src}->{tgt}" and flow_json["lag"] == 3 and flow_json["records"] == 10
    page = client.get("/mirrorflow/", headers={"Authorization": f"Bearer {token}"})
    assert page.status_code == 200 and f"<td>{topic}</td><td>1</td><td>5</td><td>8</td><td>3</td>" in page.text
