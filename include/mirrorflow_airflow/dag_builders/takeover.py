"""Takeover DAGs: one per enabled flow, `mirrorflow_takeover__<flow.id>`, manual trigger only.

Moves a flow from a stopped MirrorMaker 2 deployment (dedicated, Kafka Connect or Strimzi) to
mirrorflow: every partition continues right after the last record MM2 copied (its Connect offsets
on the target, checked against the remote topic's content, so no record is copied twice and none
is skipped), and MM2's checkpoints stay the groups' floor. Stop MM2 first: a takeover is refused
while MM2's heartbeats still arrive. The same core function as `mirrorflow takeover` (see
docs/operations.md, "Migrating from MirrorMaker 2").
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import DAG, task

from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.takeover.inputs import TAKEOVER
from mirrorflow_airflow.common import flow_dag, flow_dags, log_report, task_config_path
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.params import dry_run, form

log = logging.getLogger(__name__)


def takeover_task(flow_name: str, params: dict[str, Any], config_path: str | None = None) -> dict[str, Any]:
    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.takeover.from_mm2 import takeover_given

    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    with FlowClients(cfg, flow) as clients:
        rep = takeover_given(clients, params, dry_run=bool(params.get("dry_run", True)), via="airflow")
    log_report(log, rep)
    return rep.to_dict()


def build_takeover_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    with flow_dag(
        "takeover",
        flow,
        "continue the flow exactly where a stopped MirrorMaker 2 left it",
        None,
        params={
            "dry_run": dry_run("Only log what would be written (on by default)", default=True),
            **form(TAKEOVER),
        },
        doc_md=__doc__,
    ) as dag:

        @task(task_id="takeover", retries=0)
        def run(params: dict | None = None) -> dict[str, Any]:
            """Write each partition's progress right after MM2's last copied record (or say what it would)."""
            return takeover_task(name, dict(params or {}), path)

        run()
    return dag


def build_takeover_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One takeover DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_takeover_dag)
