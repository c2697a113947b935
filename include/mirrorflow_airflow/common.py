"""What every generated mirrorflow DAG shares: its defaults, how builders get the config, how tasks
send metrics."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pendulum

from mirrorflow.config import Config, FlowConfig
from mirrorflow.reporting import Report
from mirrorflow.state.names import dag_id
from mirrorflow_airflow.hooks import MirrorflowHook

if TYPE_CHECKING:
    from airflow.sdk import DAG

log = logging.getLogger(__name__)

# Generated DAGs never catch up, so the start date only has to lie in the past.
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def metric(kind: str, name: str, value: float | timedelta, tags: dict[str, str]) -> None:
    """Send `mirrorflow.<name>` through Airflow's stats (a no-op backend unless [metrics] enables one)."""
    try:
        from airflow.sdk.observability import stats

        getattr(stats, kind)(f"mirrorflow.{name}", value, tags=tags)
    except Exception:  # noqa: BLE001 - metrics must never fail a task
        log.debug("metric %s not sent", name, exc_info=True)


def emit_samples(samples: Any) -> None:
    """Send mirrorflow.observe.metrics samples (MM2's names) as gauges through Airflow's stats, so they
    land where Airflow's own metrics do (StatsD, OpenTelemetry); their labels go as tags."""
    from mirrorflow.observe.metrics import statsd_name

    for s in samples:
        metric("gauge", statsd_name(s).removeprefix("mirrorflow."), s.value, dict(s.labels))


def log_report(task_log: logging.Logger, report: Report) -> None:
    """A report in the task's log, a record per line: the text the CLI prints for the same result."""
    for line in report.lines():
        task_log.info("%s", line)


def flow_dag_id(kind: str, flow: Any) -> str:
    return dag_id(kind, flow.id)


def flow_dag(kind: str, flow: Any, description: str, schedule: Any, retry_delay_s: int = 30, **extra: Any) -> Any:
    """The DAG of one concern (`sync`, `replicate`, `checkpoint`) of one flow: `mirrorflow_<kind>__<flow.id>`.

    Runs of one flow never overlap (max_active_runs=1) and never catch up; the description and
    doc come from the builder, the schedule from the flow's properties; the doc ends with the list
    of the DAG's Params (title, name, default, description), so the two never disagree.
    """
    from airflow.sdk import DAG

    from mirrorflow_airflow.params import params_doc

    if extra.get("params") and extra.get("doc_md"):
        extra["doc_md"] = extra["doc_md"] + params_doc(extra["params"])

    return DAG(
        dag_id=flow_dag_id(kind, flow),
        dag_display_name=f"mirrorflow {kind} {flow.name}",
        description=f"{flow.name}: {description}",
        schedule=schedule,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=["mirrorflow", kind, flow.name],
        default_args={"owner": "mirrorflow", "retries": 2, "retry_delay": timedelta(seconds=retry_delay_s)},
        **extra,
    )


def flow_dags(
    cfg: Config | None, build: Callable[[Config, FlowConfig], DAG], enabled_only: bool = True
) -> dict[str, DAG]:
    """`build(cfg, flow)` for every (enabled) flow, keyed by dag_id. With cfg None the config is
    loaded through MirrorflowHook, so a bad one raises ConfigError at parse time and the DagBag
    shows it as the DAG file's import error, naming the file and the key."""
    cfg = cfg if cfg is not None else MirrorflowHook().get_conn()
    dags = (build(cfg, f) for f in cfg.flows.values() if f.enabled or not enabled_only)
    return {dag.dag_id: dag for dag in dags}


def task_config_path(cfg: Config) -> str | None:
    """The config file tasks reload through MirrorflowHook (None: $MIRRORFLOW_CONFIG or the default)."""
    return str(cfg.path) if cfg.path else None
