"""The client-switch steps of the failover and failback DAGs: one task per step of the flow's
`client.switch.failover` (`client.switch.failback`), in order, in the task group `client_switch`
after the commit (the failback's `start`), each over the core's one function
(mirrorflow.ops.dr.client_switch.run_client_switch, the step alone). They were approved with the
plan (the approval page lists them), so they run without another question; Airflow times each task,
the core records each step in the operations history with the plan's approver. A failing step fails
its task with the error naming the step (the commit stands; the later steps are `upstream_failed`):
fix the cause and clear that task to run it and the steps after it again. A run whose commit moved no
application (groups moved after a failover, a failback already started) skips them."""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import task
from airflow.sdk.definitions.taskgroup import TaskGroup

from mirrorflow.config import FlowConfig
from mirrorflow_airflow.common import log_report
from mirrorflow_airflow.hooks import MirrorflowHook

log = logging.getLogger(__name__)

GROUP = "client_switch"


def switch_task(
    flow_name: str, operation: str, step: str, commit: dict[str, Any] | None, config_path: str | None = None
) -> dict[str, Any]:
    """Run the one step `step` after the commit whose XCom is `commit` (skipped when it moved nothing)."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from mirrorflow.errors import MirrorflowError
    from mirrorflow.ops.dr.caller import Caller
    from mirrorflow.ops.dr.client_switch import ClientSwitchError, run_client_switch

    if not commit or not commit.get("switch"):
        raise AirflowSkipException(f"the {operation} moved no application: no client switch")
    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    try:
        caller = Caller("airflow", str(commit.get("approved_by") or ""), commit.get("plan_id"), log=log.info)
        rep = run_client_switch(cfg, flow, operation, caller, only=step)
    except ClientSwitchError as exc:
        log_report(log, exc.report)
        raise AirflowFailException(str(exc)) from None
    except MirrorflowError as exc:
        raise AirflowFailException(str(exc)) from None
    log_report(log, rep)
    return rep.to_dict()


def add_switch_tasks(flow: FlowConfig, operation: str, after: Any, after_id: str, config_path: str | None) -> Any:
    """The task group of `flow`'s client-switch steps of `operation`, downstream of the task `after`
    (id `after_id`, whose XCom says whether to switch); `after` itself when the flow has no steps."""
    from mirrorflow.ops.dr.client_switch import switch_steps

    steps = [s["name"] for s in switch_steps(flow, operation)]
    if not steps:
        return after
    with TaskGroup(GROUP, tooltip=f"the client-switch steps after the {operation}, in order") as group:
        previous = None
        for step in steps:
            t = _step_task(flow.name, operation, step, after_id, config_path)()
            if previous is not None:
                previous >> t
            previous = t
    after >> group
    return group


def _step_task(flow_name: str, operation: str, step: str, after_id: str, config_path: str | None) -> Any:
    @task(task_id=step, retries=0)
    def run(ti: Any = None) -> dict[str, Any]:
        """One client-switch step (approved with the plan), timed and recorded in the history."""
        return switch_task(flow_name, operation, step, ti.xcom_pull(task_ids=after_id), config_path)

    return run
