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
    assert '<div class="v" data-k="lag">3</div>' in page.text and "setInterval(refresh, 10000)" in page.text
    # what the page's auto-refresh fetches: the flows alone (served from the same cached read)
    fragment = client.get("/mirrorflow/?fragment=1", headers={"Authorization": f"Bearer {token}"})
    assert fragment.status_code == 200 and fragment.text.startswith('<section class="card"')
    assert '<div class="v" data-k="lag">3</div>' in fragment.text and "<html" not in fragment.text
    assert client.get("/mirrorflow/?fragment=1").status_code == 401


def _dead_port() -> int:
    from mirrorflow.dev.cluster import free_port

    return free_port()


def test_status_survives_a_deleted_source_topic_and_unreachable_clusters(source, target, unique, tmp_path):
    import subprocess
    import sys

    import yaml
    from confluent_kafka.admin import AdminClient

    kept, gone = unique("kept"), unique("gone")
    src, tgt = unique("SA"), unique("SB")
    for t in (kept, gone):
        create_topic(source, t)
        create_topic(target, f"{src}.{t}")
        produce(source, t, [{"partition": 0, "value": b"v%d" % i} for i in range(4)])
    flows = {f"{src}->{tgt}": {"topics": f"{kept}|{gone}", "heartbeats.replication.enabled": False}}
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target}, flows)
    flow = cfg.flow(f"{src}->{tgt}")
    assert run_once(cfg, flow, mode="direct").records == 8
    produce(source, kept, [{"partition": 0, "value": b"late"}])
    source_admin = AdminClient(source.client_config())
    for fut in source_admin.delete_topics([gone]).values():
        fut.result(30)

    # a deleted source topic: its partition says so, the others keep their exact lag
    st = status.flow_status(cfg, flow)
    assert st.error is None and st.source_error is None
    by_topic = {p.topic: p for p in st.partitions}
    assert (by_topic[kept].next, by_topic[kept].end, by_topic[kept].lag) == (4, 5, 1)
    assert (by_topic[gone].next, by_topic[gone].end, by_topic[gone].lag) == (4, -1, None)
    assert by_topic[gone].note == f"source topic {gone!r} partition 0 no longer exists"
    assert st.lag is None  # not a made-up number

    # the source unreachable (a lost region): progress still comes from the target
    raw = yaml.safe_load((tmp_path / "mf.yaml").read_text())
    raw["clusters"][src]["bootstrap.servers"] = f"127.0.0.1:{_dead_port()}"
    (tmp_path / "nosrc.yaml").write_text(yaml.safe_dump(raw))
    from mirrorflow import config as config_mod

    st = status.flow_status(config_mod.load(tmp_path / "nosrc.yaml"), flow)
    assert st.error is None and [p.next for p in st.partitions] == [4, 4]
    assert st.source_error.startswith(f"cluster {src!r}: cannot reach 127.0.0.1:")

    # the target unreachable: one clear line from the CLI, no traceback
    raw["clusters"][src]["bootstrap.servers"] = source.bootstrap_servers
    raw["clusters"][tgt]["bootstrap.servers"] = f"127.0.0.1:{_dead_port()}"
    (tmp_path / "notgt.yaml").write_text(yaml.safe_dump(raw))
    r = subprocess.run([sys.executable, "-m", "mirrorflow.cli", "--config", str(tmp_path / "notgt.yaml"), "status"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert f"{src}->{tgt}: enabled, exactly-once, ERROR: cluster {tgt!r}: cannot reach 127.0.0.1:" in r.stdout
