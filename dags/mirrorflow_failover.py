"""Failover DAGs (one per enabled flow, manual, with an approval step): move the consumer groups to
the target and stop the flow. See include/mirrorflow_airflow/dag_builders/failover.py."""

from mirrorflow_airflow.dag_builders.failover import build_failover_dags

globals().update(build_failover_dags())
