import pytest

pytestmark = pytest.mark.airflow


def test_dagbag_loads_the_generated_dags_of_the_default_config(airflow_db, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.delenv("MIRRORFLOW_CONFIG", raising=False)  # the embedded default: flow A->B
    bag = DagBag()
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {f"mirrorflow_{kind}__A-B" for kind in (
        "sync", "replicate", "checkpoint", "reseed", "failover", "failback", "verify", "backfill", "takeover",
        "control", "drill", "heartbeat", "translate")}  # schemas: only for flows whose clusters have registries


def test_every_dag_builder_has_one_signature(airflow_db):
    import inspect

    from mirrorflow_airflow.dag_builders import checkpoint, replicate, sync

    for kind, module in (("sync", sync), ("replicate", replicate), ("checkpoint", checkpoint)):
        many = inspect.signature(getattr(module, f"build_{kind}_dags")).parameters
        one = inspect.signature(getattr(module, f"build_{kind}_dag")).parameters
        assert list(many) == ["cfg"] and many["cfg"].default is None, kind
        assert list(one) == ["cfg", "flow"], kind
