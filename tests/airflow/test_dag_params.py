"""The trigger-form Params of every generated DAG: the defaults make a valid run (reseed's topic
excepted: required), a bad value is refused when the run is created (ParamValidationError from the
Param schema, no task runs), and a good value changes what the run does (replicate's topics subset
and per-partition cap, dry runs, sync's `only`, checkpoint's `groups` and `sync_group_offsets`)."""
from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.replicate_helpers import mirror_topic, target_offset_of
from tests.support import admin, consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow

DAGS = os.path.join(os.path.dirname(__file__), "..", "..", "dags")
NOW = int(time.time() * 1000) - 60_000


@pytest.fixture
def bag(tmp_path, source, target, airflow_db, unique, monkeypatch):
    prefix = unique("params")
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": f"{prefix}\\..*", "state.topic.partitions": 1,
                                 "sync.group.offsets.enabled": True, "heartbeats.replication.enabled": False,
                                 "emit.heartbeats.interval.seconds": 30, "emit.checkpoints.interval.seconds": 30}})
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    monkeypatch.setenv("MIRRORFLOW_RUN_DIR", str(tmp_path / "runs"))
    from airflow.dag_processing.dagbag import DagBag

    dags = DagBag(dag_folder=DAGS)
    assert dags.import_errors == {}
    return cfg, prefix, dags


BAD = {
    "mirrorflow_replicate__A-B": [{"topics": "orders("}, {"max_records_per_partition": 0},
                                  {"max_records_per_partition": "ten"}, {"dry_run": "yes"}],
    "mirrorflow_sync__A-B": [{"only": ["topics", "tables"]}, {"only": []}, {"dry_run": 1}],
    "mirrorflow_checkpoint__A-B": [{"groups": "[g"}, {"sync_group_offsets": "no"}],
    "mirrorflow_failover__A-B": [{"mode": "soon"}, {"groups": "(("}],
    "mirrorflow_failback__A-B": [{"dry_run": "yes"}],
    "mirrorflow_verify__A-B": [{"topics": "*x"}],
    "mirrorflow_reseed__A-B": [{"topic": ""}],
    "mirrorflow_takeover__A-B": [{"mm2_quiet_seconds": -1}, {"dry_run": "no"}],
    "mirrorflow_backfill__A-B": [{"topics": "a)"}, {"from": "yesterday"}],
    "mirrorflow_drill__A-B": [{"groups": "(("}, {"shadow_suffix": ""}],
    "mirrorflow_translate__A-B": [{"offsets": {}}, {"offsets": "orders"}],
    "mirrorflow_heartbeat__A-B": [{"window_seconds": 0}, {"window_seconds": "long"}, {"window_seconds": 3601}],
}


def test_every_dag_has_titled_params_and_a_doc_that_lists_them(bag):
    _, _, dags = bag
    for dag_id in BAD:
        dag = dags.get_dag(dag_id)
        assert dag.params, dag_id
        for name in dag.params:
            param = dag.params.get_param(name)
            assert param.schema.get("title") and param.description, (dag_id, name)
            assert f"(`{name}`" in dag.doc_md, (dag_id, name)
    replicate = dags.get_dag("mirrorflow_replicate__A-B")
    assert set(replicate.params) == {"topics", "max_records_per_partition", "dry_run"}
    assert set(dags.get_dag("mirrorflow_sync__A-B").params) == {"only", "dry_run"}
    assert set(dags.get_dag("mirrorflow_checkpoint__A-B").params) == {"groups", "sync_group_offsets"}


def test_every_form_submits_with_its_defaults(bag):
    """What Airflow's trigger form needs to enable its Trigger button: every default valid, and no
    empty-string default on a field that does not allow null (the form shows it as a missing required
    value). The form itself: test_ui_forms_browser."""
    from airflow.sdk.exceptions import ParamValidationError

    _, _, dags = bag
    ours = [dag_id for dag_id in dags.dag_ids if dag_id.endswith("__A-B")]
    assert set(BAD) <= set(ours)
    for dag_id in ours:
        params = dags.get_dag(dag_id).params
        if dag_id == "mirrorflow_reseed__A-B":  # its topic is required on purpose
            with pytest.raises(ParamValidationError, match="should be non-empty"):
                params.validate()
            continue
        if dag_id == "mirrorflow_translate__A-B":  # the offsets to translate are required on purpose
            with pytest.raises(ParamValidationError, match="offsets"):
                params.validate()
            continue
        if dag_id == "mirrorflow_failback__A-B":  # this config has no B->A: the form says so, no run can be made
            param = params.get_param("reverse_flow")
            assert param.schema["title"] == "Reverse flow B->A is not in this config"
            with pytest.raises(ParamValidationError, match="reverse_flow"):
                params.validate()
            for typed in ("B->A", "yes"):  # nothing typed there makes a run
                with pytest.raises(ParamValidationError):
                    param.resolve(typed)
            continue
        params.validate()
        for name in params:
            param = params.get_param(name)
            assert not (param.value == "" and "null" not in param.schema.get("type", [])), (dag_id, name)
    # the readers take None for "no filter"
    assert dags.get_dag("mirrorflow_replicate__A-B").params.get_param("topics").value is None
    assert dags.get_dag("mirrorflow_checkpoint__A-B").params.get_param("groups").value is None


