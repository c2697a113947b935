"""The status page: per-partition lag from the target's state topics, behind an Airflow login."""
from __future__ import annotations

import re

import pytest

from mirrorflow.observe import status
from mirrorflow.replication.run.runner import run_once
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
    from mirrorflow_dev.processes import free_port

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


def own_flow(tmp_path, source, target, unique, prefix: str):
    """A flow of one new topic between aliases of its own (its state holds only this test's), and
    the topic's name."""
    topic = unique(prefix)
    create_topic(source, topic)
    src, tgt = unique("SA"), unique("SB")
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"topics": topic, "heartbeats.replication.enabled": False}})
    return cfg, cfg.flow(f"{src}->{tgt}"), topic


def test_pause_and_resume_buttons_for_an_admin_refused_for_a_viewer(source, target, unique, tmp_path, monkeypatch,
                                                                    airflow_db):
    from fastapi.testclient import TestClient

    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from mirrorflow.clients import FlowClients
    from mirrorflow.state.flow_state import flow_state
    from mirrorflow.state.history import read_history

    cfg, flow, _ = own_flow(tmp_path, source, target, unique, "ctl")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    client = TestClient(create_app())

    def auth(user: str, role: str) -> dict:
        token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=user, role=role))
        return {"Authorization": f"Bearer {token}"}

    def state_and_history() -> tuple[str, list[tuple[str, str, str, str]]]:
        with FlowClients(cfg, flow) as clients:
            return flow_state(clients).state, [(o.kind, o.by, o.via, o.reason) for o in read_history(clients)]

    url = f"/mirrorflow/api/flows/{flow.id}/control"
    # a viewer sees the page without the buttons, and is refused: nothing changes on the target
    page = client.get("/mirrorflow/", headers=auth("vera", "viewer"))
    assert page.status_code == 200 and 'class="control"' not in page.text
    refused = client.post(url, json={"action": "stop", "reason": "not mine to stop"}, headers=auth("vera", "viewer"))
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"] == f"user 'vera' may not trigger mirrorflow_control__{flow.id}"
    assert client.post(url, json={"action": "stop"}).status_code == 401  # no login at all
    assert state_and_history() == ("running", [])

    # an admin sees the buttons; a pause is recorded with the Airflow user's name
    page = client.get("/mirrorflow/", headers=auth("ada", "admin"))
    assert f'<div class="control" data-flow-id="{flow.id}">' in page.text
    ok = client.post(url, json={"action": "pause", "reason": "B upgrade"}, headers=auth("ada", "admin"))
    assert ok.status_code == 200, ok.text
    assert (ok.json()["state"], ok.json()["by"]) == ("paused", "ada")
    assert state_and_history() == ("paused", [("pause", "ada", "status-page", "B upgrade")])
    # the page shows it at once (the cache is dropped): needs attention first, the history line
    page = client.get("/mirrorflow/?fragment=1", headers=auth("ada", "admin")).text
    assert page.startswith('<div class="attn" data-k="attention"><h2>Needs attention</h2>')
    assert '<span class="badge paused" data-k="state">paused</span>' in page
    assert re.search(r"<li><b>pause</b> \d+ s ago by ada \(status-page\): B upgrade</li>", page), page
    assert "The flow is not copying: it is paused by ada since " in page
    # a bad action is refused before anything is written; an unknown flow is a 404
    assert client.post(url, json={"action": "delete"}, headers=auth("ada", "admin")).status_code == 422
    assert client.post("/mirrorflow/api/flows/X-Y/control", json={"action": "stop"},
                       headers=auth("ada", "admin")).status_code == 404
    ok = client.post(url, json={"action": "resume", "reason": None}, headers=auth("ada", "admin"))
    assert ok.status_code == 200 and ok.json()["state"] == "running"
    assert state_and_history() == ("running", [("pause", "ada", "status-page", "B upgrade"),
                                               ("resume", "ada", "status-page", "")])


