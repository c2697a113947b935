"""Replicate DAGs: one per enabled flow, `mirrorflow_replicate__<flow.id>`: plan -> copy -> report.

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
from typing import Any

from airflow.sdk import DAG, AssetAlias, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.config import Config, FlowConfig
from mirrorflow.replication.spark import JOB_PATH, spark_conf, spark_env
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


def lease_owner(flow: FlowConfig, run_id: str) -> tuple[str, str]:
    """(owner, who) of a DAG run's lease on its flow: shared by its plan, copy and report tasks."""
    dag_id = flow_dag_id("replicate", flow)
    return f"airflow:{dag_id}:{run_id}", f"Airflow DAG run {dag_id} / {run_id}"


def run_options(params: dict[str, Any] | None) -> Any:
    """The run's RunOptions from the trigger form's Params (scheduled runs: the defaults)."""
    from mirrorflow.replication.runner import RunOptions

    p = params or {}
    limit = p.get("max_records_per_partition")
    return RunOptions(regex_or_none(p, "topics"), int(limit) if limit else None, bool(p.get("dry_run")))


BACKFILL_LEASE_WAIT_S = 3600.0  # how long a run of `airflow backfill create` waits for the flow's lease


def wait_for_lease(
    clients: Any, owner: str, who: str, wait_s: float = BACKFILL_LEASE_WAIT_S, poll_s: float = 5.0
) -> Any:
    """The flow's lease for a run of `airflow backfill create`, waiting while another run holds it.

    Airflow starts a backfill's runs side by side (up to the backfill's own --max-active-runs,
    default 10, not the DAG's max_active_runs=1) and beside the scheduled runs, so without waiting
    all but one would end skipped -- "success" in Airflow with their intervals never copied. Reads
    who holds the lease and claims only once it is free (no claim record per poll); LeaseError
    naming the holder after `wait_s`."""
    from mirrorflow.errors import LeaseError
    from mirrorflow.replication.runner import take_lease
    from mirrorflow.state.lease import current_holder
    from mirrorflow.state.state_topics import ensure_state_topics

    ensure_state_topics(clients)
    deadline, seen = time.monotonic() + wait_s, ""
    while True:
        holder = current_holder(clients)
        if holder is None or holder.owner == owner:
            try:
                return take_lease(clients, owner, who)
            except LeaseError:  # another run claimed it in between
                if time.monotonic() >= deadline:
                    raise
        elif time.monotonic() >= deadline:
            raise LeaseError(holder.describe(clients.flow.name))
        elif holder.owner != seen:  # once per holder, not per poll
            seen = holder.owner
            log.info("%s; waiting for it", holder.describe(clients.flow.name))
        time.sleep(poll_s)


