"""Schema DAGs: one per enabled flow whose clusters both name a schema registry,
`mirrorflow_schemas__<flow.id>`, manual trigger (scheduled passes run in the flow's sync DAG, task `schemas`).

Copies the source registry's subjects (renamed by the flow's replication policy: `A.orders-value`), their
versions with their ids, references and compatibility settings into the target's registry, incrementally;
orphans on the target are reported, never deleted. A conflict (an id or a renamed subject that already
holds another schema), an unreachable registry or a refused credential fails the task before anything is
written, naming the subject and id. The same core function as `mirrorflow schemas` (mirrorflow.schemas).

Params: `dry_run` (on by default: the log lists what would be copied; trigger again with it off to copy).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError
from mirrorflow_airflow.common import emit_samples, flow_dag, log_report, task_config_path
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.params import dry_run

log = logging.getLogger(__name__)


def schemas_task(flow_name: str, dry_run: bool, config_path: str | None = None) -> dict[str, Any]:
    """One schema pass of the flow: its report in the log, its figures as metrics, its brief to XCom."""
    from mirrorflow.observe.metrics import schema_samples
    from mirrorflow.schemas.replicate import replicate_schemas
    from mirrorflow.state.run_log import RunRecord

    try:
        cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
        run = replicate_schemas(cfg, flow, dry_run=dry_run, via="airflow")
    except ConfigError as exc:
        raise AirflowFailException(str(exc)) from None
    log_report(log, run)
    if not dry_run and not run.skipped:
        emit_samples(schema_samples(flow, RunRecord("schemas", int(time.time() * 1000), True, records=len(run.copies))))
    return run.brief()


def build_schemas_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    with flow_dag(
        "schemas",
        flow,
        "copy the source registry's schemas to the target's registry, ids kept",
        None,
        params={"dry_run": dry_run("Only log what would be copied (on by default)", default=True)},
        doc_md=__doc__,
    ) as dag:

        @task(task_id="schemas", retries=0)
        def run(params: dict | None = None) -> dict[str, Any]:
            """Copy the missing schema versions with their ids (or list them)."""
            return schemas_task(name, bool((params or {}).get("dry_run", True)), path)

        run()
    return dag


def build_schemas_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One schema DAG per enabled flow whose clusters both name a registry, keyed by dag_id."""
    from mirrorflow.schemas.replicate import has_registries

    cfg = cfg if cfg is not None else MirrorflowHook().get_conn()
    dags = (build_schemas_dag(cfg, f) for f in cfg.flows.values() if f.enabled and has_registries(cfg, f))
    return {dag.dag_id: dag for dag in dags}
