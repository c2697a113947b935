"""The translate DAG (issue 40 item 2's Airflow door): Spark's startingOffsets of a consumer outside
groups, given in the Params form, translated to the target exactly as `mirrorflow translate --offsets`
does (the same core function), recorded in the operations history with the triggering user, which is
the status page's line; bad input fails the task naming the topic. Real brokers, dag.test()."""

from __future__ import annotations

import json
import os

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.observe.status_page import flow_page
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.history import read_history
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_translate.py")


def test_translate_dag_gives_starting_offsets_on_the_target(tmp_path, source, target, airflow_db, unique,
                                                            monkeypatch):
    pfx = unique("trdag")
    topic = f"{pfx}.orders"
    cfg = write_config(tmp_path / "mf.yaml", {"XA": source, "XB": target}, {"XA->XB": {
        "topics": f"{pfx}\\..*", "state.topic.partitions": 2, "heartbeats.replication.enabled": False}})
    flow = cfg.flow("XA->XB")
    create_topic(source, topic, 2)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(40, 2))
    assert run_once(cfg, flow, mode="direct").records == 40
    on_b = {(r.partition, r.value): r.offset for r in consume_all(target, f"XA.{topic}")}
    src = {(r.partition, r.offset): r.value for r in consume_all(source, topic)}

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_translate__XA-XB")
    assert type(dag.timetable).__name__ == "NullTimetable" and set(dag.params.keys()) == {"offsets"}

    run = dag.test(run_conf={"offsets": {topic: {"0": 7, "1": 12}}})
    ti = run.get_task_instances()[0]
    assert ti.state == "success"
    out = ti.xcom_pull(task_ids="translate")
    # the target offsets where the next unread source records landed
    want = {f"XA.{topic}": {"0": on_b[(0, src[(0, 7)])], "1": on_b[(1, src[(1, 12)])]}}
    assert out["starting_offsets"] == want and {p["status"] for p in out["partitions"]} == {"exact"}
    # the same answer as the CLI's (one core function)
    cli_out = json.loads(cli(cfg, "translate", "--flow", "XA->XB", "--offsets",
                             json.dumps({topic: {"0": 7, "1": 12}}), "--json").stdout)
    assert cli_out["starting_offsets"] == want
    with FlowClients(cfg, flow) as clients:
        lines = [r for r in read_history(clients) if r.kind == "translate"]
    assert [(r.by, r.via, r.figures) for r in lines] == [
        ("dag_test", "airflow", {"partitions": 2, "exact": 2}), (lines[1].by, "cli", {"partitions": 2, "exact": 2})]
    assert lines[0].summary == f"offsets outside consumer groups translated for startingOffsets on 'XB': 2 exact"
    page = flow_page(cfg, flow)
    assert any(o.kind == "translate" and o.by == "dag_test" for o in page.operations)  # the status page's line

    run = dag.test(run_conf={"offsets": {"other.topic": {"0": 1}}})
    assert run.get_task_instances()[0].state == "failed"
