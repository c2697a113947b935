"""Replicate DAGs (one per flow): plan -> Spark copy -> report, exactly once.

Built from the mirrorflow config ($MIRRORFLOW_CONFIG, else include/config/mirrorflow.yaml); see
include/mirrorflow_airflow/replicate_dags.py. Parsing touches no cluster.
"""
from mirrorflow.config import load
from mirrorflow_airflow.replicate_dags import build_replicate_dags

globals().update(build_replicate_dags(load()))
