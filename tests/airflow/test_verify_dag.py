"""The verify DAG: a Params form (topics, from, to, since_last, record) over the core verify, run with
dag.test(); the task succeeds on a match (recording how far it verified) and fails on a mismatch
found since that verify, with the report in its XCom."""

from __future__ import annotations

import os

import pytest

from mirrorflow.replication.run.runner import run_once
from tests.integration.replicate_helpers import make_flow, mirror_topic
from tests.integration.test_replicate import NOW, records
from tests.support import produce

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_verify.py")


def test_verify_dag_passes_on_a_match_and_fails_on_a_mismatch(tmp_path, source, target, airflow_db, unique,
                                                               monkeypatch):
    pfx = unique("vdag")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 2)
    produce(source, t, records(40, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 40

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_verify__A-B")
    assert type(dag.timetable).__name__ == "NullTimetable"  # manual trigger only
    assert set(dag.params.keys()) == {"topics", "from", "to", "since_last", "record"}
    assert dag.params["from"] == "earliest" and dag.params["to"] == "latest"
    assert dag.params["since_last"] is False and dag.params["record"] is False

    run = dag.test(run_conf={"topics": f"{pfx}\\..*", "record": True})
    ti = run.get_task_instances()[0]
    assert ti.state == "success"
    out = ti.xcom_pull(task_ids="verify", key="report")
    assert out["ok"] is True and out["matched"] == 40 and [p["matched"] for p in out["partitions"]] == [20, 20]
    assert out["recorded"] == 2 and [p["verified_to"] for p in out["partitions"]] == [20, 20]

    # a record written into the remote topic by hand, then a copy after it: the DAG run fails
    produce(target, remote, [{"partition": 1, "key": b"k", "value": b"by hand", "timestamp": NOW}])
    produce(source, t, records(4, 2, seed="more"))
    assert run_once(cfg, flow, mode="direct").records == 4
    run = dag.test(run_conf={"since_last": True})  # only what was copied since the recorded verify
    ti = run.get_task_instances()[0]
    assert ti.state == "failed"
    out = ti.xcom_pull(task_ids="verify", key="report")
    assert out["ok"] is False and out["mismatched_partitions"] == 1 and out["from"] == "the last verify"
    p0, p1 = out["partitions"]
    assert (p0["ok"], p0["since"], p0["matched"], p0["verified_to"]) == (True, 20, 2, 22)
    assert p1["counts"] == {"extra": 1} and p1["first_mismatch"]["kind"] == "extra" and p1["matched"] == 2
    assert (p1["since"], p1["verified_to"]) == (20, None)
