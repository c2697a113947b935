"""Replicate DAGs: one per enabled flow, `mirrorflow_replicate__<flow.id>`: plan -> copy -> report.

Each task is a shell over one step of the run object, `mirrorflow.replication.run.ReplicationRun`,
which the CLI runs in one process: the plan task its `begin` and `make_plan`, the copy task its
`copy` (rebuilt from the plan handed on in XCom), the report task its `report` and `release`.

* `plan`: ensure the flow's state topics on the target, take the flow's lease (one run of a flow at a
  time: while a CLI run or another scheduler's run holds it, the DAG run ends skipped with who holds
  it since when; a run of `airflow backfill create` waits for it instead, see wait_for_lease), read
  progress and source offsets, cut work units; returns the plan (flow name, config path, units,
  the lease's owner, a run id -- never secrets) compressed in XCom, and a summary.
* `copy`: writes the plan to a private scratch file of its own and runs `spark-submit --files PLAN
  .../mirrorflow/replication/spark_job.py PLAN` through the `spark_default` connection (e.g.
  AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'); the driver (any host,
  also --deploy-mode cluster) writes the units' results to the target under the run id. The task
  fails clearly when the connection is missing (the provider would silently use yarn). Skipped when
  there is nothing to copy.
* `report`: reads the results by run id from the target (a planned unit without one fails the task,
  naming it); records, bytes, duration, lag per partition, replication latency to the log and to
  Airflow metrics; an Asset event `kafka://<target bootstrap>/<topic>` per target topic written,
  with the copied offsets in its extra (mirrorflow_airflow.assets).
  Releases the lease (a failed copy releases it too; a crashed run's lease expires after
  `lease.timeout.seconds`).

No task reads a file another task wrote (replication.handoff), so each may run on its own machine or
pod (Celery, Kubernetes executors). All replication state lives on the target cluster; XCom carries
the plan and small reports.
`max_active_runs=1`; the schedule is the flow's `schedule` property.

`schedule: "@continuous"` makes each run a continuous run (`mirrorflow.replication.continuous`):
the plan holds every partition without an end, the copy job keeps copying micro-batches until
`continuous.run.seconds` (or the flow is paused/stopped, read every
`continuous.state.check.seconds`), and Airflow starts the next run as soon as one ends; the lease
hands the flow from one run to the next. New topics and partitions join at the next run. A triggered
run's `topics` narrows what it follows, `dry_run` plans and logs what would be copied and copies
nothing; `max_records_per_partition` fails the run (a followed partition has no end to cap).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Any, NoReturn

from airflow.sdk import DAG, AssetAlias, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, LeaseError, MirrorflowError
from mirrorflow.ops.observe.metrics import run_samples, source_samples
from mirrorflow.replication.backfill_plan import When
from mirrorflow.replication.continuous import is_continuous
from mirrorflow.replication.run import ReplicationRun, RunSkipped
from mirrorflow.replication.run_options import RunOptions
from mirrorflow.replication.spark import JOB_PATH, lease_kept, spark_conf, spark_env
from mirrorflow.state.run_lease import wait_for_lease  # noqa: F401 - where a backfill run waits (state.lease)
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
from mirrorflow_airflow.operators.spark_submit import SPARK_CONN_ID, MirrorflowSparkSubmitOperator
from mirrorflow_airflow.params import dry_run, max_records_per_partition, regex_or_none, topics_subset
from mirrorflow_airflow.rpo_alerts import check_rpo
from mirrorflow_airflow.run_notes import skip_task

log = logging.getLogger(__name__)


def replicate_params() -> dict[str, Any]:
    """The trigger form: a topics subset, a per-partition cap, a dry run (defaults: a normal run)."""
    return {
        "topics": topics_subset(),
        "max_records_per_partition": max_records_per_partition(),
        "dry_run": dry_run("Plan only: log per partition what would be copied; copy nothing"),
    }


def alias_name(flow: FlowConfig) -> str:
    """The AssetAlias through which the report task emits one Asset event per target topic."""
    return flow_dag_id("replicate", flow)


def lease_owner(flow: FlowConfig, run_id: str, kind: str = "replicate") -> tuple[str, str]:
    """(owner, who) of a DAG run's lease on its flow: shared by its plan, copy and report tasks."""
    dag_id = flow_dag_id(kind, flow)
    return f"airflow:{dag_id}:{run_id}", f"Airflow DAG run {dag_id} / {run_id}"


