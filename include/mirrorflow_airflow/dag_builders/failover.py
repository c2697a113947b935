"""Failover DAGs: one per enabled flow, `mirrorflow_failover__<flow.id>`, manual trigger only.

Moves the flow's consumer groups to its target cluster and stops the flow -- the same core
function as `mirrorflow failover` (mirrorflow.ops.failover):

* `preflight`: in *planned* mode first drains (topic sync, replicate until lag 0, a last
  checkpoint); then the report: per partition replicated up to, source end (when the source
  answers), offsets not replicated and seconds behind (the RPO); per group where it resumes on the
  target and which groups are left alone because they have active members there.
* `go_on`: ends the run here for a dry run.
* `approve_failover`: Airflow's human-in-the-loop ApprovalOperator shows the report; the decision
  is recorded in Airflow. Reject skips the commit.
* `commit`: commits the checkpointed offsets on the target (never backwards, never a group with
  active members), sets the flow to `stopped` and writes the failover record to the target's state.

Params: `mode` (unplanned: the source is lost; planned: the source is up and its producers are
stopped), `groups` (a regex; empty: every group the flow checkpoints), `dry_run`.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.config import Config, FlowConfig
from mirrorflow_airflow.common import flow_dag, flow_dags, task_config_path
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.params import dry_run, regex

log = logging.getLogger(__name__)


def failover_task(
    flow_name: str, params: dict[str, Any], commit: bool, config_path: str | None = None
) -> dict[str, Any]:
    """The preflight (commit=False: a dry run of the core failover) or the commit."""
    from mirrorflow.ops.failover import failover

    cfg = MirrorflowHook(config_path).get_conn()
    flow = cfg.flow(flow_name)
    mode = str(params.get("mode") or "unplanned")
    rep = failover(
        cfg,
        flow,
        mode,
        str(params.get("groups") or "") or None,
        dry_run=not commit,
        copy_mode="submit",
        log=log.info,
        drain=not commit and not params.get("dry_run"),  # planned: the preflight drains, the commit does not
    )
    text = rep.render()
    log.info("%s", text)
    if commit and not rep.done and not (rep.note or "").startswith("nothing to do"):
        raise AirflowFailException(text)
    return {"text": text, "done": rep.done, "note": rep.note, "not_replicated": rep.not_replicated}


def build_failover_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    with flow_dag(
        "failover",
        flow,
        f"move the consumer groups to {flow.target} and stop the flow (disaster recovery)",
        None,
        params={
            "mode": Param(
                "unplanned",
                enum=["unplanned", "planned"],
                title="Mode",
                description="unplanned: the source is lost (everything comes from the target); planned: the "
                "source is up and its producers are stopped (drain first)",
            ),
            "groups": regex("Groups (regex)", "Only these groups; empty: all of the flow's"),
            "dry_run": dry_run("Preflight report only"),
        },
        doc_md=__doc__,
    ) as dag:

        @task(task_id="preflight", retries=0)
        def preflight(params: dict | None = None) -> dict[str, Any]:
            """Drain (planned) and report the RPO and where each group resumes."""
            return failover_task(name, params or {}, commit=False, config_path=path)

        @task.short_circuit(task_id="go_on")
        def go_on(params: dict | None = None) -> bool:
            """A dry run ends after the preflight."""
            return not bool((params or {}).get("dry_run"))

        approve = ApprovalOperator(
            task_id="approve_failover",
            subject=f"Fail over {flow.name} to {flow.target}?",
            body="{{ ti.xcom_pull(task_ids='preflight')['text'] }}",
        )

        @task(task_id="commit", retries=0)
        def commit(params: dict | None = None) -> dict[str, Any]:
            """Commit the groups' offsets on the target, stop the flow, record the failover."""
            return failover_task(name, params or {}, commit=True, config_path=path)

        preflight() >> go_on() >> approve >> commit()
    return dag


def build_failover_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One failover DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_failover_dag)
