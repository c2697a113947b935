"""Verify DAGs (one per enabled flow, manual): compare source and target over the copied ranges.

See include/mirrorflow_airflow/dag_builders/verify.py. Parsing touches no cluster.
"""

from mirrorflow_airflow.dag_builders.verify import build_verify_dags

globals().update(build_verify_dags())
