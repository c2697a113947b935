"""Failback DAGs (one per enabled flow, manual, with an approval step): start the reverse flow of a
failed-over flow from its failover record. See include/mirrorflow_airflow/dag_builders/failback.py."""

from mirrorflow_airflow.dag_builders.failback import build_failback_dags

globals().update(build_failback_dags())
