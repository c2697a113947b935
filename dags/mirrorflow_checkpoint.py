"""Checkpoint DAGs (one per flow): exact MM2 checkpoints, group offset sync and heartbeats.

Built from the mirrorflow config ($MIRRORFLOW_CONFIG, else include/config/mirrorflow.yaml);
see include/mirrorflow_airflow/checkpoint_dags.py. Parsing touches no cluster.
"""
from mirrorflow.config import load
from mirrorflow_airflow.checkpoint_dags import build_checkpoint_dags

globals().update(build_checkpoint_dags(load()))
