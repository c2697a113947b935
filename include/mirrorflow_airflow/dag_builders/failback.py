"""Failback DAGs: one per enabled flow, `mirrorflow_failback__<flow.id>`, manual trigger only.

Starts the reverse flow of a failed-over flow from its failover record -- the same core function as
`mirrorflow failback` (mirrorflow.ops.dr.failback):

* `preflight`: the report: per partition, the records on the target the failed-over flow did not
  write (from its offset map; the reverse flow copies them), the divergence (records the source had
  that never reached the target) and the split brain (records the source accepted after the
  failover), as offset ranges and counts; nothing is deleted.
* `go_on`: ends the run here for a dry run.
* `approve_failback`: Airflow's human-in-the-loop ApprovalOperator shows the report; the decision
  is recorded in Airflow. Reject skips the start.
* `start`: seeds the reverse flow's progress (its ledger) and offset map, sets it running and
  records the failback on its target. Its own DAGs (sync, replicate, checkpoint) copy from there.

Params: `dry_run`, `reseed` (the source was rebuilt empty: the reverse flow copies all of the
target's topics from their start; see `mirrorflow failback --reseed`).
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
from mirrorflow_airflow.lineage import failback_pairs, report_lineage
from mirrorflow_airflow.params import dry_run

log = logging.getLogger(__name__)


def failback_task(flow_name: str, commit: bool, config_path: str | None = None, reseed: bool = False) -> dict[str, Any]:
    """The preflight (commit=False: a dry run of the core failback) or the start."""
    from mirrorflow.ops.dr.failback import failback

    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    rep = failback(cfg, flow, dry_run=not commit, reseed=reseed)
    text = rep.render()
    log.info("%s", text)
    if commit and not rep.done and not (rep.note or "").startswith("nothing to do"):
        raise AirflowFailException(text)
    if commit and rep.done:  # the reverse flow's topics: from the failed-over target back to the source
        report_lineage(cfg, cfg.flow(rep.reverse), failback_pairs(cfg.flow(rep.reverse), rep.seeds))
    return {
        "text": text,
        "done": rep.done,
        "note": rep.note,
        "to_copy": rep.to_copy,
        "diverged": rep.diverged,
        "split": rep.split,
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
        "dry_run": dry_run("Divergence report only"),
        "reseed": Param(
            False,
            type="boolean",
            title="Source rebuilt (reseed)",
            description=f"{flow.source} was rebuilt empty: {reverse} copies all of {flow.target}'s topics "
            f"from their start (refused if {flow.source}'s topics hold records)",
        ),
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
            """The divergence report and where the reverse flow starts."""
            return failback_task(name, False, path, bool((params or {}).get("reseed")))

        @task.short_circuit(task_id="go_on")
        def go_on(params: dict | None = None) -> bool:
            """A dry run ends after the preflight."""
            return not bool((params or {}).get("dry_run"))

        approve = ApprovalOperator(
            task_id="approve_failback",
            subject=f"Start {reverse} (failback of {flow.name})?",
            body="{{ ti.xcom_pull(task_ids='preflight')['text'] }}",
        )

        @task(task_id="start", retries=0)
        def start(params: dict | None = None) -> dict[str, Any]:
            """Seed and start the reverse flow, record the failback."""
            return failback_task(name, True, path, bool((params or {}).get("reseed")))

        preflight() >> go_on() >> approve >> start()
    return dag


def build_failback_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One failback DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_failback_dag)
