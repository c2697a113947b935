"""Heartbeat DAGs (one per flow): MM2 heartbeats every emit.heartbeats.interval.seconds, waited for on
the triggerer, and the replication latency they show.

Built from the mirrorflow config ($MIRRORFLOW_CONFIG, else include/config/mirrorflow.yaml); see
include/mirrorflow_airflow/dag_builders/heartbeat.py. Parsing touches no cluster. A config that
cannot be read or is invalid becomes this file's import error, naming the file and the key.
"""

from mirrorflow_airflow.dag_builders.heartbeat import build_heartbeat_dags

globals().update(build_heartbeat_dags())