def plan_task(
    flow_name: str,
    run_id: str,
    config_path: str | None = None,
    params: dict[str, Any] | None = None,
    interval_ms: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Take the flow's lease and cut the run's work units; returns the plan (compressed, for XCom:
    replication.handoff) and a summary. Skipped (with the reason) while another run of the flow
    holds the lease (a run of `airflow backfill create` waits for it). Both clusters are waited for
    first, up to broker.outage.max.seconds, as the CLI's run does."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.errors import ConfigError, LeaseError
    from mirrorflow.replication.backfill_plan import prepare_interval_plan
    from mirrorflow.replication.continuous import check_options, is_continuous, prepare_continuous_plan, run_seconds
    from mirrorflow.replication.handoff import encode_plan, new_run_id
    from mirrorflow.replication.planner import wait_for_clusters
    from mirrorflow.replication.runner import prepare_plan, take_lease
    from mirrorflow.state.flow_state import flow_state

    cfg = MirrorflowHook(config_path).get_conn()
    flow = cfg.flow(flow_name)
    run = new_run_id(run_id)
    options = run_options(params)
    if is_continuous(flow):
        try:
            check_options(options)  # before the lease: a Param a continuous run cannot honour fails the run
        except ConfigError as exc:
            raise AirflowFailException(f"{flow.name} runs continuously: {exc}") from None
    with FlowClients(cfg, flow) as clients:
        wait_for_clusters(clients)  # as `mirrorflow replicate`: a broker restarting now is waited for, not failed
        skip = flow_state(clients).skip_reason(flow.name, "copy")
        if skip:
            skip_task(skip, note=skip)
        try:
            if interval_ms is None:
                lease = take_lease(clients, *lease_owner(flow, run_id))
            else:  # a skipped backfill run would look done while its interval stays uncopied
                lease = wait_for_lease(clients, *lease_owner(flow, run_id), wait_s=BACKFILL_LEASE_WAIT_S)
        except LeaseError as exc:
            if interval_ms is not None:
                raise AirflowFailException(
                    f"{exc}; waited {BACKFILL_LEASE_WAIT_S:.0f} s for it: run the same `airflow backfill create` "
                    "again with --reprocess-behavior failed (it copies only what is still missing)"
                ) from None
            raise AirflowSkipException(str(exc)) from None
        try:
            if is_continuous(flow):  # every partition (of the topics Param), copied until continuous.run.seconds
                plan, handed, _ = prepare_continuous_plan(clients, lease, run_id=run, options=options)
                if not plan.units and not options.dry_run:  # nothing to follow yet: do not let @continuous spin
                    time.sleep(min(30.0, run_seconds(flow)))
            elif interval_ms is not None:  # `airflow backfill create`: the data interval's records (backfill.py)
                plan, handed = prepare_interval_plan(
                    clients, lease, interval_ms, regex_or_none(params, "topics"), options.dry_run, run
                )
            else:
                plan, handed = prepare_plan(clients, lease, options, run)
        except BaseException:
            lease.release()
            raise
    log.info(
        "%s: planned %d units in %d tasks, %d offsets",
        flow.name,
        len(plan.units),
        len(plan.tasks),
        sum(u.records for u in plan.units),
    )
    would = sum(p["planned"] for p in plan.partitions)
    if options.dry_run:
        log.info("%s: dry run: would copy %d offsets; copying nothing", flow.name, would)
        for p in plan.partitions:
            if p["planned"]:
                log.info("  %s-%d: would copy %d offsets from %d", p["topic"], p["partition"], p["planned"], p["start"])
    return {
        "plan": encode_plan(handed),
        "run": run,
        "units": len(plan.units),
        "offsets": sum(u.records for u in plan.units),
        "would_copy": would,
    }


def report_task(
    flow_name: str, paths: dict[str, Any], outlet_events: Any = None, config_path: str | None = None
) -> dict[str, Any]:
    """Report the copy's results: logs, metrics, an Asset event per target topic written."""
    import time

    from mirrorflow.clients import FlowClients
    from mirrorflow.errors import MirrorflowError
    from mirrorflow.ops.observe.metrics import run_samples, source_samples
    from mirrorflow.replication.handoff import collect_results, decode_plan
    from mirrorflow.replication.runner import report_run

    cfg = MirrorflowHook(config_path).get_conn()
    flow = cfg.flow(flow_name)
    plan = decode_plan(paths["plan"])
    with FlowClients(cfg, flow) as clients:
        try:
            try:  # the copy job wrote them to the target under the run's id (any host, no shared disk)
                results = collect_results(clients, plan)
            except MirrorflowError as exc:
                raise AirflowFailException(str(exc)) from None
            rep = report_run(clients, plan, results, plan.get("planned_at", 0))
        finally:
            release_lease(clients, plan)
    log_report(log, rep)
    tags = {"flow": flow.id}
    metric("incr", "replicate.records", rep.records, tags)
    metric("incr", "replicate.bytes", rep.bytes, tags)
    metric("timing", "replicate.duration", timedelta(seconds=rep.duration_s), tags)
    metric("gauge", "replicate.lag", rep.lag, tags)
    record = rep.run_record(int(time.time() * 1000))
    emit_samples(run_samples(flow, record) + source_samples(flow, record))
    if rep.max_latency_ms >= 0:
        metric("gauge", "replicate.latency_ms", rep.max_latency_ms, tags)
    if rep.lost:
        metric("incr", "replicate.lost_offsets", rep.lost, tags)
    for p in rep.partitions:
        metric("gauge", "replicate.partition_lag", p.lag, {**tags, "topic": p.topic, "partition": str(p.partition)})
    written = sorted({p.target_topic for p in rep.partitions if p.records})
    if outlet_events is not None:
        emit_copied(outlet_events, alias_name(flow), cfg, flow, results, "replicate", plan.get("run", ""))
    check_rpo(cfg, flow, f"the replicate DAG of {flow.name}")  # with rpo.seconds: after the copy, what still waits
    if not rep.ok:
        raise AirflowFailException(
            f"{flow.name}: {rep.failed_units} unit(s) failed, {rep.stopped_partitions} partition(s) stopped:\n"
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


def release_lease(clients: Any, plan: dict[str, Any]) -> None:
    """Free the DAG run's lease (the plan names its owner); best effort: it expires anyway."""
    from mirrorflow.state.lease import FlowLease

    if plan.get("lease"):
        FlowLease(clients, plan["lease"]["owner"], plan["lease"]["who"]).release()


def release_after_failure(flow_name: str, config_path: str | None) -> Any:
    """on_failure_callback of the copy task: free the lease now rather than after its timeout."""

    def callback(context: Any) -> None:
        from mirrorflow.clients import FlowClients
        from mirrorflow.replication.handoff import decode_plan

        paths = context["ti"].xcom_pull(task_ids="plan") or {}
        if not paths.get("plan"):
            return
        cfg = MirrorflowHook(config_path).get_conn()
        with FlowClients(cfg, cfg.flow(flow_name)) as clients:
            release_lease(clients, decode_plan(paths["plan"]))

    return callback


def connect_copy_task(flow_name: str, paths: dict[str, Any], config_path: str | None = None) -> None:
    """The copy task with spark.remote: the plan's units on the running Spark Connect server (the
    lease kept renewed meanwhile), results written to the target, where the report task reads them."""
    from mirrorflow.replication.handoff import decode_plan
    from mirrorflow.replication.spark_connect import copy_and_publish

    if not paths.get("units"):
        raise AirflowSkipException("nothing to copy")
    cfg = MirrorflowHook(config_path).get_conn()
    results = copy_and_publish(cfg, decode_plan(paths["plan"]))
    report_plan_lineage(decode_plan(paths["plan"]), config_path)
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

            @task(task_id="copy", retries=0, on_failure_callback=release_after_failure(name, path))
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
                on_failure_callback=release_after_failure(name, path),
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
