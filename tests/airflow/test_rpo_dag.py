"""The recovery point objective under Airflow (dag.test() of the checkpoint DAG, real clusters): the
copies stop (the flow is paused) while records arrive; a record younger than `rpo.seconds` keeps it
met, one older misses it: the user's notifier (a BaseNotifier of tests/airflow/rpo_notifier.py) is
told once, the run gets a note, the metric says 1 (Airflow's stats and the Prometheus exposition),
the status page shows the flow's line in red, `mirrorflow status` prints it; once resumed and copied
the objective is met again and the notifier is told that once. A notifier path that does not import
is the DAG file's import error, naming the property."""
from __future__ import annotations

import json
import os
import re
import time
import uuid

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.observe.status import flow_status
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import set_flow_state
from tests.support import create_topic, produce, write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_checkpoint.py")
NOTIFIER = "tests.airflow.rpo_notifier.ALERTS"


def ms() -> int:
    return int(time.time() * 1000)


def flows(prefix: str, src: str, tgt: str, notifier: str = NOTIFIER) -> dict:
    return {f"{src}->{tgt}": {"topics": f"{prefix}\\..*", "rpo.seconds": 60, "rpo.notifier": notifier,
                              "emit.heartbeats.enabled": False, "heartbeats.replication.enabled": False,
                              "state.topic.partitions": 1}}


def test_a_notifier_that_does_not_import_is_the_dag_files_error(tmp_path, source, target, airflow_db, monkeypatch):
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       flows("x", "A", "B", notifier="tests.airflow.no_such_module.ALERTS"))
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    [error] = DagBag(dag_folder=DAG_FILE).import_errors.values()
    assert "flows.A->B.rpo.notifier: 'tests.airflow.no_such_module.ALERTS' cannot be imported: No module named " \
           "'tests.airflow.no_such_module'" in error, error


def test_a_missed_rpo_is_told_once_shown_in_red_a_metric_and_met_again(tmp_path, source, target, airflow_db, unique,
                                                                      monkeypatch, capsys):
    tag = uuid.uuid4().hex[:6]
    src, tgt = f"RA{tag}", f"RB{tag}"  # aliases of its own: the test pauses its flow
    prefix = unique("rpo")
    topic, remote = f"{prefix}.orders", f"{src}.{prefix}.orders"
    alerts = tmp_path / "alerts.jsonl"
    monkeypatch.setenv("MIRRORFLOW_TEST_RPO_ALERTS", str(alerts))
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target}, flows(prefix, src, tgt))
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    flow = cfg.flow(f"{src}->{tgt}")
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.observability import stats

    from mirrorflow.cli import main
    from mirrorflow.observe.metrics import collect, prometheus_text
    from mirrorflow_airflow.status_html import render_flow
    from mirrorflow.observe.status_page import flow_page
    from mirrorflow_airflow.run_notes import RUN_NOTE_KEY

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag(f"mirrorflow_checkpoint__{flow.id}")
    sent: list[tuple] = []
    monkeypatch.setattr(stats, "gauge", lambda name, value=None, *a, **kw: sent.append((name, value)))

    def check():
        sent.clear()
        run = dag.test()
        ti = {t.task_id: t for t in run.get_task_instances()}["checkpoint"]
        assert ti.state == "success", ti.state
        return ti

    def told() -> list[dict]:
        return [json.loads(line) for line in alerts.read_text().splitlines()] if alerts.exists() else []

    create_topic(source, topic, 2)
    create_topic(target, remote, 2)
    produce(source, topic, [{"partition": p, "value": b"old", "timestamp": ms() - 3_600_000} for p in (0, 1)])
    assert run_once(cfg, flow, mode="direct").records == 2
    check()  # caught up: met, nobody told
    assert told() == [] and ("mirrorflow.flow-rpo-missed", 0) in sent
    assert ("mirrorflow.flow-rpo-objective-seconds", 60) in sent

    # the copies stop; a record 10 s old waits on partition 0 (the newest copied one is an hour old): met
    with FlowClients(cfg, flow) as clients:
        set_flow_state(clients, "paused", "maintenance", "test")
    produce(source, topic, [{"partition": 0, "value": b"young", "timestamp": ms() - 10_000}])
    check()
    assert told() == [] and ("mirrorflow.flow-rpo-missed", 0) in sent
    verdict = flow_status(cfg, flow).rpo
    assert verdict.state == "met" and 10 <= verdict.age_s < 60 and verdict.worst == f"{topic}[0]", verdict

    # one 90 s old on partition 1: missed; told once, with its templated text
    produced = ms()
    produce(source, topic, [{"partition": 1, "value": b"late", "timestamp": produced - 90_000}])
    ti = check()
    [alert] = told()
    line = re.fullmatch(rf"{re.escape(flow.name)}: (RPO 60 s missed: oldest unreplicated record (\d+) s old "
                        rf"\({re.escape(topic)}\[1\]\))", alert["text"])
    assert line and (alert["state"], alert["task"]) == ("missed", "checkpoint"), alert
    assert 90 <= int(line.group(2)) <= 90 + (ms() - produced) / 1000
    assert ti.xcom_pull(key=RUN_NOTE_KEY, task_ids="checkpoint") == f"{flow.name}: {line.group(1)}"
    assert ("mirrorflow.flow-rpo-missed", 1) in sent
    check()  # still missed: not told again
    assert len(told()) == 1 and ("mirrorflow.flow-rpo-missed", 1) in sent

    # the status page (the flow's line in red, first of its problems), the metrics, the CLI
    page = flow_page(cfg, flow)
    assert page.problems[0].startswith("RPO 60 s missed: oldest unreplicated record "), page.problems
    html = render_flow(page, lambda f: [])
    assert re.search(r'<p class="rpo missed" data-k="rpo">RPO 60 s missed: oldest unreplicated record \d+ s old '
                     rf"\({re.escape(topic)}\[1\]\)</p>", html), html[:2000]
    samples = {s.name: s.value for s in collect(cfg, [flow]) if s.name.startswith("mirrorflow_flow_rpo")}
    assert samples["mirrorflow_flow_rpo_missed"] == 1 and samples["mirrorflow_flow_rpo_objective_seconds"] == 60
    assert samples["mirrorflow_flow_rpo_age_seconds"] >= 90
    labels = f'flow="{flow.name}",source="{src}",target="{tgt}"'
    assert f"mirrorflow_flow_rpo_missed{{{labels}}} 1.0" in prometheus_text(collect(cfg, [flow])).decode()
    capsys.readouterr()
    main(["--config", str(cfg.path), "status", "--flow", flow.name])
    out = capsys.readouterr().out
    assert re.search(rf"^  RPO 60 s missed: oldest unreplicated record \d+ s old \({re.escape(topic)}\[1\]\)$",
                     out, re.M), out

    # resumed and copied: met again, told that once
    with FlowClients(cfg, flow) as clients:
        set_flow_state(clients, "running", "", "test")
    assert run_once(cfg, flow, mode="direct").records == 2
    check()
    assert [(a["state"], a["text"]) for a in told()[1:]] == [
        ("met", f"{flow.name}: RPO 60 s met: nothing waits to be replicated")]
    assert ("mirrorflow.flow-rpo-missed", 0) in sent
