"""Checkpoint DAGs: one per flow, `mirrorflow_checkpoint__<flow.id>`.

Tasks (thin shells over the core; all state lives on the target cluster, nothing in XCom but a
small summary):

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

from .common import flow_dag, flow_dag_id, metric
from .hooks import MirrorflowHook

log = logging.getLogger(__name__)


def dag_id(flow: FlowConfig) -> str:
    return flow_dag_id("checkpoint", flow)




def run_checkpoint(flow_name: str, config_path: str | None = None) -> dict[str, Any]:
    from mirrorflow.groups.checkpoint import emit_checkpoints
    from mirrorflow.groups.render import translation_table

    cfg = MirrorflowHook(config_path).get_config()
    flow = cfg.flow(flow_name)
    run = emit_checkpoints(cfg, flow)
    if run.skipped_reason:
        raise AirflowSkipException(f"{flow.name}: checkpoints skipped: {run.skipped_reason}")
    log.info("%s: %d group(s), %d checkpoint(s) written to %s on %s", flow.name, len(run.groups),
             len(run.emitted), run.topic, flow.target)
    for g in run.groups:
        mine = [(r, a) for r, a in run.rows if r.group == g]
        log.info("group %s\n%s", g, translation_table([r for r, _ in mine], [a for _, a in mine]))
    tags = {"flow": flow.id}
    metric("incr", "checkpoints.emitted", len(run.emitted), tags)
    metric("gauge", "checkpoints.groups", len(run.groups), tags)
    metric("gauge", "checkpoints.missing_records", sum(r.missing for r, _ in run.rows), tags)
    if run.errors:
        raise AirflowFailException(f"{flow.name}: checkpoints written for the other groups; failed for "
                                   + "; ".join(f"{g}: {e}" for g, e in sorted(run.errors.items())))
    return {"groups": len(run.groups), "emitted": len(run.emitted), "topic": run.topic}


def run_group_sync(flow_name: str, config_path: str | None = None) -> dict[str, Any]:
    from mirrorflow.groups.offset_sync import sync_group_offsets

    cfg = MirrorflowHook(config_path).get_config()
    flow = cfg.flow(flow_name)
    run = sync_group_offsets(cfg, flow)
    if run.skipped_reason:
        raise AirflowSkipException(f"{flow.name}: group offset sync skipped: {run.skipped_reason}")
    for p in run.plans:
        if p.action == "left-alone":
            log.warning("%s: group %s left alone on %s: %s", flow.name, p.group, flow.target, p.reason)
        else:
            log.info("%s: group %s: %d partition(s) committed, %d already at or ahead", flow.name, p.group,
                     len(p.writes), len(p.partitions) - len(p.writes))
    metric("incr", "group_sync.committed", sum(run.committed.values()), {"flow": flow.id})
    if run.errors:
        raise AirflowFailException(f"{flow.name}: group offset sync failed for "
                                   + "; ".join(f"{g}: {e}" for g, e in sorted(run.errors.items())))
    return {"committed": run.committed, "left_alone": [p.group for p in run.plans if p.action == "left-alone"]}


def run_heartbeat(flow_name: str, config_path: str | None = None) -> dict[str, Any]:
    from mirrorflow.groups.heartbeat import emit_heartbeats, replication_latency

    cfg = MirrorflowHook(config_path).get_config()
    flow = cfg.flow(flow_name)
    emitted = emit_heartbeats(cfg, flow)
    if not emitted:
        raise AirflowSkipException(f"{flow.name}: emit.heartbeats.enabled=false")
    for e in emitted:
        log.info("%s: heartbeat (%s,%s) written to %s on %s", flow.name, e.source, e.target, e.topic, e.cluster)
    lat = replication_latency(cfg, flow)
    if lat.latency_ms is None:
        log.info("%s: no replicated heartbeat in %s on %s yet", flow.name, lat.topic, flow.target)
    else:
        log.info("%s: replication latency %d ms (newest heartbeat in %s)", flow.name, lat.latency_ms, lat.topic)
        metric("gauge", "replication.latency_ms", lat.latency_ms, {"flow": flow.id})
    return {"emitted": len(emitted), "latency_ms": lat.latency_ms}


def build_checkpoint_dag(flow: FlowConfig) -> DAG:
    interval = int(flow.props.get("emit.checkpoints.interval.seconds", 60))
    name = flow.name
    with flow_dag("checkpoint", flow, "exact MM2 checkpoints, group offset sync, heartbeats",
                  timedelta(seconds=interval), retry_delay_s=10, doc_md=__doc__) as dag:
        @task(task_id="checkpoint")
        def checkpoint() -> dict[str, Any]:
            """Translate committed source group offsets exactly; write MM2 checkpoints on the target."""
            return run_checkpoint(name)

        @task(task_id="sync_group_offsets")
        def sync_group_offsets() -> dict[str, Any]:
            """Commit checkpointed offsets on the target for idle groups, never backwards."""
            return run_group_sync(name)

        @task(task_id="heartbeat")
        def heartbeat() -> dict[str, Any]:
            """Emit MM2 heartbeats for the flow and log its replication latency."""
            return run_heartbeat(name)

        checkpoint() >> sync_group_offsets()
        heartbeat()
    return dag


def build_checkpoint_dags(cfg: Config) -> dict[str, DAG]:
    """One checkpoint DAG per configured flow, keyed by dag_id."""
    return {dag_id(f): build_checkpoint_dag(f) for f in cfg.flows.values()}
