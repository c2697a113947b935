"""The backfill DAG: a Params form (topics, from, to, dry run) refusing bad WHEN values in the form,
and dag.test() runs that dry-run, then copy the history of a flow started at `latest` through
spark-submit, exactly once."""
from __future__ import annotations

import os

import pytest

from mirrorflow.replication.run.runner import run_once
from tests.integration.test_backfill import assert_each_once_via_map
from tests.integration.test_replicate import records
from tests.support import consume_all, create_topic, produce, read_progress, write_config

pytestmark = pytest.mark.airflow

DAG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "mirrorflow_backfill.py")


def test_backfill_dag_params_and_copy(tmp_path, source, target, airflow_db, unique, monkeypatch):
    from airflow.sdk.exceptions import ParamValidationError

    pfx = unique("bfdag")
    t, remote = f"{pfx}.orders", f"KD.{pfx}.orders"
    create_topic(source, t, 2)
    create_topic(target, remote, 2)
    produce(source, t, records(30, 2))
    cfg = write_config(tmp_path / "mf.yaml", {"KD": source, "B": target},
                       {"KD->B": {"topics": f"{pfx}.*", "tasks.max": 2, "state.topic.partitions": 2,
                                  "heartbeats.replication.enabled": False, "initial.position": "latest",
                                  "state.namespace": pfx}})
    flow = cfg.flow("KD->B")
    assert run_once(cfg, flow, mode="direct").records == 0
    produce(source, t, records(6, 2, seed="live"))
    assert run_once(cfg, flow, mode="direct").records == 6

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAG_FILE)
    assert bag.import_errors == {}
    dag = bag.get_dag("mirrorflow_backfill__KD-B")
    assert type(dag.timetable).__name__ == "NullTimetable"  # manual trigger only
    assert set(dag.params.keys()) == {"topics", "from", "to", "dry_run"}
    for name in ("topics", "from", "to", "dry_run"):
        p = dag.params.get_param(name)
        assert p.schema.get("title") and p.description and f"(`{name}`" in dag.doc_md
    assert set(dag.task_ids) == {"plan", "copy", "report"}

    # bad values are refused by the form's schema, before any task runs
    for conf in ({"from": "yesterday"}, {"to": "offset:-1"}, {"from": "2026-01-01T00:00:00"}, {"topics": "("}):
        with pytest.raises(ParamValidationError, match=f"param {next(iter(conf))}"):
            dag.test(run_conf=conf)

    before = read_progress(cfg, flow)
    run = dag.test(run_conf={"from": "earliest", "to": "start", "dry_run": True})
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert tis["plan"].state == "success" and tis["copy"].state == "skipped" and tis["report"].state == "success"
    out = tis["report"].xcom_pull(task_ids="report")
    assert out["dry_run"] and out["offsets"] == 30 and out["records"] == 0
    assert [(p["partition"], p["start"], p["end"], p["offsets"]) for p in out["partitions"]] == [(0, 0, 15, 15),
                                                                                                (1, 0, 15, 15)]
    assert read_progress(cfg, flow) == before and len(consume_all(target, remote)) == 6

    run = dag.test(run_conf={"from": "earliest", "to": "start", "dry_run": False})
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert {k: ti.state for k, ti in tis.items()} == {"plan": "success", "copy": "success", "report": "success"}
    out = tis["report"].xcom_pull(task_ids="report")
    assert out["ok"] and out["records"] == 30 and not out["dry_run"]
    assert_each_once_via_map(cfg, flow, source, target, t, remote, 2)

    # again: nothing to copy (the copy is skipped), nothing written
    run = dag.test(run_conf={"from": "earliest", "to": "latest", "dry_run": False})
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert tis["copy"].state == "skipped" and tis["report"].xcom_pull(task_ids="report")["records"] == 0
    assert len(consume_all(target, remote)) == 36


class FakeRun:
    def __init__(self, run_type: str) -> None:
        self.run_type = run_type


def test_airflow_backfill_interval_of_a_replicate_run():
    from datetime import UTC, datetime

    from mirrorflow_airflow.dag_builders.replicate import airflow_backfill_interval

    a, b = datetime(2026, 1, 1, 10, 0, tzinfo=UTC), datetime(2026, 1, 1, 10, 10, tzinfo=UTC)
    ms = int(a.timestamp() * 1000), int(b.timestamp() * 1000)
    assert airflow_backfill_interval(FakeRun("backfill"), a, b, "*/10 * * * *") == ms
    # a cron trigger schedule: empty interval, the run stands for the period since the previous fire time
    assert airflow_backfill_interval(FakeRun("backfill"), b, b, "*/10 * * * *") == ms
    assert airflow_backfill_interval(FakeRun("scheduled"), a, b, "*/10 * * * *") is None
    assert airflow_backfill_interval(FakeRun("manual"), a, b, None) is None
    assert airflow_backfill_interval(FakeRun("backfill"), b, b, None) is None


