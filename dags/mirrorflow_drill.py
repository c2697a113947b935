"""Drill DAGs (one per enabled flow, manual): rehearse the failover with the flow running, nothing moved.

See include/mirrorflow_airflow/dag_builders/drill.py. Parsing touches no cluster.
"""

from mirrorflow_airflow.dag_builders.drill import build_drill_dags

globals().update(build_drill_dags())
