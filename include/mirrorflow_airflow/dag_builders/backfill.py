"""Backfill DAGs: one per enabled flow, `mirrorflow_backfill__<flow.id>`, manual trigger only.

Copies a historical source range the flow has not copied yet -- e.g. the history of a flow that
started at `initial.position: latest` -- with the same copier, transactions, offset map and ledger
as the replicate DAG, under the flow's lease (while a replicate run holds it, the backfill run
ends skipped and says who holds it). A paused or stopped flow skips it with the reason.

* `plan`: resolves From/To per source partition, subtracts what the flow's ledger already holds,
  hands the plan to `copy` in XCom (flow name, config path, units flagged `backfill` -- never
  secrets; replication.handoff); logs
  per partition the offset range and the records it copies (or would copy, in a dry run) and the
  gaps source retention already removed (reported, not errors).
* `copy`: `spark-submit` of the same job as the replicate DAG (skipped when there is nothing to
  copy, or in a dry run).
* `report`: reads the units' results from the target by run id (no shared disk); records and bytes
  per partition, gaps; releases the lease; an Asset event per remote topic it wrote records to, as
  the replicate DAG's report emits (kind `backfill` in its extra).

Backfilled records land AFTER newer ones in the target partition (Kafka appends); translation,
checkpoints and group sync stay exact through the offset map. A second identical backfill copies
nothing. Use this DAG (or `mirrorflow backfill`) for ranges given as offsets or `start`/`earliest`;
use Airflow's own backfill of the replicate DAG (`airflow backfill create`) to fill past data
intervals by record time (see docs/replicate.md, "Backfill").
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import DAG, AssetAlias, Param, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import LeaseError, MirrorflowError
from mirrorflow.ops.backfill import BackfillReport, apply_results
from mirrorflow.replication.backfill_plan import WHEN_HELP, WHEN_PATTERN, When, partitions_of
from mirrorflow.replication.run import ReplicationRun, RunSkipped
from mirrorflow.replication.run_options import RunOptions
from mirrorflow.replication.spark import JOB_PATH, spark_conf, spark_env
from mirrorflow_airflow import params as P
from mirrorflow_airflow.assets import emit_copied
from mirrorflow_airflow.common import flow_dag, flow_dag_id, flow_dags, log_report, task_config_path
from mirrorflow_airflow.dag_builders.replicate import lease_owner, release_after_failure
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.operators.spark_submit import SPARK_CONN_ID, MirrorflowSparkSubmitOperator
from mirrorflow_airflow.run_notes import skip_task

log = logging.getLogger(__name__)


def when_param(default: str, title: str, what: str) -> Param:
    """A From/To field: the pattern refuses a bad value in the form, before any task runs."""
    return Param(default, type="string", pattern=WHEN_PATTERN, title=title, description=f"{what}: {WHEN_HELP}")


def backfill_params() -> dict[str, Param]:
    return {
        "topics": P.topics_subset(),
        "from": when_param("earliest", "From", "Range start (inclusive)"),
        "to": when_param("start", "To", "Range end (exclusive)"),
        "dry_run": P.dry_run("Only log per partition the offset range and records it would copy; copy nothing"),
    }


def plan_task(flow_name: str, run_id: str, p: dict[str, Any], config_path: str | None = None) -> dict[str, Any]:
    """The backfill run's `begin` and `make_plan` (replication.run; a dry run takes no lease); the
    plan handed on in XCom, with the range as parsed."""
    cfg = MirrorflowHook(config_path).get_conn()
    flow = cfg.flow(flow_name)
    lo, hi = When.parse(p.get("from"), "from"), When.parse(p.get("to"), "to")
    opts = RunOptions(P.regex_or_none(p, "topics"), None, bool(p.get("dry_run", False)))
    run = ReplicationRun(
        cfg, flow, "backfill", *lease_owner(flow, run_id, "backfill"), opts, "backfill-" + run_id, (lo, hi)
    )
    with FlowClients(cfg, flow) as clients:
        try:
            run.begin(clients)
        except RunSkipped as exc:
            skip_task(str(exc), note=str(exc))
        except LeaseError as exc:
            raise AirflowSkipException(str(exc)) from None
        try:
            plan = run.make_plan(clients)
        except BaseException:
            run.release_lease(clients)
            raise
    rep = BackfillReport(flow.name, str(lo), str(hi), opts.topics, opts.dry_run, run.parts)
    log_report(log, rep)
    return {
        "plan": run.handoff(),
        "run": run.handed["run"],
        "units": len(plan.units),
        "offsets": rep.offsets,
        "dry_run": opts.dry_run,
        "from": str(lo),
        "to": str(hi),
        "topics": opts.topics,
    }


def report_task(
    flow_name: str, paths: dict[str, Any], config_path: str | None = None, outlet_events: Any = None
) -> dict[str, Any]:
    """The backfill run's `report` (records, bytes, gaps per partition); releases the lease; an Asset
    event per remote topic it wrote to (mirrorflow_airflow.assets)."""
    cfg = MirrorflowHook(config_path).get_conn()
    run = ReplicationRun.from_handoff(cfg, paths["plan"])
    rep = BackfillReport(run.flow.name, paths["from"], paths["to"], paths.get("topics"), paths["dry_run"])
    rep.partitions = partitions_of(run.handed)
    try:  # written to the target by the copy job under the run's id (no shared disk)
        rep.run, results = run.collect_and_report(report=not paths["dry_run"])
    except MirrorflowError as exc:
        raise AirflowFailException(str(exc)) from None
    apply_results(rep.partitions, results)
    log_report(log, rep)
    if outlet_events is not None:
        emit_copied(outlet_events, flow_dag_id("backfill", run.flow), cfg, run.flow, results, "backfill", paths["run"])
    if not rep.ok:
        raise AirflowFailException(rep.render())
    return rep.to_dict()


def build_backfill_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    env = {k: v for k, v in spark_env().items() if k in ("PATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    with flow_dag(
        "backfill",
        flow,
        "copy a historical source range not copied yet (plan -> Spark copy -> report)",
        None,
        params=backfill_params(),
        doc_md=__doc__,
    ) as dag:

        @task(task_id="plan", retries=0)
        def plan(run_id: str | None = None, params: dict | None = None) -> dict[str, Any]:
            """Resolve From/To, subtract the ledger, write the plan file (dry run: only log it)."""
            return plan_task(name, run_id or "manual", params or {}, path)

        planned: Any = plan()  # an XComArg: its task's return value at run time
        copy = MirrorflowSparkSubmitOperator(
            task_id="copy",
            application=str(JOB_PATH),  # its argument, the plan file, is set at execute time
            spark_conn_id=SPARK_CONN_ID,
            plan_task_id="plan",
            conf=spark_conf(cfg),
            env_vars=env,
            name=f"mirrorflow-backfill-{flow.id}",
            retries=0,  # a rerun plans again: what the first attempt copied is in the ledger
            on_failure_callback=release_after_failure(path),
        )

        @task(task_id="report", trigger_rule="none_failed_min_one_success", retries=0, outlets=[AssetAlias(dag.dag_id)])
        def report(paths: dict[str, Any], outlet_events=None) -> dict[str, Any]:
            """Records, bytes and gaps per partition; frees the lease; Asset events."""
            return report_task(name, paths, path, outlet_events)

        planned >> copy >> report(planned)
    return dag


def build_backfill_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One backfill DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_backfill_dag)
