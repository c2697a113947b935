"""Translate DAGs: one per enabled flow, `mirrorflow_translate__<flow.id>`, manual trigger only.

Where a consumer that keeps its positions outside consumer groups (Spark Structured Streaming, Flink,
an `assign()` consumer) resumes on the target after a failover -- the same core function as
`mirrorflow translate --flow A->B --offsets JSON` (mirrorflow.groups.translation.translate_offsets).

Param (`offsets`, required): Spark's `startingOffsets` form keyed by the SOURCE topic
(`{"orders": {"0": 42, "1": 17}}`, e.g. the last line of a Spark checkpoint's `offsets/<batchId>`);
the task's log and its XCom `starting_offsets` give the same form keyed by the target topic, for
`startingOffsets` on the target, with each partition's status (exact, or an earlier position:
reread, pruned; never past an unread record). It reads only the target. The translation is recorded
in the flow's operations history (the status page shows it) with the Airflow user who triggered it.
Bad input (a topic the flow does not replicate, a partition the target topic lacks) fails the task
naming it.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import DAG, Param, task

from mirrorflow.config import Config, FlowConfig
from mirrorflow_airflow.common import flow_dag, flow_dags, log_report, task_config_path
from mirrorflow_airflow.dag_builders.control import triggering_user
from mirrorflow_airflow.hooks import MirrorflowHook

log = logging.getLogger(__name__)


def translate_task(flow_name: str, offsets: Any, by: str, config_path: str | None = None) -> dict[str, Any]:
    """Translate `offsets`, log the report, record it in the history, return it (fails on bad input)."""
    from airflow.sdk.exceptions import AirflowFailException

    from mirrorflow.errors import MirrorflowError
    from mirrorflow.groups.translation import record_translation, translate_offsets

    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    try:
        rep = translate_offsets(cfg, flow, offsets)
        record_translation(cfg, flow, rep, by, "airflow")
    except MirrorflowError as exc:
        raise AirflowFailException(str(exc)) from None
    log_report(log, rep)
    return rep.to_dict()


def build_translate_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    with flow_dag(
        "translate",
        flow,
        f"where a consumer outside groups (Spark, Flink, assign()) resumes on {flow.target}: startingOffsets",
        None,
        params={
            "offsets": Param(
                {},
                type="object",
                minProperties=1,
                title="Offsets on the source (startingOffsets)",
                description=f"Spark's startingOffsets form keyed by the topic on {flow.source}: "
                '{"orders": {"0": 42, "1": 17}} (the next offset to read per partition; -2 earliest, -1 latest)',
            ),
        },
        doc_md=__doc__,
    ) as dag:

        @task(task_id="translate", retries=0)
        def run(params: dict | None = None, dag_run: Any = None) -> dict[str, Any]:
            """Translate the positions to the target; the answer is the XCom's `starting_offsets`."""
            return translate_task(name, (params or {}).get("offsets") or {}, triggering_user(dag_run), path)

        run()
    return dag


def build_translate_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One translate DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_translate_dag)
