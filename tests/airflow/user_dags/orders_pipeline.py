"""A DAG as a user of the installed provider writes it (`pip install "mirrorflow[airflow]"`, nothing from
this repository's dags/ or include/): sync the flow's topics, replicate what is new, checkpoint its consumer
groups, then run the user's own job on what was copied. The config comes through a `mirrorflow` connection
(`AIRFLOW_CONN_MIRRORFLOW_DEFAULT`, its extra `{"config": PATH}`); the flow's name through MY_FLOW.

tests/airflow/test_provider_wheel.py runs it with dag.test() in a fresh virtualenv holding the built wheel.
"""

import os

import pendulum
from airflow.sdk import DAG, task

from mirrorflow_airflow.operators.checkpoint import CheckpointOperator
from mirrorflow_airflow.operators.replicate import ReplicateOperator
from mirrorflow_airflow.operators.sync import SyncOperator

FLOW = os.environ.get("MY_FLOW", "A->B")
CONN = "mirrorflow_default"

with DAG(
    "orders_pipeline",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["orders"],
):
    topics = SyncOperator(task_id="sync_topics", flow=FLOW, mirrorflow_conn_id=CONN, concerns=["topics"])
    # threads of the worker (no Spark needed for a small flow); "submit" or "connect" hand the copy to Spark
    replicate = ReplicateOperator(task_id="replicate", flow=FLOW, mirrorflow_conn_id=CONN, copy_mode="direct")
    checkpoint = CheckpointOperator(task_id="checkpoint", flow=FLOW, mirrorflow_conn_id=CONN)

    @task
    def my_job(copied: dict) -> dict:
        """The user's own step, after the replica is fresh: here it only reports what was copied."""
        return {"records": copied["records"], "topics": copied["topics"]}

    job = my_job(replicate.output)
    topics >> replicate >> checkpoint >> job
