"""Backfill DAGs: one per enabled flow, `mirrorflow_backfill__<flow.id>`, manual trigger only.

Copies a historical source range the flow has not copied yet -- e.g. the history of a flow that
started at `initial.position: latest` -- with the same run object (replication.run.run), copier,
transactions, offset map and ledger as the replicate DAG, under the flow's lease (while a replicate
run holds it, the backfill run ends skipped and says who holds it). A paused or stopped flow skips
it with the reason. The same two shapes as the replicate DAG:

* `spark.remote`: ONE task, `backfill`, runs the whole backfill as `mirrorflow backfill` does
  (ops.backfill: plan, copy on the Spark Connect server, report, release);
* without it: `plan` resolves From/To per source partition, subtracts what the flow's ledger
  already holds and hands the plan on in XCom (never secrets; replication.executors.handoff); `copy` is
  `spark-submit` of the same job as the replicate DAG (skipped when there is nothing to copy, or in
  a dry run); `report` reads the units' results from the target by run id (no shared disk) and
  releases the lease.

It logs per partition the offset range and the records it copies (or would copy, in a dry run) and
the gaps source retention already removed (reported, not errors), and emits an Asset event per
remote topic it wrote records to, as the replicate DAG does (kind `backfill` in its extra).

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
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.ops.backfill import BackfillReport, apply_results, carry_out_backfill
from mirrorflow.ops.inputs import BACKFILL, backfill_inputs
from mirrorflow.replication.plan.backfill_plan import partitions_of
from mirrorflow.replication.run.run import ReplicationRun
from mirrorflow.replication.run.run_kinds import Backfill
from mirrorflow.replication.run.scratch import Scratch
from mirrorflow_airflow import params as P
from mirrorflow_airflow.assets import emit_copied
from mirrorflow_airflow.common import flow_dag, flow_dag_id, flow_dags, log_report, task_config_path
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.lineage import report_plan_lineage
from mirrorflow_airflow.operators.deferrable import DeferrableTask
from mirrorflow_airflow.replication_tasks import begin, lease_owner, submit_copy

log = logging.getLogger(__name__)


def backfill_params() -> dict[str, Param]:
    """The trigger form, declared once for the form and the CLI (mirrorflow.ops.inputs.BACKFILL); the
    From/To patterns refuse a bad value before any task runs."""
    return P.form(BACKFILL)


def new_run(flow_name: str, run_id: str, p: dict[str, Any], config_path: str | None) -> ReplicationRun:
    """The backfill run of a DAG run, from its form (a dry run takes no lease)."""
    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    lo, hi, opts = backfill_inputs(p, "airflow")
    owner, who = lease_owner(flow, run_id, "backfill")
    return ReplicationRun(cfg, flow, Backfill((lo, hi)), owner, who, opts, "backfill-" + run_id, log=log.info)


def new_report(run: ReplicationRun) -> BackfillReport:
    assert isinstance(run.kind, Backfill), "a backfill run"
    lo, hi = run.kind.window
    return BackfillReport(run.flow.name, str(lo), str(hi), run.options.topics, run.dry_run)


def plan_task(
    flow_name: str, run_id: str, p: dict[str, Any], config_path: str | None = None, **waited: Any
) -> dict[str, Any]:
    """The backfill run's `begin` and `make_plan`; the plan handed on in XCom, with the range as parsed."""
    run = new_run(flow_name, run_id, p, config_path)
    with FlowClients(run.cfg, run.flow) as clients:
        begin(run, clients, config_path, **waited)
        run.plan_for_handoff(clients)
    rep = new_report(run)
    rep.partitions = run.parts
    log_report(log, rep)
    summary = {"plan": run.handoff(), **run.plan_summary(), "offsets": rep.offsets}
    return {**summary, "dry_run": rep.dry_run, "from": rep.start, "to": rep.end, "topics": rep.topics}


def backfill_task(
    flow_name: str, run_id: str, p: dict[str, Any], config_path: str | None, outlet_events: Any, **waited: Any
) -> dict[str, Any]:
    """The whole backfill in one task (spark.remote: the copy runs on the Spark Connect server)."""
    run = new_run(flow_name, run_id, p, config_path)
    rep = new_report(run)
    with FlowClients(run.cfg, run.flow) as clients:
        begin(run, clients, config_path, **waited)
        carry_out_backfill(run, clients, rep, "connect", None, Scratch.for_task("backfill"))
    report_plan_lineage(run.plan, config_path)
    return publish(run, rep, run.results, outlet_events)


def report_task(
    flow_name: str, paths: dict[str, Any], config_path: str | None = None, outlet_events: Any = None
) -> dict[str, Any]:
    """The backfill run's `report` and `release` after a spark-submit copy."""
    run = ReplicationRun.from_handoff(MirrorflowHook(config_path).get_conn(), paths["plan"])
    rep = BackfillReport(run.flow.name, paths["from"], paths["to"], paths.get("topics"), paths["dry_run"])
    rep.partitions = partitions_of(run.plan)
    try:  # written to the target by the copy job under the run's id (no shared disk)
        rep.run, results = run.collect_and_report(report=not paths["dry_run"])
    except MirrorflowError as exc:
        raise AirflowFailException(str(exc)) from None
    apply_results(rep.partitions, results)
    return publish(run, rep, results, outlet_events)


def publish(run: ReplicationRun, rep: BackfillReport, results: list[dict], outlet_events: Any) -> dict[str, Any]:
    """Records, bytes and gaps per partition to the log; an Asset event per remote topic written."""
    log_report(log, rep)
    if outlet_events is not None:
        alias = flow_dag_id("backfill", run.flow)
        emit_copied(outlet_events, alias, run.cfg, run.flow, results, "backfill", run.plan.run if run.plan else "")
    if not rep.ok:
        raise AirflowFailException(rep.render())
    return rep.to_dict()


def build_backfill_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    steps = "plan, copy on the Spark Connect server, report" if cfg.spark.remote else "plan -> Spark copy -> report"
    what = f"copy a historical source range not copied yet ({steps})"
    with flow_dag("backfill", flow, what, None, params=backfill_params(), doc_md=__doc__) as dag:
        outlets = [AssetAlias(dag.dag_id)]
        if cfg.spark.remote:  # the copy runs on the server: the whole backfill in one task

            def whole(context: Any, **kw: Any) -> dict[str, Any]:
                run_id, events = context.get("run_id") or "manual", context["outlet_events"]
                return backfill_task(name, run_id, context.get("params") or {}, path, events, **kw)

            DeferrableTask(task_id="backfill", python_callable=whole, outlets=outlets, retries=0)
            return dag

        def plan(context: Any, **kw: Any) -> dict[str, Any]:
            """Resolve From/To, subtract the ledger, hand the plan on (dry run: only log it)."""
            return plan_task(name, context.get("run_id") or "manual", context.get("params") or {}, path, **kw)

        planned: Any = DeferrableTask(task_id="plan", python_callable=plan, retries=0)
        copy = submit_copy(cfg, flow, "backfill", path)

        @task(task_id="report", trigger_rule="none_failed_min_one_success", retries=0, outlets=outlets)
        def report(paths: dict[str, Any], outlet_events=None) -> dict[str, Any]:
            """Records, bytes and gaps per partition; frees the lease; Asset events."""
            return report_task(name, paths, path, outlet_events)

        planned >> copy >> report(planned.output)
    return dag


def build_backfill_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One backfill DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_backfill_dag)