def run_options(params: dict[str, Any] | None) -> RunOptions:
    """The run's RunOptions from the trigger form's Params (scheduled runs: the defaults)."""
    p = params or {}
    limit = p.get("max_records_per_partition")
    return RunOptions(regex_or_none(p, "topics"), int(limit) if limit else None, bool(p.get("dry_run")))


BACKFILL_LEASE_WAIT_S = 3600.0  # how long a run of `airflow backfill create` waits for the flow's lease


def plan_task(
    flow_name: str,
    run_id: str,
    config_path: str | None = None,
    params: dict[str, Any] | None = None,
    interval_ms: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The run's `begin` and `make_plan` (replication.run); the plan handed on in XCom, a summary."""
    cfg = MirrorflowHook(config_path).get_conn()
    flow = cfg.flow(flow_name)
    kind = "continuous" if is_continuous(flow) else "interval" if interval_ms is not None else "once"
    window = (When("time", interval_ms[0]), When("time", interval_ms[1])) if interval_ms is not None else None
    run = ReplicationRun(cfg, flow, kind, *lease_owner(flow, run_id), run_options(params), run_id, window)
    with FlowClients(cfg, flow) as clients:
        try:  # a run of `airflow backfill create` waits for the lease: a skipped one would look done
            run.begin(clients, BACKFILL_LEASE_WAIT_S if interval_ms is not None else None)
        except (RunSkipped, ConfigError, LeaseError) as exc:
            shell_refusal(exc, flow, interval_ms is not None)
        try:
            plan = run.make_plan(clients)
        except BaseException:
            run.release_lease(clients)
            raise
    run.nothing_to_follow()  # @continuous with nothing to follow yet: no spinning
    log_plan(run, plan)
    offsets = sum(u.records for u in plan.units)
    would = sum(p["planned"] for p in plan.partitions)
    return {
        "plan": run.handoff(),
        "run": run.handed["run"],
        "units": len(plan.units),
        "offsets": offsets,
        "would_copy": would,
    }


def shell_refusal(exc: Exception, flow: FlowConfig, interval: bool) -> NoReturn:
    """The Airflow outcome of a run that cannot begin: skipped (paused, stopped, another run holds
    the lease), or failed (an option a continuous run cannot honour; a backfill run that waited)."""
    if isinstance(exc, RunSkipped):
        skip_task(str(exc), note=str(exc))
    if isinstance(exc, ConfigError):
        raise AirflowFailException(f"{flow.name} runs continuously: {exc}") from None
    if interval:
        raise AirflowFailException(
            f"{exc}; waited {BACKFILL_LEASE_WAIT_S:.0f} s for it: run the same `airflow backfill create` "
            "again with --reprocess-behavior failed (it copies only what is still missing)"
        ) from None
    raise AirflowSkipException(str(exc)) from None


def log_plan(run: ReplicationRun, plan: Any) -> None:
    name = run.flow.name
    log.info(
        "%s: planned %d units in %d tasks, %d offsets",
        name,
        len(plan.units),
        len(plan.tasks),
        sum(u.records for u in plan.units),
    )
    if run.dry_run:
        log.info(
            "%s: dry run: would copy %d offsets; copying nothing", name, sum(p["planned"] for p in plan.partitions)
        )
        for p in plan.partitions:
            if p["planned"]:
                log.info("  %s-%d: would copy %d offsets from %d", p["topic"], p["partition"], p["planned"], p["start"])


def report_task(
    flow_name: str, paths: dict[str, Any], outlet_events: Any = None, config_path: str | None = None
) -> dict[str, Any]:
    """The run's `report` (replication.run): logs, metrics, an Asset event per target topic written."""
    cfg = MirrorflowHook(config_path).get_conn()
    run = ReplicationRun.from_handoff(cfg, paths["plan"])
    try:  # the copy job wrote the results to the target under the run's id (any host, no shared disk)
        rep, results = run.collect_and_report()
    except MirrorflowError as exc:
        raise AirflowFailException(str(exc)) from None
    assert rep is not None
    log_report(log, rep)
    emit_run_metrics(run.flow, rep)
    written = sorted({p.target_topic for p in rep.partitions if p.records})
    if outlet_events is not None:
        emit_copied(outlet_events, alias_name(run.flow), cfg, run.flow, results, "replicate", run.handed.get("run", ""))
    # with rpo.seconds: after the copy, what still waits
    check_rpo(cfg, run.flow, f"the replicate DAG of {run.flow.name}")
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
        "topics": written,
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


def release_after_failure(config_path: str | None) -> Any:
    """on_failure_callback of the copy task: free the run's lease now rather than after its timeout."""

    def callback(context: Any) -> None:
        handed = context["ti"].xcom_pull(task_ids="plan") or {}
        if handed.get("plan"):
            ReplicationRun.from_handoff(MirrorflowHook(config_path).get_conn(), handed["plan"]).release_lease()

    return callback


def connect_copy_task(flow_name: str, paths: dict[str, Any], config_path: str | None = None) -> None:
    """The run's `copy` on the Spark Connect server of spark.remote; results to the target."""
    if not paths.get("units"):
        raise AirflowSkipException("nothing to copy")
    cfg = MirrorflowHook(config_path).get_conn()
    run = ReplicationRun.from_handoff(cfg, paths["plan"])
    if run.lease is None and run.owner:  # keep the run's lease renewed while the job copies
        with lease_kept(run.handed):
            results = run.copy_and_publish("connect")
    else:
        results = run.copy_and_publish("connect")
    report_plan_lineage(run.handed, config_path)
    log.info("%s: %d unit results from the Spark Connect server %s", flow_name, len(results), cfg.spark.remote)


def flow_conn_ids(cfg: Config, flow: FlowConfig) -> list[str]:
    """The Airflow connections (`airflow.conn.id`) of the flow's two clusters."""
    ids = (cfg.cluster(alias).airflow_conn_id for alias in (flow.source, flow.target))
    return sorted({i for i in ids if i})


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


def build_replicate_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path, schedule = flow.name, task_config_path(cfg), flow.props["schedule"] or None
    env = {k: v for k, v in spark_env().items() if k in ("PATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    with flow_dag(
        "replicate",
        flow,
        "copy new records exactly once (plan -> Spark copy -> report)",
        flow.props["schedule"] or None,
        params=replicate_params(),
        doc_md=__doc__,
    ) as dag:

        @task(task_id="plan")
        def plan(
            run_id: str | None = None,
            params: dict | None = None,
            dag_run: Any = None,
            data_interval_start: Any = None,
            data_interval_end: Any = None,
        ) -> dict[str, Any]:
            """Read progress (target) and source offsets; cut work units; write the plan file (a run
            of `airflow backfill create`: the records of its data interval not copied yet)."""
            interval = airflow_backfill_interval(dag_run, data_interval_start, data_interval_end, schedule)
            return plan_task(name, run_id or "manual", path, params, interval)

        planned: Any = plan()  # an XComArg: its task's return value at run time
        if cfg.spark.remote:  # a running Spark Connect server: no Spark application started per run

            @task(task_id="copy", retries=0, on_failure_callback=release_after_failure(path))
            def copy_connect(paths: dict[str, Any]) -> None:
                """Copy the planned units on the Spark Connect server of spark.remote."""
                connect_copy_task(name, paths, path)

            copy: Any = copy_connect(planned)
        else:
            copy = MirrorflowSparkSubmitOperator(
                task_id="copy",
                application=str(JOB_PATH),  # its argument, the plan file, is set at execute time
                spark_conn_id=SPARK_CONN_ID,
                plan_task_id="plan",
                kafka_conn_ids=flow_conn_ids(cfg, flow),
                conf=spark_conf(cfg),
                env_vars=env,
                name=f"mirrorflow-copy-{flow.id}",
                retries=0,  # a rerun is a new plan: the next scheduled run continues exactly
                on_failure_callback=release_after_failure(path),
            )

        @task(task_id="report", trigger_rule="none_failed_min_one_success", outlets=[AssetAlias(alias_name(flow))])
        def report(paths: dict[str, Any], outlet_events=None) -> dict[str, Any]:
            """Records, bytes, duration, lag, latency: logs, metrics and an Asset event per target topic."""
            return report_task(name, paths, outlet_events, path)

        planned >> copy >> report(planned)
    return dag


def build_replicate_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One replicate DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_replicate_dag)
