import pytest

pytestmark = pytest.mark.airflow


def test_dagbag_imports_without_errors(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag()
    assert bag.import_errors == {}
