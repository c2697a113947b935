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

from typing import Any

from airflow.sdk import DAG, Param

from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.dr import inputs
from mirrorflow_airflow.common import flow_dag, flow_dags, task_config_path
from mirrorflow_airflow.gated_tasks import gated_chain
from mirrorflow_airflow.operators.approval import FailbackApproval, approval_params
from mirrorflow_airflow.params import dry_run, form


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
    path = task_config_path(cfg)
    reverse = f"{flow.target}->{flow.source}"
    params: dict[str, Any] = {
        "dry_run": dry_run("Preflight report only"),
        **form(inputs.FAILBACK),
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
        approve = FailbackApproval(
            reverse=reverse,
            task_id="approve_failback",
            subject=f"Start {reverse} (failback of {flow.name}): plan "
            "{{ ti.xcom_pull(task_ids='preflight')['plan_id'] }}",
            body="{{ ti.xcom_pull(task_ids='preflight')['markdown'] }}",
            retries=0,
        )
        gated_chain("failback", flow, approve, "start", path)
    return dag


def build_failback_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One failback DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_failback_dag)
