"""Replicate DAGs: one per enabled flow, `mirrorflow_replicate__<flow.id>`.

Each task is a shell over the run object, `mirrorflow.replication.run.run.ReplicationRun`, which the CLI
runs in one process; the shells add what is Airflow's: Params, XCom, skipped or failed, waits on the
triggerer, Asset events, lineage, the RPO check, metrics. Two shapes, by where the copy runs:

* `spark.remote` (a Spark Connect server; the default config's path): ONE task, `replicate`, runs
  the whole run as the CLI does: begin, plan, copy on the server, report, release. Nothing is
  handed between tasks; a run with nothing new copies nothing and never imports the Connect client.
* without it, the copy is a Spark application of its own: `plan` -> `copy` -> `report`.
  * `plan`: begin and plan; the plan (flow name, config path, units, the lease's owner, a run id --
    never secrets) goes on compressed in XCom, with a summary;
  * `copy`: writes the plan to a private scratch file of its own and runs `spark-submit --files PLAN
    .../mirrorflow/replication/executors/spark_job.py PLAN` through the `spark_default` connection (e.g.
    AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'); the driver (any host,
    also --deploy-mode cluster) writes the units' results to the target under the run id. The task
    fails clearly when the connection is missing (the provider would silently use yarn). Skipped
    when there is nothing to copy;
  * `report`: reads the results by run id from the target (a planned unit without one fails the
    task, naming it) and releases the lease (a failed copy releases it too).
  No task reads a file another task wrote (replication.executors.handoff), so each may run on its own machine
  or pod (Celery, Kubernetes executors).

Either way: the flow's lease makes one run of a flow at a time (while a CLI run or another
scheduler's run holds it, the DAG run ends skipped with who holds it since when; a run of `airflow
backfill create` waits for it instead, on the triggerer); a paused, stopped or failed-over flow ends
the run skipped with its note; clusters that do not answer as the run starts are waited for on the
triggerer. The report -- records, bytes, duration, lag per partition, replication latency -- goes to
the log and Airflow metrics, with an Asset event `kafka://<target bootstrap>/<topic>` per target
topic written (the copied offsets in its extra, mirrorflow_airflow.assets), OpenLineage for the
topics copied, and the flow's RPO checked after the copy. All replication state lives on the target
cluster. `max_active_runs=1`; the schedule is the flow's `schedule` property.

`schedule: "@continuous"` makes each run a continuous run (`mirrorflow.replication.run.continuous`):
the plan holds every partition without an end, the copy job keeps copying micro-batches until
`continuous.run.seconds` (or the flow is paused/stopped, read every
`continuous.state.check.seconds`), and Airflow starts the next run as soon as one ends; the lease
hands the flow from one run to the next (a run with nothing to follow yet ends after a wait on the
triggerer). New topics and partitions join at the next run. A triggered run's `topics` narrows what
it follows, `dry_run` plans and logs what would be copied and copies nothing;
`max_records_per_partition` fails the run (a followed partition has no end to cap).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, AssetAlias, task
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.observe.metrics import run_samples, source_samples
from mirrorflow.ops.inputs import REPLICATE, run_options
from mirrorflow.replication.plan.when import When
from mirrorflow.replication.run.continuous import is_continuous
from mirrorflow.replication.run.run import ReplicationRun
from mirrorflow.replication.run.run_kinds import Continuous, Interval, Once, RunKind
from mirrorflow.replication.run.run_report import RunReport
from mirrorflow.replication.run.scratch import Scratch
from mirrorflow_airflow.assets import emit_copied
from mirrorflow_airflow.common import (
    emit_samples,
    flow_dag,
    flow_dag_id,
    flow_dags,
    log_report,
    metric,
    task_config_path,
)
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.lineage import report_plan_lineage
from mirrorflow_airflow.operators.deferrable import DeferrableTask, end_after
from mirrorflow_airflow.params import form
from mirrorflow_airflow.replication_tasks import begin, lease_owner, submit_copy
from mirrorflow_airflow.rpo_alerts import check_rpo

log = logging.getLogger(__name__)

BACKFILL_LEASE_WAIT_S = 3600.0  # how long a run of `airflow backfill create` waits for the flow's lease


def replicate_params() -> dict[str, Any]:
    """The trigger form: a topics subset, a per-partition cap, a dry run (defaults: a normal run), declared
    once for the form and the CLI (mirrorflow.ops.inputs.REPLICATE)."""
    return form(REPLICATE)


def alias_name(flow: FlowConfig) -> str:
    """The AssetAlias through which the run emits one Asset event per target topic."""
    return flow_dag_id("replicate", flow)


def new_run(
    flow_name: str,
    run_id: str,
    config_path: str | None,
    params: dict[str, Any] | None,
    interval_ms: Any,
    owner_dag_id: str | None = None,
) -> ReplicationRun:
    """The run of a DAG run: `once`, `continuous` (`@continuous`) or, for a run of `airflow backfill
    create`, `interval` (the records of [interval_ms), not copied yet). `owner_dag_id`: the DAG whose run
    holds the lease, when not the flow's replicate DAG."""
    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    kind: RunKind = Once()
    if is_continuous(flow):
        kind = Continuous()
    elif interval_ms is not None:
        kind = Interval((When("time", interval_ms[0]), When("time", interval_ms[1])))
    owner, who = lease_owner(flow, run_id, dag_id=owner_dag_id)
    return ReplicationRun(cfg, flow, kind, owner, who, run_options(params, "airflow"), run_id, log=log.info)


