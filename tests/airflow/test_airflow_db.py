import pytest

pytestmark = pytest.mark.airflow


def test_dagbag_loads_the_generated_dags_of_the_default_config(airflow_db, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.delenv("MIRRORFLOW_CONFIG", raising=False)  # the embedded default: flow A->B
    bag = DagBag()
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {"mirrorflow_sync__A-B", "mirrorflow_replicate__A-B", "mirrorflow_checkpoint__A-B"}
