"""Drill DAGs: one per enabled flow, `mirrorflow_drill__<flow.id>`, manual trigger only.

Rehearses the flow's failover with nothing moved, as `mirrorflow drill` does (ops.dr.drill): the
unplanned failover's preflight (where every group would resume on the target, the RPO per
partition), a verify bounded to a recent window, optionally the resume offsets committed to shadow
groups `<group><suffix>` on the target, the flow's client-switch steps as a dry run
(`client.switch.failover`, ops.dr.client_switch), and the time of each step (the RTO). The flow keeps running
and no consumer group of the flow is touched. The drill is recorded on the target (the status page
shows the last one) and in the flow's history with the Airflow user who triggered it.

Params (all optional): `groups` (regex), `verify_from` (a duration back from now such as `15m`,
`earliest`, `offset:N` or an ISO-8601 time; empty: the last hour), `shadow_suffix`. The task
**fails** when the drill found a problem (a plan that could not be committed, a verify mismatch, a
client-switch step that failed its dry run);
the report is in its log either way (and in the task's XCom when it succeeds).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import DAG, task

from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.dr.inputs import DRILL
from mirrorflow_airflow.common import flow_dag, flow_dags, log_report, metric, task_config_path
from mirrorflow_airflow.dag_builders.control import triggering_user
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.params import form

log = logging.getLogger(__name__)


def drill_task(flow_name: str, params: dict[str, Any], by: str, config_path: str | None = None) -> dict[str, Any]:
    """Run the drill, log its report, fail when it found a problem (after recording it)."""
    from airflow.sdk.exceptions import AirflowFailException

    from mirrorflow.ops.dr.drill import drill

    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    given = {f.name: params.get(f.name) for f in DRILL}  # checked by the drill, named as Params
    rep = drill(cfg, flow, **given, by=by, via="airflow", log=log.info)
    log_report(log, rep)
    tags = {"flow": flow.id}
    metric("gauge", "drill.rto_seconds", rep.rto_s, tags)
    if rep.not_replicated is not None:
        metric("gauge", "drill.rpo_offsets", rep.not_replicated, tags)
    if not rep.ok:
        blocked = rep.plan.blocked if rep.plan else None
        what = (
            f"the plan cannot be committed: {blocked}"
            if blocked
            else f"client switch {rep.switch_verdict}"
            if rep.switch is not None and not rep.switch.ok
            else f"verify {rep.verify_verdict}"
        )
        raise AirflowFailException(f"drill of {flow.name}: {what} (the report is above; the drill was recorded)")
    return rep.to_dict()


def build_drill_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    with flow_dag(
        "drill",
        flow,
        "rehearse the failover (plan, RPO, bounded verify, RTO) with the flow running and nothing moved",
        None,
        params=form(DRILL),
        doc_md=__doc__,
    ) as dag:

        @task(task_id="drill", retries=0)
        def run(params: dict | None = None, dag_run: Any = None) -> dict[str, Any]:
            """Rehearse the failover; fails when the drill found a problem (the report is in the log)."""
            return drill_task(name, params or {}, triggering_user(dag_run), path)

        run()
    return dag


def build_drill_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One drill DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_drill_dag)
