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

from airflow.sdk import DAG, Param, task

from mirrorflow.config import Config, FlowConfig
from mirrorflow_airflow.common import flow_dag, flow_dags, log_report, metric, task_config_path
from mirrorflow_airflow.dag_builders.control import triggering_user
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.params import regex

log = logging.getLogger(__name__)
WHEN = "earliest, latest, start (where the flow's copy began), offset:N or an ISO-8601 time with a zone"


def verify_task(
    flow_name: str,
    topics: str | None,
    start: str | None,
    end: str,
    config_path: str | None = None,
    ti: Any = None,
    since_last: bool = False,
    record: bool = False,
    by: str = "",
) -> dict[str, Any]:
    """Run the verification, log its report, push it as XCom `report`; fail on a mismatch."""
    from airflow.sdk.exceptions import AirflowFailException

    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.verify.verify import verify_flow

    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    with FlowClients(cfg, flow) as clients:
        report = verify_flow(
            clients, topics or None, start, end, since_last=since_last, record=record or since_last, by=by
        )
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
        params={
            "topics": regex("Topics (regex)", "Only SOURCE topics matching this regex; empty: every topic of the flow"),
            "from": Param("earliest", type="string", minLength=1, title="From", description=f"Window start: {WHEN}"),
            "to": Param(
                "latest", type="string", minLength=1, title="To", description=f"Window end (exclusive): {WHEN}"
            ),
            "since_last": Param(
                False,
                type="boolean",
                title="Since the last verify",
                description="Check each partition only from where the last verify that passed got to (From is "
                "not used), and record how far this one gets",
            ),
            "record": Param(
                False,
                type="boolean",
                title="Record",
                description="Record per matching partition how far it is verified (for a later 'since the last "
                "verify' or a planned failover)",
            ),
        },
        doc_md=__doc__,
    ) as dag:

        @task(task_id="verify", retries=0)
        def run(params: dict | None = None, ti: Any = None, dag_run: Any = None) -> dict[str, Any]:
            """Compare the flow's copied ranges; fails on a mismatch (the report is in the log)."""
            p = params or {}
            since = bool(p.get("since_last"))
            return verify_task(
                name,
                str(p.get("topics") or ""),
                None if since else str(p.get("from") or "earliest"),
                str(p.get("to") or "latest"),
                path,
                ti,
                since_last=since,
                record=bool(p.get("record")),
                by=triggering_user(dag_run),
            )

        run()
    return dag


def build_verify_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One verify DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_verify_dag)
