"""Replicate DAGs (one per enabled flow): plan -> Spark copy -> report, exactly once.

Built from the mirrorflow config ($MIRRORFLOW_CONFIG, else include/config/mirrorflow.yaml); see
include/mirrorflow_airflow/dag_builders/replicate.py. Parsing touches no cluster. A config that
cannot be read or is invalid becomes this file's import error, naming the file and the key.
"""

from mirrorflow_airflow.dag_builders.replicate import build_replicate_dags

globals().update(build_replicate_dags())
