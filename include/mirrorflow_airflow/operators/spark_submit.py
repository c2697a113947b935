"""MirrorflowSparkSubmitOperator: the copy step of a replicate DAG, through the Spark provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.replication.spark import build_pyfiles_zip, is_local_master

SPARK_CONN_ID = "spark_default"


class MirrorflowSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator that refuses to run without its connection (the provider would silently
    submit to yarn), skips when the plan of task `plan_task_id` has no units, and ships
    include/mirrorflow as --py-files to non-local masters."""

    def __init__(self, *, spark_conn_id: str = SPARK_CONN_ID, plan_task_id: str = "plan", **kwargs: Any) -> None:
        super().__init__(conn_id=spark_conn_id, **kwargs)
        self.spark_conn_id = spark_conn_id
        self.plan_task_id = plan_task_id

    def execute(self, context: Any) -> None:
        try:
            conn = BaseHook.get_connection(self.spark_conn_id)
        except Exception:  # noqa: BLE001 - the SDK raises its own not-found type
            raise AirflowFailException(
                f"Airflow connection {self.spark_conn_id!r} is missing: define it, e.g. "
                f'AIRFLOW_CONN_{self.spark_conn_id.upper()}=\'{{"conn_type": "spark", "host": "local[*]"}}\' '
                "(without it the Spark provider would silently submit to yarn)"
            ) from None
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id) or {}
        if not plan.get("units"):
            raise AirflowSkipException("nothing to copy")
        if not is_local_master(conn.host or ""):
            self.py_files = str(build_pyfiles_zip(Path(plan["dir"])))
        super().execute(context)
