"""The tasks of an approved operation's DAG (ops.dr.gated: the failover, the failback), once:

    preflight >> go_on >> approve_<operation> >> <commit> >> client_switch.<step>...

* `preflight_task`: the operation's preflight (its client-switch steps resolved first); its plan, report
  (text, and Markdown for the approval page) and figures in XCom. A plan that cannot be committed fails
  here; a dry run, or nothing to do, ends the run at `go_on`.
* the approval: Airflow's Required Action, the operation's own class (its title).
* `commit_task`: exactly the approved plan (the approval names its id), committed through the operation's
  `commit`; fails naming what moved when the state moved since the preflight. "Nothing to do" (another
  door committed it since) is no failure, as on the CLI.

The provider's operators (operators/failover.py, operators/failback.py) run these same functions.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from airflow.sdk import task
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.config import FlowConfig
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.switch_tasks import add_switch_tasks

log = logging.getLogger(__name__)


def operation(name: str) -> Any:
    """The GatedOperation `name` declares (mirrorflow.ops.dr.<name>.OPERATION), imported in the task, not
    when the DAG file is parsed."""
    return importlib.import_module(f"mirrorflow.ops.dr.{name}").OPERATION


def preflight_task(name: str, flow_name: str, params: dict[str, Any], config_path: str | None = None) -> dict[str, Any]:
    """The plan of operation `name` and its report."""
    from mirrorflow.errors import MirrorflowError
    from mirrorflow.ops.dr.caller import Caller

    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    dry = bool(params.get("dry_run"))
    try:
        rep = operation(name).preflight(cfg, flow, params, Caller("airflow", dry_run=dry, log=log.info))
    except MirrorflowError as exc:
        raise AirflowFailException(str(exc)) from None
    text = rep.render()
    log.info("%s", text)
    out = {"plan_id": None, "text": text, "note": rep.note, "done": False, **rep.figures()}
    if rep.plan is None:  # nothing to do (as the CLI, not an error): go_on ends the run
        return out
    if rep.plan.blocked and not dry:
        raise AirflowFailException(text)
    return {**out, "plan_id": rep.plan.id, "plan": rep.plan.to_dict(), "markdown": rep.markdown()}


def commit_task(
    name: str,
    flow_name: str,
    preflight: dict[str, Any],
    approval: dict[str, Any] | None,
    config_path: str | None = None,
) -> dict[str, Any]:
    """Commit exactly the approved plan of operation `name`, then report its lineage."""
    from mirrorflow.errors import MirrorflowError
    from mirrorflow.ops.dr.gated import settled
    from mirrorflow_airflow.lineage import AFTER

    op = operation(name)
    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    plan = op.read_plan(preflight["plan"])
    if not approval or approval.get("plan_id") != plan.id:
        raise AirflowFailException(f"the approval was for plan {(approval or {}).get('plan_id')}, not {plan.id}")
    try:
        rep = op.commit(cfg, flow, plan, str(approval["approved_by"]), None, "airflow")
    except MirrorflowError as exc:
        raise AirflowFailException(str(exc)) from None
    text = rep.render()
    log.info("%s", text)
    if not settled(rep):
        raise AirflowFailException(text)
    if rep.done:
        AFTER[name](cfg, flow, rep)
    # the client-switch tasks run after a commit that did the operation (op.switches: not after moving groups
    # a failover left alone)
    switch = rep.done and op.switches(rep)
    return {
        "plan_id": plan.id,
        "approved_by": rep.approved_by,
        "done": rep.done,
        "text": text,
        "switch": switch,
        **rep.figures(),
    }


def gated_chain(name: str, flow: FlowConfig, approve: Any, commit_id: str, config_path: str | None) -> Any:
    """The preflight, go_on, the approval `approve` and the commit task `commit_id` of operation `name`
    for `flow`, chained, then its client-switch steps (inside a DAG's context)."""
    flow_name = flow.name

    @task(task_id="preflight", retries=0)
    def preflight(params: dict | None = None) -> dict[str, Any]:
        """The plan, its report and figures."""
        return preflight_task(name, flow_name, params or {}, config_path)

    @task.short_circuit(task_id="go_on")
    def go_on(params: dict | None = None, ti: Any = None) -> bool:
        """A dry run, or nothing to do, ends after the preflight."""
        return not (params or {}).get("dry_run") and bool(ti.xcom_pull(task_ids="preflight")["plan_id"])

    @task(task_id=commit_id, retries=0)
    def commit(ti: Any = None) -> dict[str, Any]:
        """Exactly the approved plan, recorded with its approver."""
        return commit_task(
            name, flow_name, ti.xcom_pull(task_ids="preflight"), ti.xcom_pull(task_ids=approve.task_id), config_path
        )

    committed = commit()
    preflight() >> go_on() >> approve >> committed
    return add_switch_tasks(flow, name, committed, commit_id, config_path)
