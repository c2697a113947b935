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

from airflow.sdk import DAG, Param, task

from mirrorflow.config import Config, FlowConfig
from mirrorflow_airflow.common import flow_dag, flow_dags, log_report, task_config_path
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.params import dry_run, optional_text

log = logging.getLogger(__name__)


def takeover_task(flow_name: str, params: dict[str, Any], config_path: str | None = None) -> dict[str, Any]:
    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.takeover.from_mm2 import takeover

    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    with FlowClients(cfg, flow) as clients:
        rep = takeover(
            clients,
            params.get("mm2_offsets_topic") or None,
            params.get("mm2_source") or None,
            dry_run=bool(params.get("dry_run", True)),
            quiet_s=float(params.get("mm2_quiet_seconds", 30)),
            connector=params.get("mm2_connector") or None,
        )
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
            "mm2_offsets_topic": optional_text(
                "MM2 offsets topic",
                "MM2's Connect offsets topic on the target (the worker's offset.storage.topic; Strimzi: "
                "mirrormaker2-cluster-offsets); empty: dedicated mode's mm2-offsets.<source>.internal",
            ),
            "mm2_connector": optional_text(
                "MM2 source connector",
                "The MirrorSourceConnector's name in Connect (e.g. A-to-B-MirrorSourceConnector; Strimzi: "
                "A->B.MirrorSourceConnector); empty: the only one with offsets for the source",
            ),
            "mm2_source": optional_text(
                "MM2 source alias", "The source cluster's alias in MM2's config; empty: the flow's source"
            ),
            "mm2_quiet_seconds": Param(
                30,
                type="number",
                minimum=0,
                title="MM2 quiet seconds",
                description="MM2 counts as stopped when its last heartbeat into the target is older than this",
            ),
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