def lease_wait_s(run: ReplicationRun) -> float | None:
    """A run of `airflow backfill create` waits for the lease: a skipped one would look done."""
    return BACKFILL_LEASE_WAIT_S if run.kind.waits_for_lease else None


def plan_task(
    flow_name: str,
    run_id: str,
    config_path: str | None = None,
    params: dict[str, Any] | None = None,
    interval_ms: tuple[int, int] | None = None,
    **waited: Any,
) -> dict[str, Any]:
    """The run's `begin` and `make_plan`; the plan handed on in XCom (spark-submit's path)."""
    run = new_run(flow_name, run_id, config_path, params, interval_ms)
    with FlowClients(run.cfg, run.flow) as clients:
        begin(run, clients, config_path, lease_wait_s(run), **waited)
        run.plan_for_handoff(clients)
    planned = {"plan": run.handoff(), **run.plan_summary()}
    if run.idle_wait_s():  # @continuous with nothing to follow yet: no spinning
        end_after(run.idle_wait_s(), planned)
    return planned


def replicate_task(
    flow_name: str,
    run_id: str,
    config_path: str | None = None,
    params: dict[str, Any] | None = None,
    interval_ms: tuple[int, int] | None = None,
    outlet_events: Any = None,
    **waited: Any,
) -> dict[str, Any]:
    """The whole run in one task: this DAG's with spark.remote (the copy runs on the Spark Connect server)."""
    run = new_run(flow_name, run_id, config_path, params, interval_ms)
    return carry_out_whole(run, config_path, outlet_events, "connect", None, **waited)


def carry_out_whole(
    run: ReplicationRun, config_path: str | None, outlet_events: Any, copy_mode: str, master: str | None, **waited: Any
) -> dict[str, Any]:
    """A run's every step in one task: the replicate DAG's with spark.remote, and ReplicateOperator's in any
    copy mode (`submit`: spark-submit from the task, `inprocess`, `direct`)."""
    with FlowClients(run.cfg, run.flow) as clients:
        begin(run, clients, config_path, lease_wait_s(run), **waited)
        rep = run.carry_out(clients, copy_mode, master, Scratch.for_task("replicate"))
    report_plan_lineage(run.plan, config_path)
    done = {**run.plan_summary(), **publish(run, rep, run.results, outlet_events)}
    if run.idle_wait_s():
        end_after(run.idle_wait_s(), done)
    return done


def report_task(
    flow_name: str, paths: dict[str, Any], outlet_events: Any = None, config_path: str | None = None
) -> dict[str, Any]:
    """The run's `report` and `release` after a spark-submit copy (results read from the target)."""
    run = ReplicationRun.from_handoff(MirrorflowHook(config_path).get_conn(), paths["plan"])
    try:  # the copy job wrote the results to the target under the run's id (any host, no shared disk)
        rep, results = run.collect_and_report()
    except MirrorflowError as exc:
        raise AirflowFailException(str(exc)) from None
    assert rep is not None
    return publish(run, rep, results, outlet_events)


def publish(run: ReplicationRun, rep: RunReport, results: list[dict], outlet_events: Any) -> dict[str, Any]:
    """The run's report in the task log, Airflow metrics, an Asset event per target topic written,
    the RPO check (after the copy: what still waits); fails the task when the run did not go well."""
    log_report(log, rep)
    emit_run_metrics(run.flow, rep)
    if outlet_events is not None:
        emit_copied(
            outlet_events,
            alias_name(run.flow),
            run.cfg,
            run.flow,
            results,
            "replicate",
            run.plan.run if run.plan else "",
        )
    check_rpo(run.cfg, run.flow, f"the replicate DAG of {run.flow.name}")
    if not rep.ok:
        raise AirflowFailException(
            f"{run.flow.name}: {rep.failed_units} unit(s) failed, {rep.stopped_partitions} partition(s) stopped:\n"
            + rep.render()
        )
    return {
        "records": rep.records,
        "bytes": rep.bytes,
        "lag": rep.lag,
        "lost": rep.lost,
        "duration_s": round(rep.duration_s, 3),
        "copy_phase_s": round(rep.copy_phase_s, 3),
        "max_latency_ms": rep.max_latency_ms,
        "topics": sorted({p.target_topic for p in rep.partitions if p.records}),
    }


