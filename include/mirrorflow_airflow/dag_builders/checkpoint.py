"""Checkpoint DAGs: one per flow, `mirrorflow_checkpoint__<flow.id>`.

Tasks (thin shells over the core; all state lives on the target cluster, nothing in XCom but a
small summary; each logs the same rendering `mirrorflow checkpoint` / `heartbeat` print):

* `checkpoint`: translate committed source group offsets exactly and write MM2 checkpoints;
* `sync_group_offsets` (after `checkpoint`): commit them on the target for groups without active
  members there, never backwards; skipped when `sync.group.offsets.enabled` is false;
* `heartbeat` (independent): emit MM2 heartbeats and report the flow's replication latency.

The schedule is `emit.checkpoints.interval.seconds` (MM2 default 60 s) as a timedelta. MM2's
heartbeat interval (`emit.heartbeats.interval.seconds`, 1 s) is far below what a scheduler can
run, so heartbeats ride on this DAG: one per run. Replication latency measured from them is
therefore accurate to about one checkpoint interval plus the replicate schedule.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.config import Config, FlowConfig
from mirrorflow_airflow.common import flow_dag, flow_dags, metric, task_config_path
from mirrorflow_airflow.hooks import MirrorflowHook

log = logging.getLogger(__name__)


def _failed_groups(errors: dict[str, str]) -> str:
    return "; ".join(f"{g}: {e}" for g, e in sorted(errors.items()))


def checkpoint_task(flow_name: str, config_path: str | None = None) -> dict[str, Any]:
    """Translate committed source group offsets exactly and write MM2 checkpoints on the target."""
    from mirrorflow.groups.checkpoint import emit_checkpoints
    from mirrorflow.groups.render import render_checkpoints

    cfg = MirrorflowHook(config_path).get_conn()
    flow = cfg.flow(flow_name)
    run = emit_checkpoints(cfg, flow)
    rendered = render_checkpoints(run, flow.target)
    if run.skipped_reason:
        raise AirflowSkipException(rendered.text())
    log.info("%s", rendered.text())
    tags = {"flow": flow.id}
    metric("incr", "checkpoints.emitted", len(run.emitted), tags)
    metric("gauge", "checkpoints.groups", len(run.groups), tags)
    metric("gauge", "checkpoints.missing_records", sum(r.missing for r, _ in run.rows), tags)
    if run.errors:
        raise AirflowFailException(
            f"{flow.name}: checkpoints written for the other groups; failed for " + _failed_groups(run.errors)
        )
    return rendered.summary


def group_sync_task(flow_name: str, config_path: str | None = None) -> dict[str, Any]:
    """Commit the checkpointed offsets on the target for idle groups, never backwards."""
    from mirrorflow.groups.offset_sync import sync_group_offsets
    from mirrorflow.groups.render import render_group_sync

    cfg = MirrorflowHook(config_path).get_conn()
    flow = cfg.flow(flow_name)
    run = sync_group_offsets(cfg, flow)
    rendered = render_group_sync(run)
    if run.skipped_reason:
        raise AirflowSkipException(rendered.text())
    log.info("%s", rendered.text())
    metric("incr", "group_sync.committed", sum(run.committed.values()), {"flow": flow.id})
    if run.errors:
        raise AirflowFailException(f"{flow.name}: group offset sync failed for " + _failed_groups(run.errors))
    return rendered.summary


def heartbeat_task(flow_name: str, config_path: str | None = None) -> dict[str, Any]:
    """Emit the flow's MM2 heartbeats and measure its replication latency."""
    from mirrorflow.groups.heartbeat import HeartbeatRun, emit_heartbeats, replication_latency
    from mirrorflow.groups.render import render_heartbeats

    cfg = MirrorflowHook(config_path).get_conn()
    flow = cfg.flow(flow_name)
    emitted = emit_heartbeats(cfg, flow)
    if not emitted:
        raise AirflowSkipException(f"{flow.name}: emit.heartbeats.enabled=false")
    latency = replication_latency(cfg, flow)
    rendered = render_heartbeats(HeartbeatRun(flow.name, flow.target, emitted, latency))
    log.info("%s", rendered.text())
    if latency.latency_ms is not None:
        metric("gauge", "replication.latency_ms", latency.latency_ms, {"flow": flow.id})
    return rendered.summary


def build_checkpoint_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path = flow.name, task_config_path(cfg)
    interval = int(flow.props.get("emit.checkpoints.interval.seconds", 60))
    with flow_dag(
        "checkpoint",
        flow,
        "exact MM2 checkpoints, group offset sync, heartbeats",
        timedelta(seconds=interval),
        retry_delay_s=10,
        doc_md=__doc__,
    ) as dag:

        @task(task_id="checkpoint")
        def checkpoint() -> dict[str, Any]:
            """Translate committed source group offsets exactly; write MM2 checkpoints on the target."""
            return checkpoint_task(name, path)

        @task(task_id="sync_group_offsets")
        def sync_group_offsets() -> dict[str, Any]:
            """Commit checkpointed offsets on the target for idle groups, never backwards."""
            return group_sync_task(name, path)

        @task(task_id="heartbeat")
        def heartbeat() -> dict[str, Any]:
            """Emit MM2 heartbeats for the flow and log its replication latency."""
            return heartbeat_task(name, path)

        checkpoint() >> sync_group_offsets()
        heartbeat()
    return dag


def build_checkpoint_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One checkpoint DAG per configured flow, disabled ones too (they still emit heartbeats)."""
    return flow_dags(cfg, build_checkpoint_dag, enabled_only=False)
