"""Verify DAGs: one per enabled flow, `mirrorflow_verify__<flow.id>`, manual trigger only.

Compares the source and the target record by record over the ranges the flow has copied, through
its exact offset map: per partition, how many records match, the first difference (source and
target offset, and whether key, value, headers or timestamp differ, or a record is missing or
extra on the target) and what is not copied yet. The same core function as `mirrorflow verify`;
run it before a planned cut-over.

Params: `topics` (a regex over SOURCE topic names; empty: every topic of the flow), `from` and `to`
(`earliest`, `latest`, `offset:N` or an ISO-8601 time with a zone), `since_last` (check each
partition only from where the last verify that passed got to, its stored 'verified up to'; `from`
is then not used; records how far this one gets), `record` (record per matching partition how far
it is verified, for a later `since_last` or a planned failover; otherwise nothing is written). The
task **fails** on a mismatch; the report is in its log either way, and in the XCom `report`.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import DAG, task

from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.verify.inputs import VERIFY
from mirrorflow_airflow.common import flow_dag, flow_dags, log_report, metric, task_config_path
from mirrorflow_airflow.dag_builders.control import triggering_user
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.params import form

log = logging.getLogger(__name__)


def verify_task(
    flow_name: str, params: dict[str, Any], config_path: str | None = None, ti: Any = None, by: str = ""
) -> dict[str, Any]:
    """Run the verification, log its report, push it as XCom `report`; fail on a mismatch."""
    from airflow.sdk.exceptions import AirflowFailException

    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.verify.verify import verify_given

    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    given = {f.name: params.get(f.name) for f in VERIFY}  # checked by verify_given, named as Params
    if given["since_last"]:
        given["from"] = None  # the form always has a start (its default); since the last verify, it is not used
    with FlowClients(cfg, flow) as clients:
        report = verify_given(clients, given, via="airflow", by=by)
    log_report(log, report)
    tags = {"flow": flow.id}
    metric("gauge", "verify.mismatched_partitions", len(report.mismatched), tags)
    metric("gauge", "verify.records", sum(p.source_records for p in report.partitions), tags)
    out = report.to_dict()
    if ti is not None:
        ti.xcom_push(key="report", value=out)
    if not report.ok:
        first = next(p for p in report.partitions if not p.ok)
        raise AirflowFailException(
            f"verify {flow.name}: mismatch in {len(report.mismatched)} partition(s), e.g. {first.line()}"
        )
    return out


def build_verify_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    with flow_dag(
        "verify",
        flow,
        "compare source and target record by record over the copied ranges",
        None,
        params=form(VERIFY),
        doc_md=__doc__,
    ) as dag:

        @task(task_id="verify", retries=0)
        def run(params: dict | None = None, ti: Any = None, dag_run: Any = None) -> dict[str, Any]:
            """Compare the flow's copied ranges; fails on a mismatch (the report is in the log)."""
            return verify_task(name, params or {}, path, ti, by=triggering_user(dag_run))

        run()
    return dag


def build_verify_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One verify DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_verify_dag)
