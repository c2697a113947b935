"""Checkpoint DAGs (one per flow): exact MM2 checkpoints and group offset sync (heartbeats: mirrorflow_heartbeat.py).

Built from the mirrorflow config ($MIRRORFLOW_CONFIG, else include/config/mirrorflow.yaml); see
include/mirrorflow_airflow/dag_builders/checkpoint.py. Parsing touches no cluster. A config that
cannot be read or is invalid becomes this file's import error, naming the file and the key.
"""

from mirrorflow_airflow.dag_builders.checkpoint import build_checkpoint_dags

globals().update(build_checkpoint_dags())