def test_a_bad_value_is_refused_by_the_param_schema_before_any_task_runs(bag):
    from airflow.sdk.exceptions import ParamValidationError

    _, _, dags = bag
    for dag_id, confs in BAD.items():
        dag = dags.get_dag(dag_id)
        for conf in confs:
            with pytest.raises(ParamValidationError, match=f"param {next(iter(conf))}"):
                dag.test(run_conf=conf)


def test_replicate_params_topics_subset_cap_and_dry_run(bag, source, target, monkeypatch):
    cfg, prefix, dags = bag
    orders, users = f"{prefix}.orders", f"{prefix}.users"
    for t in (orders, users):
        mirror_topic(source, target, t, 2)
        produce(source, t, [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"{t}-{i}".encode(),
                             "timestamp": NOW + i} for i in range(40)])
    # every run_conf names every Param: dag.test() keeps the previous run's values in dag.params
    dag = dags.get_dag("mirrorflow_replicate__A-B")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[1]"}')
    # a dry run plans and copies nothing (no Spark: the copy is skipped)
    run = dag.test(run_conf={"dry_run": True})
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert {k: ti.state for k, ti in tis.items()} == {"plan": "success", "copy": "skipped", "report": "success"}
    planned = tis["plan"].xcom_pull(task_ids="plan")
    assert planned["would_copy"] == 80 and planned["units"] == 0
    assert consume_all(target, f"A.{orders}") == [] and consume_all(target, f"A.{users}") == []

    # only `orders`, at most 7 offsets per partition
    run = dag.test(run_conf={"topics": f"{prefix}\\.orders", "max_records_per_partition": 7, "dry_run": False})
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert {k: ti.state for k, ti in tis.items()} == {"plan": "success", "copy": "success", "report": "success"}
    assert tis["report"].xcom_pull(task_ids="report")["records"] == 14
    copied = consume_all(target, f"A.{orders}")
    by_partition = {p: [r.value for r in copied if r.partition == p] for p in (0, 1)}
    assert by_partition == {p: [f"{orders}-{i}".encode() for i in range(p, 14, 2)] for p in (0, 1)}
    assert consume_all(target, f"A.{users}") == []


def test_sync_param_only_syncs_the_chosen_concerns(bag, source, target):
    _, prefix, dags = bag
    create_topic(source, f"{prefix}.orders", partitions=2)
    run = dags.get_dag("mirrorflow_sync__A-B").test(run_conf={"only": ["configs"], "dry_run": True})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"topics_and_partitions": "skipped", "configs": "success", "acls": "skipped"}
    run = dags.get_dag("mirrorflow_sync__A-B").test(run_conf={"only": ["topics"], "dry_run": False})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"topics_and_partitions": "success", "configs": "skipped", "acls": "skipped"}
    assert f"A.{prefix}.orders" in admin(target).list_topics(timeout=10).topics


def _commit(cluster, group: str, topic: str, offset: int) -> None:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    c.close()


def test_checkpoint_params_groups_regex_and_group_sync_off(bag, source, target):
    from mirrorflow.clients import FlowClients
    from mirrorflow.groups.checkpoint import CheckpointStore
    from mirrorflow.metadata.sync import sync_flow
    from mirrorflow.replication.run.runner import run_once

    cfg, prefix, dags = bag
    topic = f"{prefix}.orders"
    create_topic(source, topic)
    produce(source, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(10)])
    _commit(source, f"keep-{prefix}", topic, 4)
    _commit(source, f"skip-{prefix}", topic, 6)
    flow = cfg.flow("A->B")
    assert sync_flow(cfg, flow, "topics").ok
    assert run_once(cfg, flow, mode="direct").ok
    run = dags.get_dag("mirrorflow_checkpoint__A-B").test(
        run_conf={"groups": f"keep-{prefix}", "sync_group_offsets": False})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"checkpoint": "success", "sync_group_offsets": "skipped"}
    with FlowClients(cfg, flow) as clients:
        store = CheckpointStore.load(clients)
    want = target_offset_of(source, target, topic, f"A.{topic}", 0, 4)  # the copy of source offset 4
    assert store.for_group(f"keep-{prefix}")[(f"A.{topic}", 0)].downstream_offset == want
    assert store.for_group(f"skip-{prefix}") == {}
    t = Consumer({**target.client_config(), "group.id": f"keep-{prefix}", "enable.auto.commit": False})
    assert t.committed([TopicPartition(f"A.{topic}", 0)], timeout=10)[0].offset < 0  # not synced this run
    t.close()


def test_an_operations_declared_inputs_are_its_dags_form(bag):
    """Each input an operation declares (ops.registry `inputs`) is a Param of its DAG's trigger form, with the
    schema and default `mirrorflow_airflow.params.form` makes of it: the form cannot drift from the CLI
    (tests/unit/test_operation_registry.py holds the CLI's side)."""
    from mirrorflow.ops.registry import OPERATIONS
    from mirrorflow_airflow.params import form
    from tests.unit.test_operation_registry import declared

    _, _, dags = bag
    checked = []
    for op in (op for op in OPERATIONS if op.inputs and op.dag):
        dag = dags.get_dag(f"mirrorflow_{op.dag}__A-B")
        for key, want in form(declared(op)).items():
            assert key in dag.params, f"{dag.dag_id}: no Param {key}"
            got = dag.params.get_param(key)
            assert (got.value, got.schema) == (want.value, want.schema), (dag.dag_id, key)
            checked.append(key)
    assert len(checked) >= 20, checked