def test_replicate_runs_of_an_airflow_backfill_copy_their_intervals_records(tmp_path, source, target, airflow_db,
                                                                             unique, monkeypatch):
    """What a run of `airflow backfill create` over three past data intervals does in the replicate
    DAG's plan -> copy -> report (the copy in threads instead of spark-submit)."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.replication.executors.handoff import publish_results
    from mirrorflow.replication.plan.run_plan import Plan
    from mirrorflow.replication.run.runner import copy_direct
    from mirrorflow_airflow.dag_builders.replicate import plan_task, report_task
    from tests.integration.test_replicate import NOW

    pfx = unique("bfint")
    t, remote = f"{pfx}.clicks", f"KI.{pfx}.clicks"
    create_topic(source, t, 1)
    create_topic(target, remote, 1)
    produce(source, t, records(40, 1))  # timestamps NOW + 10 * i
    cfg = write_config(tmp_path / "mf.yaml", {"KI": source, "B": target},
                       {"KI->B": {"topics": f"{pfx}.*", "state.topic.partitions": 2, "schedule": "*/10 * * * *",
                                  "heartbeats.replication.enabled": False, "initial.position": "latest",
                                  "state.namespace": pfx}})
    flow = cfg.flow("KI->B")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    monkeypatch.setenv("MIRRORFLOW_RUN_DIR", str(tmp_path / "runs"))
    assert run_once(cfg, flow, mode="direct").records == 0
    live = [{"partition": 0, "value": f"live-{i}".encode(), "timestamp": NOW + 100_000 + i} for i in range(5)]
    produce(source, t, live)
    assert run_once(cfg, flow, mode="direct").records == 5

    def airflow_run(run_id: str, interval: tuple[int, int]) -> dict:
        paths = plan_task(flow.name, run_id, str(cfg.path), {}, interval)
        plan = Plan.decode(paths["plan"])
        if paths["units"]:  # the copy task's part: copy, hand the results back through the target
            with FlowClients(cfg, flow) as clients:
                publish_results(clients, plan, copy_direct(cfg, flow, plan))
        return report_task(flow.name, paths, None, str(cfg.path))

    for i in range(3):
        out = airflow_run(f"backfill__{i}", (NOW + 100 * i, NOW + 100 * (i + 1)))
        assert out["records"] == 10, out
    src = consume_all(source, t)
    dst = consume_all(target, remote)
    assert [r.content() for r in dst] == [r.content() for r in src[40:] + src[:30]]
    # the interval of the live records: already in the ledger, nothing copied; a rerun copies nothing
    assert airflow_run("backfill__live", (NOW + 100_000, NOW + 200_000))["records"] == 0
    assert airflow_run("backfill__0_again", (NOW, NOW + 100))["records"] == 0
    assert len(consume_all(target, remote)) == 35
    assert read_progress(cfg, flow)[(t, 0)].covered == ((0, 30), (40, 45))


def test_a_backfill_run_waits_for_the_flows_lease(tmp_path, source, target, unique, monkeypatch):
    """Airflow starts a backfill's runs side by side and beside scheduled runs: a run of `airflow
    backfill create` waits for the lease another run holds (a skipped run would show "success" with
    its interval never copied), on the triggerer, and fails naming the holder once it has waited
    long enough."""
    import threading

    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from mirrorflow.clients import FlowClients
    from mirrorflow.replication.run.runner import take_lease
    from mirrorflow.replication.run.run import ReplicationRun
    from mirrorflow.state.lease import current_holder
    from mirrorflow_airflow.dag_builders import replicate
    from mirrorflow_airflow.triggers.run_wait import LEASE
    from tests.airflow.deferral_support import until_done
    from tests.integration.test_replicate import NOW

    pfx = unique("bflease")
    create_topic(source, f"{pfx}.t", 1)
    cfg = write_config(tmp_path / "mf.yaml", {"KL": source, "B": target},
                       {"KL->B": {"topics": f"{pfx}.*", "state.topic.partitions": 1, "schedule": "0 * * * *",
                                  "heartbeats.replication.enabled": False, "lease.timeout.seconds": 60}})
    flow = cfg.flow("KL->B")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    with FlowClients(cfg, flow) as clients:
        other = take_lease(clients, "scheduled-run", "another run of the DAG")
        threading.Timer(3.0, other.release).start()
        planned, waits = until_done(replicate.plan_task, flow.name, "backfill__w", str(cfg.path), {}, (NOW, NOW + 100))
        assert [w.what for w in waits] == [LEASE]  # it waited on the triggerer, not in its task
        holder = current_holder(clients)
        assert holder is not None and holder.owner == "airflow:mirrorflow_replicate__KL-B:backfill__w"
        assert planned["units"] == 0  # the plan went on once the lease was free
        with pytest.raises(AirflowSkipException, match="is being replicated by Airflow DAG run "
                           "mirrorflow_replicate__KL-B / backfill__w"):  # a run that does not wait: skipped
            replicate.plan_task(flow.name, "scheduled__y", str(cfg.path), {}, None)
        ReplicationRun.from_handoff(cfg, planned["plan"]).release_lease(clients)
        take_lease(clients, "scheduled-run", "another run of the DAG")  # held until it expires: 60 s
    monkeypatch.setattr(replicate, "BACKFILL_LEASE_WAIT_S", 1.0)
    with pytest.raises(AirflowFailException, match=r"another run of the DAG.*--reprocess-behavior failed"):
        until_done(replicate.plan_task, flow.name, "backfill__x", str(cfg.path), {}, (NOW, NOW + 100))


def test_a_wait_on_the_triggerer_looks_first_after_it_settled(monkeypatch):
    """The task looked just before it deferred; its trigger looks first SETTLE_S later (or at its deadline).
    A lease freed a second after a backfill run's task deferred resumed it within 4 s, before the scheduler
    took in the executor's "success" of the attempt that deferred: Airflow then fails the resumed attempt
    (apache/airflow#72716; a full run, 2026-12-01)."""
    import asyncio
    import time

    from mirrorflow_airflow.triggers import run_wait

    looked: list[float] = []

    class Free(run_wait.RunWaitTrigger):
        def missing(self) -> str:  # nothing to wait for
            looked.append(time.monotonic())
            return ""

    async def event(trigger) -> dict:
        async for e in trigger.run():
            return e.payload

    monkeypatch.setattr(run_wait, "SETTLE_S", 1.5)
    began = time.monotonic()
    assert asyncio.run(event(Free("F->B", None, run_wait.LEASE, "me", time.time() + 60))) == {"ready": True, "why": ""}
    assert len(looked) == 1 and looked[0] - began >= 1.5
    began = time.monotonic()  # a deadline before the settle time: looked at once there
    assert asyncio.run(event(Free("F->B", None, run_wait.LEASE, "me", time.time() + 0.5)))["ready"]
    assert 0.4 <= looked[1] - began


class Via:
    """A test cluster as clients reach it through `port` (its bootstrap; the brokers it advertises after)."""

    def __init__(self, cluster, port: int) -> None:
        self.cluster, self.port = cluster, port

    def client_config(self) -> dict:
        return {**self.cluster.client_config(), "bootstrap.servers": f"127.0.0.1:{self.port}"}


def test_a_run_waits_for_a_cluster_that_does_not_answer_on_the_triggerer(tmp_path, source, target, unique,
                                                                        monkeypatch):
    """A replicate run whose target does not answer as it starts (every connection refused) waits for
    it on the triggerer, not in its task, and begins once it answers; a cluster that stays away past
    broker.outage.max.seconds fails the run naming it."""
    import threading

    from airflow.sdk.exceptions import AirflowFailException

    from mirrorflow.clients import FlowClients
    from mirrorflow.replication.run.run import ReplicationRun
    from mirrorflow_airflow.dag_builders import replicate
    from mirrorflow_airflow.triggers.run_wait import CLUSTERS
    from tests.airflow.deferral_support import until_done
    from tests.fault_proxy import FaultProxy

    pfx = unique("cwait")
    create_topic(source, f"{pfx}.t", 1)
    proxy = FaultProxy("target").start(int(target.bootstrap_servers.split(",")[0].rsplit(":", 1)[1]))
    try:
        proxy.resetting(True)  # the target's bootstrap refuses every connection
        cfg = write_config(tmp_path / "mf.yaml", {"KW": source, "B": Via(target, proxy.port)},
                           {"KW->B": {"topics": f"{pfx}.*", "state.topic.partitions": 1,
                                      "heartbeats.replication.enabled": False, "broker.outage.max.seconds": 60}})
        flow = cfg.flow("KW->B")
        monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
        back = lambda trigger: threading.Timer(3.0, proxy.heal).start()  # noqa: E731 - while the run waits
        planned, waits = until_done(replicate.plan_task, flow.name, "scheduled__cw", str(cfg.path), {}, None,
                                    on_wait=back)
        assert [w.what for w in waits] == [CLUSTERS], waits
        assert planned["units"] == 0 and planned["run"].startswith("scheduled__cw")
        with FlowClients(cfg, flow) as clients:
            ReplicationRun.from_handoff(cfg, planned["plan"]).release_lease(clients)

        proxy.resetting(True)  # away for longer than the bound: the run fails naming the cluster
        raw = cfg.path.read_text().replace("broker.outage.max.seconds: 60", "broker.outage.max.seconds: 1")
        cfg.path.write_text(raw)
        with pytest.raises(AirflowFailException, match=r"flow KW->B: cluster 'B': .*\(waited broker\.outage\.max"
                                                        r"\.seconds, 1 s\)"):
            until_done(replicate.plan_task, flow.name, "scheduled__cx", str(cfg.path), {}, None)
    finally:
        proxy.close()