def emit_run_metrics(flow: FlowConfig, rep: Any) -> None:
    """A run's figures as Airflow metrics (StatsD/OpenTelemetry) and status-page samples."""
    tags = {"flow": flow.id}
    metric("incr", "replicate.records", rep.records, tags)
    metric("incr", "replicate.bytes", rep.bytes, tags)
    metric("timing", "replicate.duration", timedelta(seconds=rep.duration_s), tags)
    if rep.lag is not None:  # unknown (the source's end could not be read): no gauge, never a 0
        metric("gauge", "replicate.lag", rep.lag, tags)
    record = rep.run_record(int(time.time() * 1000))
    emit_samples(run_samples(flow, record) + source_samples(flow, record))
    if rep.max_latency_ms >= 0:
        metric("gauge", "replicate.latency_ms", rep.max_latency_ms, tags)
    if rep.lost:
        metric("incr", "replicate.lost_offsets", rep.lost, tags)
    for p in rep.partitions:
        if p.lag is not None:
            metric("gauge", "replicate.partition_lag", p.lag, {**tags, "topic": p.topic, "partition": str(p.partition)})


def airflow_backfill_interval(
    dag_run: Any, interval_start: datetime | None, interval_end: datetime | None, schedule: str | None
) -> tuple[int, int] | None:
    """The [start, end) in ms of a replicate DAG run created by `airflow backfill create`, None for
    any other run. A cron trigger schedule gives runs an empty data interval (start = end = the
    logical date): the run then stands for the period since the schedule's previous fire time."""
    run_type = getattr(dag_run, "run_type", None)
    if getattr(run_type, "value", run_type) != "backfill" or interval_end is None:
        return None
    start = interval_start if interval_start is not None else interval_end
    if start >= interval_end and schedule:
        from croniter import croniter

        start = croniter(schedule, interval_end).get_prev(datetime)
    if start >= interval_end:
        return None
    return int(start.timestamp() * 1000), int(interval_end.timestamp() * 1000)


def of_context(step: Any, schedule: str | None) -> Any:
    """`step(flow_name, run_id, config_path, params, interval_ms, ...)` as a DeferrableTask's function."""

    def call(context: Any, flow_name: str, config_path: str | None, **kw: Any) -> dict[str, Any]:
        ends = context.get("data_interval_start"), context.get("data_interval_end")
        interval = airflow_backfill_interval(context.get("dag_run"), *ends, schedule)
        return step(flow_name, context.get("run_id") or "manual", config_path, context.get("params"), interval, **kw)

    return call


def build_replicate_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path, schedule = flow.name, task_config_path(cfg), flow.props["schedule"] or None
    steps = "plan, copy on the Spark Connect server, report" if cfg.spark.remote else "plan -> Spark copy -> report"
    description = f"copy new records exactly once ({steps})"
    with flow_dag("replicate", flow, description, schedule, params=replicate_params(), doc_md=__doc__) as dag:
        args = {"flow_name": name, "config_path": path}
        outlets = [AssetAlias(alias_name(flow))]
        if cfg.spark.remote:  # the copy runs on the server: no task of its own, no file, no XCom hand-off

            def whole(context: Any, **kw: Any) -> dict[str, Any]:
                return of_context(replicate_task, schedule)(context, outlet_events=context["outlet_events"], **kw)

            DeferrableTask(task_id="replicate", python_callable=whole, op_kwargs=args, outlets=outlets, retries=0)
            return dag
        planned: Any = DeferrableTask(task_id="plan", python_callable=of_context(plan_task, schedule), op_kwargs=args)
        copy = submit_copy(cfg, flow, "replicate", path)

        @task(task_id="report", trigger_rule="none_failed_min_one_success", outlets=outlets)
        def report(paths: dict[str, Any], outlet_events=None) -> dict[str, Any]:
            """Records, bytes, duration, lag, latency: logs, metrics and an Asset event per target topic."""
            return report_task(name, paths, outlet_events, path)

        planned >> copy >> report(planned.output)
    return dag


def build_replicate_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One replicate DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_replicate_dag)
