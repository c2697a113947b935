"""Takeover DAGs (one per enabled flow, manual): continue a flow where a stopped MirrorMaker 2 left it.

See include/mirrorflow_airflow/dag_builders/takeover.py. Parsing touches no cluster.
"""

from mirrorflow_airflow.dag_builders.takeover import build_takeover_dags

globals().update(build_takeover_dags())
