"""Sync DAGs (one per enabled flow): remote topics, partitions, topic configs and topic ACLs.

Built from the mirrorflow config ($MIRRORFLOW_CONFIG, else include/config/mirrorflow.yaml); see
include/mirrorflow_airflow/dag_builders/sync.py. Parsing touches no cluster. A config that
cannot be read or is invalid becomes this file's import error, naming the file and the key.
"""

from mirrorflow_airflow.dag_builders.sync import build_sync_dags

globals().update(build_sync_dags())
