"""Control DAGs: one per flow, `mirrorflow_control__<flow.id>`, manual trigger only.

Pause, resume or stop the flow from Airflow's trigger form, as `mirrorflow flow pause|resume|stop`
does from the CLI and the status page's buttons do: one core function (ops.control.flow_control), which
records the state on the target and appends the operation to the flow's history with the Airflow
user who triggered the run (the DAG run's triggering user) and the reason given.

* `pause`: no copy and no topic sync; checkpoints and group offset sync go on.
* `stop`: nothing runs for the flow; nothing is removed.
* `resume`: the flow runs again (refused, with the way forward, where a resume would be unsafe:
  after the flow's own failover its next step is the failback, unless `force` says its applications
  never moved; after the reverse flow was failed over that flow restarts through its failback).

A flow its failover stopped refuses `pause` and `stop` too (the run fails naming the failback): they
would overwrite what its failover recorded, which the failback needs.

Params (declared once with the CLI's, ops.control.inputs): `action`, `reason` (optional, recorded and shown
on the status page and in skipped runs) and `force` (resume a flow its failover stopped).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import DAG, task

from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.control.inputs import CONTROL
from mirrorflow_airflow.common import flow_dag, flow_dags, task_config_path
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.params import form

log = logging.getLogger(__name__)


def triggering_user(dag_run: Any) -> str:
    """Who triggered the run (Airflow's user name; `dag.test()` says `dag_test`); the run id when
    Airflow does not know (an old API client)."""
    user = getattr(dag_run, "triggering_user_name", None)
    return str(user) if user else f"an unknown Airflow user (run {getattr(dag_run, 'run_id', '?')})"


def control_task(
    flow_name: str, action: str, reason: str | None, by: str, config_path: str | None = None, force: bool = False
) -> dict[str, Any]:
    from mirrorflow.ops.control.flow_control import control_flow

    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    st = control_flow(cfg, flow, action, by, "airflow", reason or "", force)
    log.info("flow %s: %s by %s: now %s", flow_name, action, by, st.describe())
    return {"flow": flow_name, "action": action, "by": by, **st.to_dict()}


def build_control_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    with flow_dag(
        "control",
        flow,
        "pause, resume or stop the flow (recorded on the target with the user who triggered it)",
        None,
        params=form(CONTROL),
        doc_md=__doc__,
    ) as dag:

        @task(task_id="control", retries=0)
        def run(params: dict | None = None, dag_run: Any = None) -> dict[str, Any]:
            """Record the new state and the history line, with the triggering user."""
            p = params or {}
            return control_task(
                name, str(p.get("action", "")), p.get("reason"), triggering_user(dag_run), path, bool(p.get("force"))
            )

        run()
    return dag


def build_control_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One control DAG per flow (disabled ones too: their state can be set ahead), keyed by dag_id."""
    return flow_dags(cfg, build_control_dag, enabled_only=False)