def test_every_checkpoint_pass_is_on_the_page_also_one_that_moved_no_group(source, target, unique, tmp_path):
    from mirrorflow.groups.checkpoint import emit_checkpoints
    from mirrorflow.observe.status_page import flow_page
    from mirrorflow_airflow import status_html

    cfg, flow, topic = own_flow(tmp_path, source, target, unique, "cpass")
    create_topic(target, f"{flow.source}.{topic}")
    produce(source, topic, [{"partition": 0, "value": b"v"}] * 3)
    assert run_once(cfg, flow, mode="direct").records == 3
    # no consumer group: the passes emit nothing, and still they are what "last checkpoint pass" means
    assert emit_checkpoints(cfg, flow).emitted == []
    page = flow_page(cfg, flow)
    assert page.last_checkpoint is not None and page.last_checkpoint_written is None
    assert page.last_checkpoint.ok and page.now_ms - page.last_checkpoint.at < 60_000
    html = status_html.render_flow(page, lambda f: [])
    assert re.search(r"Consumer groups \(0; last checkpoint pass \d+ s ago\)", html)


def test_the_page_and_its_api_show_a_user_only_the_flows_whose_dags_they_may_read(source, target, unique, tmp_path,
                                                                                 monkeypatch, airflow_db):
    """Airflow's teams own DAG bundles, and the auth manager lets a team's users read only their
    bundles' DAGs: the status page and GET /api/flows show each user only the flows one of whose DAGs
    they may read (their topics, groups and operators are no one else's business). A flow whose DAGs
    belong to no team is everyone's, as in Airflow's own DAG list."""
    import html

    from fastapi.testclient import TestClient

    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.models.dag import DagModel
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.team import Team
    from airflow.utils.session import create_session

    topic = unique("teams")
    create_topic(source, topic)
    aliases = {name: (unique(f"{name}A"), unique(f"{name}B")) for name in ("red", "blue", "open")}
    clusters = {a: c for a, b in aliases.values() for a, c in ((a, source), (b, target))}
    flows = {f"{a}->{b}": {"topics": topic, "heartbeats.replication.enabled": False} for a, b in aliases.values()}
    cfg = write_config(tmp_path / "mf.yaml", clusters, flows)
    ids = {name: f"{a}-{b}" for name, (a, b) in aliases.items()}
    teams = {name: unique(name) for name in ("red", "blue")}
    with create_session() as session:  # what the dag processor records for bundles owned by teams
        for name in ("red", "blue"):
            team = Team(name=teams[name])
            bundle = DagBundleModel(name=unique(f"{name}-bundle"))
            bundle.teams = [team]
            session.add_all([team, bundle])
            session.flush()
            for kind in ("replicate", "control"):
                session.add(DagModel(dag_id=f"mirrorflow_{kind}__{ids[name]}", bundle_name=bundle.name,
                                     fileloc=f"/dags/mirrorflow_{kind}.py"))
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    client = TestClient(create_app())

    def seen(user: SimpleAuthManagerUser) -> tuple[list[str], str]:
        token = {"Authorization": f"Bearer {get_auth_manager().generate_jwt(user)}"}
        listed = client.get("/mirrorflow/api/flows", headers=token)
        page = client.get("/mirrorflow/?fragment=1", headers=token)
        assert listed.status_code == page.status_code == 200, (listed.text, page.text)
        return sorted(f["flow"] for f in listed.json()), page.text

    names = {name: f"{a}->{b}" for name, (a, b) in aliases.items()}
    shown = {name: html.escape(n) for name, n in names.items()}  # as the page writes them
    rita = SimpleAuthManagerUser(username="rita", role="viewer", teams=[teams["red"]])
    listed, page = seen(rita)
    assert listed == sorted([names["red"], names["open"]]), listed
    assert shown["red"] in page and shown["open"] in page and shown["blue"] not in page, page
    listed, page = seen(SimpleAuthManagerUser(username="vera", role="viewer"))
    assert listed == [names["open"]] and shown["red"] not in page and shown["blue"] not in page
    assert seen(SimpleAuthManagerUser(username="ada", role="admin"))[0] == sorted(names.values())
