"""A user's disaster-recovery checks, written against the installed provider: verify the flow's copy, then
rehearse its failover as a dry run inside a task group (the plan is made and logged; the approval and the
commit are skipped, nothing changes). Run by tests/airflow/test_provider_wheel.py after orders_pipeline."""

import os

import pendulum
from airflow.sdk import DAG, TaskGroup

from mirrorflow_airflow.operators.failover import (
    FailoverApprovalOperator,
    FailoverCommitOperator,
    FailoverPreflightOperator,
)
from mirrorflow_airflow.operators.verify import VerifyOperator

FLOW = os.environ.get("MY_FLOW", "A->B")
CONN = "mirrorflow_default"

with DAG("dr_checks", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    verify = VerifyOperator(task_id="verify", flow=FLOW, mirrorflow_conn_id=CONN)
    with TaskGroup("failover") as failover:
        preflight = FailoverPreflightOperator(
            task_id="failover_preflight", flow=FLOW, mirrorflow_conn_id=CONN, dry_run=True
        )
        approve = FailoverApprovalOperator(task_id="approve_failover", flow=FLOW)
        commit = FailoverCommitOperator(task_id="failover_commit", flow=FLOW, mirrorflow_conn_id=CONN)
        preflight >> approve >> commit
    verify >> failover
