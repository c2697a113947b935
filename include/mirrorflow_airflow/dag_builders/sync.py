"""Sync DAGs: one per enabled flow, `mirrorflow_sync__<flow.id>`, generated from the config.

One task per concern, so a failure shows where it happened; topics first (the other two work on
the remote topics it creates), then configs and ACLs side by side (a run costs two task starts in a
row, not three):

* `topics_and_partitions`: create missing remote topics (partitions, replication factor, configs)
  and add partitions when the source grew; orphans and larger targets are reported;
* `configs`: incremental topic-config sync (skipped when `sync.topic.configs.enabled` is false);
* `acls`: additive topic-ACL sync (skipped when `sync.topic.acls.enabled` is false);
* `schemas` (only when both clusters name a `schema.registry.url`): the flow's schemas with their ids
  (mirrorflow.schemas), at every tick.

Each concern runs on its own MM2 timer (timers.py): `refresh.topics.interval.seconds`,
`sync.topic.configs.interval.seconds` and `sync.topic.acls.interval.seconds` (600 s each by
default). The DAG ticks at the shortest interval of its enabled concerns, and a task whose
interval is not due in a scheduled run ends *skipped* with that reason. A manual trigger runs
every concern. With `refresh.topics.enabled: false` scheduled runs leave topics alone (a manual
trigger still creates them); with all three disabled the DAG runs only when triggered. Trigger it
with `{"dry_run": true}` to see the plan without changing anything. Tasks call the core
(`mirrorflow.metadata.sync.sync_flow`), log the full report and push only its small summary to XCom.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, MirrorflowError
from mirrorflow.schemas.replicate import has_registries
from mirrorflow_airflow.common import flow_dag, flow_dags, task_config_path
from mirrorflow_airflow.dag_builders.timers import RunTimes, period, timed_task
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.lineage import report_lineage
from mirrorflow_airflow.params import dry_run, sync_only
from mirrorflow_airflow.run_notes import skip_task

log = logging.getLogger(__name__)
TASKS = {"topics": "topics_and_partitions", "configs": "configs", "acls": "acls"}
DOCS = {
    "topics": "Create missing remote topics and add partitions; report orphans and larger targets.",
    "configs": "Sync topic configs incrementally (excluded properties are never touched).",
    "acls": "Add the source's literal topic ACLs to the remote topics (never deletes).",
}
# concern -> (its *.enabled toggle, its timer)
TIMERS = {
    "topics": ("refresh.topics.enabled", "refresh.topics.interval.seconds"),
    "configs": ("sync.topic.configs.enabled", "sync.topic.configs.interval.seconds"),
    "acls": ("sync.topic.acls.enabled", "sync.topic.acls.interval.seconds"),
}


def sync_period(flow: FlowConfig) -> int | None:
    """The sync DAG's tick in seconds: the shortest interval of the enabled concerns."""
    return period([int(flow.props[timer]) for toggle, timer in TIMERS.values() if flow.props[toggle]])


def skip_unless_due(flow: FlowConfig, concern: str, times: RunTimes) -> None:
    """Raise AirflowSkipException when `concern` has nothing to do in this run: its timer is not
    due, or (topics) refresh.topics.enabled=false in a scheduled run."""
    toggle, timer = TIMERS[concern]
    if concern == "topics" and not flow.props[toggle] and not times.manual:
        raise AirflowSkipException(f"{flow.name}: topics: {toggle}=false (a manual trigger still syncs topics)")
    why = times.not_due_reason(timer, int(flow.props[timer]))
    if why:
        raise AirflowSkipException(f"{flow.name}: {concern}: {why}")


def sync_task(
    flow_name: str,
    concern: str,
    config_path: str | None = None,
    dry_run: bool = False,
    times: RunTimes | None = None,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Sync one concern of one flow when its timer is due: returns the report's small summary.
    `only` (the `only` Param): the concerns this run syncs; the others end skipped.

    A bad config fails the task at once (retrying cannot fix it); a failed change or an
    unreachable cluster fails it with retries, after the other changes were applied.
    """
    from mirrorflow.metadata.sync import sync_flow

    if only is not None and concern not in only:
        raise AirflowSkipException(f"{flow_name}: {concern}: not selected (Param only={only})")
    try:
        cfg = MirrorflowHook(config_path).get_conn()
        skip_unless_due(cfg.flow(flow_name), concern, times or RunTimes.of())
        report = sync_flow(cfg, flow_name, [concern], dry_run=dry_run)
    except ConfigError as exc:
        raise AirflowFailException(str(exc)) from None
    log.info("%s", report.render())
    if report.topics and not dry_run:  # OpenLineage: source topics in, remote topics out
        report_lineage(cfg, cfg.flow(flow_name), report.topics)
    if report.skipped and all(s.resource == "*" for s in report.skipped) and not report.changes:
        skip_task("; ".join(s.reason for s in report.skipped), note=report.state_skip)
    if not report.ok:
        raise MirrorflowError(
            f"{flow_name}: {concern} sync: "
            + "; ".join(f"{c.kind} {c.resource} failed: {c.error}" for c in report.failed)
        )
    return report.summary()


def sync_params(schemas: bool) -> dict[str, Any]:
    return {
        "only": sync_only(schemas),
        "dry_run": dry_run("Plan and report only; change nothing on the target"),
    }


def _form(params: dict | None) -> dict[str, Any]:
    """dry_run and only from the trigger form (scheduled runs: the defaults)."""
    p = params or {}
    return {"dry_run": bool(p.get("dry_run")), "only": p.get("only")}


def _concern_task(flow_name: str, concern: str, path: str | None) -> Any:
    """The task of one concern, in a DAG being built."""
    return timed_task(
        TASKS[concern],
        lambda times, params: sync_task(flow_name, concern, path, times=times, **_form(params)),
        doc_md=DOCS[concern],
        # a disabled (skipped) topics concern must not skip the others
        trigger_rule="all_success" if concern == "topics" else "none_failed",
    )()


def build_sync_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    tick = sync_period(flow)
    with flow_dag(
        "sync",
        flow,
        "remote topics, partitions, topic configs and topic ACLs",
        timedelta(seconds=tick) if tick else None,
        params=sync_params(has_registries(cfg, flow)),
        doc_md=__doc__,
    ) as dag:
        # topics first (a config or ACL needs its topic), then configs and ACLs side by side
        topics = _concern_task(name, "topics", path)
        topics >> [_concern_task(name, concern, path) for concern in ("configs", "acls")]
        if has_registries(cfg, flow):  # the flow's schemas with their ids (dag_builders/schemas.py)
            _schemas_task(name, path)
    return dag


def _schemas_task(flow_name: str, path: str | None) -> Any:
    """`schemas`: copy the flow's missing schema versions with their ids, at every tick (a run whose
    `only` Param leaves `schemas` out skips it)."""

    def body(times: RunTimes, params: dict) -> dict[str, Any]:
        from mirrorflow_airflow.dag_builders.schemas import schemas_task

        only = params.get("only")
        if only is not None and "schemas" not in only:
            raise AirflowSkipException(f"{flow_name}: schemas: not selected (Param only={only})")
        return schemas_task(flow_name, bool(params.get("dry_run")), path)

    return timed_task("schemas", body, doc_md="Copy the flow's schemas to the target's registry, ids kept.")()


def build_sync_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One sync DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_sync_dag)
