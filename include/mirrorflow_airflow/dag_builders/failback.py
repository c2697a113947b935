"""Failback DAGs: one per enabled flow, `mirrorflow_failback__<flow.id>`, manual trigger only.

Starts the reverse flow of a failed-over flow from its failover record -- the same core functions as
`mirrorflow failback` (mirrorflow.ops.dr.failback: plan_failback, commit_failback), bound the way the
failover DAG is:

* `preflight`: the **plan** (id derived from its content): per partition, the records on the target
  the failed-over flow did not write (from its offset map; the reverse flow copies them, also in
  topics and partitions created on the target during the outage), what the target no longer holds
  (deleted by retention, removed by compaction, a topic recreated or a partition truncated since the
  failed-over flow wrote it), the divergence (records the source had that never reached the target)
  and the split brain (records the source accepted after the failover), as offset ranges and counts;
  nothing is deleted. The plan travels in XCom. A plan that cannot be started (the target lost records
  and `accept_loss` is off) fails here.
* `go_on`: ends the run here for a dry run, or when the reverse flow was already started by a
  failback of the same failover.
* `approve_failback`: Airflow's human-in-the-loop approval (Required Actions) shows the report as the
  preflight prints it, with the plan id. Reject fails the run with "rejected by <user>"; no answer
  within `approval_timeout_minutes` fails it too; nothing is started either way.
* `start`: starts exactly the approved plan: it reads again what the plan was built from and, if
  anything moved, fails naming what moved (nothing started: trigger a new preflight); else seeds the
  reverse flow's progress (its ledger) and offset map, sets it running and records the failback on its
  target with the approver's Airflow user name. Its own DAGs (sync, replicate, checkpoint) copy from there.
* `client_switch.<step>` (a flow with `client.switch.failback`): one task per client-switch step, in
  order, after the start (mirrorflow_airflow.switch_tasks), as in the failover DAG.

Params: `dry_run`, `reseed` (the source was rebuilt empty: the reverse flow copies all of the
target's topics from their start; see `mirrorflow failback --reseed`), `accept_loss` (start although
the target lost records the plan names), `approval_timeout_minutes` (default 60), `approvers`
(Airflow user ids allowed to answer; empty: any user who may act on the DAG).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.config import Config, FlowConfig
from mirrorflow_airflow.common import flow_dag, flow_dags, task_config_path
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.lineage import failback_pairs, report_lineage
from mirrorflow_airflow.operators.approval import FailbackApproval, approval_params
from mirrorflow_airflow.params import dry_run
from mirrorflow_airflow.switch_tasks import add_switch_tasks

log = logging.getLogger(__name__)


def preflight_task(flow_name: str, params: dict[str, Any], config_path: str | None = None) -> dict[str, Any]:
    """The plan and its report (text, and Markdown for the approval page)."""
    from mirrorflow.errors import MirrorflowError
    from mirrorflow.ops.dr.client_switch import plan_switch
    from mirrorflow.ops.dr.failback import switch_after
    from mirrorflow.ops.dr.failback_preflight import plan_failback

    cfg = MirrorflowHook(config_path).get_conn()
    flow = cfg.flow(flow_name)
    dry = bool(params.get("dry_run"))
    try:  # every step's callable imported before anything changes
        steps = plan_switch(flow, "failback")
    except MirrorflowError as exc:
        raise AirflowFailException(str(exc)) from None
    rep = plan_failback(cfg, flow, bool(params.get("reseed")), bool(params.get("accept_loss")), dry_run=dry)
    if rep.plan is not None:
        rep.switch_steps = steps
    if dry and rep.plan is not None:
        rep.note = "dry run: nothing changed"
        if rep.switch_steps:
            rep.switch = switch_after(cfg, flow, rep, dry_run=True, via="airflow")
    text = rep.render()
    log.info("%s", text)
    figures = {"to_copy": rep.to_copy, "diverged": rep.diverged, "split": rep.split, "done": False, "note": rep.note}
    if rep.plan is None:  # already started by a failback of this failover (as the CLI, not an error)
        return {"plan_id": None, "text": text, **figures}
    if rep.plan.blocked and not dry:
        raise AirflowFailException(text)
    return {"plan_id": rep.plan.id, "plan": rep.plan.to_dict(), "text": text, "markdown": rep.markdown(), **figures}


def start_task(
    flow_name: str, preflight: dict[str, Any], approval: dict[str, Any] | None, config_path: str | None = None
) -> dict[str, Any]:
    """Start exactly the approved plan (fails, starting nothing, when the state moved)."""
    from mirrorflow.errors import MirrorflowError
    from mirrorflow.ops.dr.failback_commit import commit_failback
    from mirrorflow.ops.dr.failback_plan import FailbackPlan

    cfg = MirrorflowHook(config_path).get_conn()
    plan = FailbackPlan.from_dict(preflight["plan"])
    if not approval or approval.get("plan_id") != plan.id:
        raise AirflowFailException(f"the approval was for plan {(approval or {}).get('plan_id')}, not {plan.id}")
    try:
        rep = commit_failback(cfg, cfg.flow(flow_name), plan, str(approval["approved_by"]), via="airflow")
    except MirrorflowError as exc:
        raise AirflowFailException(str(exc)) from None
    text = rep.render()
    log.info("%s", text)
    if not rep.done and not (rep.note or "").startswith("nothing to do"):
        raise AirflowFailException(text)
    if rep.done:  # the reverse flow's topics: from the failed-over target back to the source
        report_lineage(cfg, cfg.flow(rep.reverse), failback_pairs(cfg.flow(rep.reverse), rep.seeds))
    return {
        "plan_id": plan.id,
        "approved_by": rep.approved_by,
        "done": rep.done,
        "text": text,
        "to_copy": rep.to_copy,
        "switch": rep.done,  # the client-switch tasks run after a failback that started the reverse flow
    }


def missing_reverse_flow(reverse: str) -> Param:
    """A field no value satisfies, so the trigger form says before any run exists why a failback
    cannot succeed for this config: it has no reverse flow to start (the API refuses it too)."""
    return Param(
        None,
        type="string",
        pattern="^$",
        minLength=1,
        title=f"Reverse flow {reverse} is not in this config",
        description=f"A failback starts flow {reverse}: add it to the config (the same topics, groups and "
        "replication policy, standby: true; docs/operations.md) and this form submits. Until then no run "
        "can succeed, so none can be triggered.",
    )


def build_failback_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    reverse = f"{flow.target}->{flow.source}"
    params: dict[str, Any] = {
        "dry_run": dry_run("Preflight report only"),
        "reseed": Param(
            False,
            type="boolean",
            title="Source rebuilt (reseed)",
            description=f"{flow.source} was rebuilt empty: {reverse} copies all of {flow.target}'s topics "
            f"from their start (refused if {flow.source}'s topics hold records)",
        ),
        "accept_loss": Param(
            False,
            type="boolean",
            title="Accept what the target lost",
            description=f"Start although {flow.target} no longer holds records the failback would copy (deleted by "
            "retention, removed by compaction) or cannot tell them from the failed-over flow's (a topic recreated, "
            "a partition truncated): the preflight counts and names them; without this the run fails there",
        ),
        **approval_params(),
    }
    missing = reverse not in cfg.flows
    if missing:
        params["reverse_flow"] = missing_reverse_flow(reverse)
    with flow_dag(
        "failback",
        flow,
        f"start {reverse} from the failover of {flow.name} (disaster recovery)"
        + (f" -- cannot run: this config has no flow {reverse}" if missing else ""),
        None,
        params=params,
        doc_md=__doc__,
    ) as dag:

        @task(task_id="preflight", retries=0)
        def preflight(params: dict | None = None) -> dict[str, Any]:
            """The plan: the divergence, what the reverse flow copies and where it starts, what was lost."""
            return preflight_task(name, params or {}, path)

        @task.short_circuit(task_id="go_on")
        def go_on(params: dict | None = None, ti: Any = None) -> bool:
            """A dry run, or a reverse flow already started by this failover's failback, ends here."""
            return not (params or {}).get("dry_run") and bool(ti.xcom_pull(task_ids="preflight")["plan_id"])

        approve = FailbackApproval(
            reverse=reverse,
            task_id="approve_failback",
            subject=f"Start {reverse} (failback of {flow.name}): plan "
            "{{ ti.xcom_pull(task_ids='preflight')['plan_id'] }}",
            body="{{ ti.xcom_pull(task_ids='preflight')['markdown'] }}",
            retries=0,
        )

        @task(task_id="start", retries=0)
        def start(ti: Any = None) -> dict[str, Any]:
            """Start exactly the approved plan, record the failback and its approver."""
            return start_task(
                name, ti.xcom_pull(task_ids="preflight"), ti.xcom_pull(task_ids="approve_failback"), config_path=path
            )

        started = start()
        preflight() >> go_on() >> approve >> started
        add_switch_tasks(flow, "failback", started, "start", path)
    return dag


def build_failback_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One failback DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_failback_dag)
