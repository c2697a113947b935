"""Backfill DAGs (one per enabled flow, manual): copy a historical source range not copied yet.

See include/mirrorflow_airflow/dag_builders/backfill.py. Parsing touches no cluster.
"""

from mirrorflow_airflow.dag_builders.backfill import build_backfill_dags

globals().update(build_backfill_dags())
