"""Re-seed DAGs: one per enabled flow, `mirrorflow_reseed__<flow.id>`, manual trigger only.

Restarts a topic whose partitions a run **stopped** because their state no longer describes them
(a source or target topic recreated, a target truncated, the remote topic renamed by a
replication-policy change; the replicate DAG's report and the status page name them). It writes,
per partition of the source topic as it is now, a progress starting at the source's log start and
a new offset-map epoch; the next replicate run copies the topic from its start into the remote
topic (see docs/state.md). The same core function as `mirrorflow reseed`.

Params: `topic` (the SOURCE topic) and `dry_run` (on by default: the log says what it would write;
trigger again with it off to write).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import DAG, task

from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.inputs import RESEED
from mirrorflow_airflow.common import flow_dag, flow_dags, task_config_path
from mirrorflow_airflow.dag_builders.control import triggering_user
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.params import dry_run, form

log = logging.getLogger(__name__)


def reseed_task(
    flow_name: str,
    topic: str | None,
    dry_run: bool,
    config_path: str | None = None,
    by: str | None = None,
    force: bool = False,
) -> dict[str, Any]:
    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.reseed import lines, reseed, to_dicts

    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    with FlowClients(cfg, flow) as clients:
        plan = reseed(clients, topic, dry_run=dry_run, by=by, via="airflow", force=force)
    for line in lines(flow.name, str(topic), plan, dry_run):
        log.info("%s", line)
    return {"topic": topic, "dry_run": dry_run, "partitions": to_dicts(plan)}


def build_reseed_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    with flow_dag(
        "reseed",
        flow,
        "restart a stopped topic (recreated, truncated, renamed) from the source's start",
        None,
        params={
            **form(RESEED),
            "dry_run": dry_run("Only log what would be written (on by default)", default=True),
        },
        doc_md=__doc__,
    ) as dag:

        @task(task_id="reseed", retries=0)
        def run(params: dict | None = None, dag_run: Any = None) -> dict[str, Any]:
            """Write the new progress and map epoch of every partition of the topic (or say what it would)."""
            p = params or {}
            return reseed_task(
                name, p.get("topic"), bool(p.get("dry_run", True)), path, triggering_user(dag_run), bool(p.get("force"))
            )

        run()
    return dag


def build_reseed_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One re-seed DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_reseed_dag)
