"""MirrorflowSparkSubmitOperator: the copy step of a replicate DAG, through the Spark provider."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.replication.executors.handoff import write_plan_file
from mirrorflow.replication.executors.spark import CONNECT_CLIENT_VARS, is_local_master, lease_kept, submit_spec
from mirrorflow.replication.plan.run_plan import Plan
from mirrorflow.replication.run.scratch import Scratch
from mirrorflow_airflow.hooks.mirrorflow import MirrorflowHook
from mirrorflow_airflow.lineage import report_plan_lineage

SPARK_CONN_ID = "spark_default"


class MirrorflowSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator that refuses to run without its connection (the provider would silently
    submit to yarn), skips when the plan of task `plan_task_id` has no units, and ships
    include/mirrorflow as --py-files to non-local masters.

    The plan comes from the plan task's XCom (replication.executors.handoff), never from a file another task
    wrote: it is written to a scratch directory private to this task (replication.run.scratch: under
    $MIRRORFLOW_RUN_DIR if set; removed afterwards unless MIRRORFLOW_KEEP_RUNS) and
    handed to spark-submit as `--files PLAN` and the job's argument, so a driver on another host
    (--deploy-mode cluster) gets it too. The driver writes the results to the target cluster.

    `kafka_conn_ids`: the Airflow connections the flow's clusters name (`airflow.conn.id`). With a
    local master the executors are children of spark-submit: each connection the worker's own
    environment lacks is handed to them as an `AIRFLOW_CONN_<ID>` variable of spark-submit's
    environment, set at execute time (after templates are rendered, so it is never stored as a
    rendered field), never on the command line or in a file. Executors on a Spark cluster resolve
    connections through the secrets backend configured on the Spark workers."""

    def __init__(
        self,
        *,
        spark_conn_id: str = SPARK_CONN_ID,
        plan_task_id: str = "plan",
        kafka_conn_ids: Sequence[str] = (),
        config_path: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(conn_id=spark_conn_id, **kwargs)
        self.spark_conn_id = spark_conn_id
        self.plan_task_id = plan_task_id
        self.kafka_conn_ids = list(kafka_conn_ids)
        self.config_path = config_path  # the flow's config: the job's Spark settings (spark.submit_spec)

    def execute(self, context: Any) -> None:
        try:
            conn = BaseHook.get_connection(self.spark_conn_id)
        except Exception:  # noqa: BLE001 - the SDK raises its own not-found type
            raise AirflowFailException(
                f"Airflow connection {self.spark_conn_id!r} is missing: define it, e.g. "
                f'AIRFLOW_CONN_{self.spark_conn_id.upper()}=\'{{"conn_type": "spark", "host": "local[*]"}}\' '
                "(without it the Spark provider would silently submit to yarn)"
            ) from None
        handed = context["ti"].xcom_pull(task_ids=self.plan_task_id) or {}
        if not handed.get("units"):
            raise AirflowSkipException("nothing to copy")
        scratch = Scratch.for_task("copy")
        try:
            plan = Plan.decode(handed["plan"])
            plan_path = write_plan_file(plan, scratch.path)
            # the same assembly as the CLI's spark-submit; the master is the connection's (a connection
            # without a host: the provider's default, yarn)
            cfg = MirrorflowHook(self.config_path).get_conn()
            spec = submit_spec(cfg, plan_path, conn.host or "yarn", scratch.path, self.name)
            self.application, self.application_args, self.files = spec.application, spec.args, spec.files
            self.conf, self.py_files = {**spec.conf, **(self.conf or {})}, spec.py_files
            if is_local_master(spec.master):
                self.env_vars = {**(self.env_vars or {}), **kafka_connections_env(self.kafka_conn_ids)}
            for var in CONNECT_CLIENT_VARS:  # the Spark provider hands spark-submit this whole environment
                os.environ.pop(var, None)
            # the run's lease stays renewed while the task waits for spark-submit's driver (minutes on
            # a busy cluster, longer than lease.timeout.seconds): no other run can take it meanwhile
            with lease_kept(plan):
                super().execute(context)
            report_plan_lineage(plan)  # OpenLineage: the units' source topics in, remote topics out (after the copy)
        finally:
            scratch.done()


def kafka_connections_env(conn_ids: Sequence[str]) -> dict[str, str]:
    """`AIRFLOW_CONN_<ID>` (Airflow's JSON form) for each connection this process's environment
    does not define already: how local Spark executors resolve `airflow.conn.id`."""
    env: dict[str, str] = {}
    for conn_id in conn_ids:
        var = f"AIRFLOW_CONN_{conn_id.upper()}"
        if var not in os.environ:
            env[var] = BaseHook.get_connection(conn_id).as_json()
    return env
