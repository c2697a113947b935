"""Checkpoint DAGs: one per flow, `mirrorflow_checkpoint__<flow.id>`.

Tasks (thin shells over the core; all state lives on the target cluster, nothing in XCom but a
small summary; each logs the same rendering `mirrorflow checkpoint` / `heartbeat` print):

* `checkpoint`: first, with `rpo.seconds` set, check the flow's recovery point objective on every
  tick (mirrorflow_airflow.rpo_alerts: metrics, a warning and the run's note when missed, the
  `rpo.notifier` told); then translate committed source group offsets exactly and write MM2 checkpoints,
  every `emit.checkpoints.interval.seconds` (60 s); the source's groups are listed afresh every
  `refresh.groups.interval.seconds` (600 s), runs in between checkpoint the groups already
  checkpointed (as MM2 checkpoints its known groups between refreshes);
* `sync_group_offsets` (after `checkpoint`, which may be skipped): commit them on the target for
  groups without active members there, never backwards, every `sync.group.offsets.interval.seconds`
  (60 s); skipped when `sync.group.offsets.enabled` or `emit.checkpoints.enabled` is false;
MM2's heartbeats have a DAG of their own (heartbeat.py): a run here lasts as long as its two tasks,
seconds, not a window of heartbeats.

The DAG ticks at the shortest of the checkpoint and group-sync intervals of the enabled jobs (with
neither enabled it runs only when triggered); a task whose interval is not due in a scheduled run
ends *skipped* with that reason (timers.py). A manual trigger runs every job.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.config import Config, FlowConfig
from mirrorflow_airflow.common import emit_samples, flow_dag, flow_dags, metric, task_config_path
from mirrorflow_airflow.dag_builders.timers import RunTimes, period, timed_task
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.params import regex, regex_or_none
from mirrorflow_airflow.rpo_alerts import check_rpo, rpo_notifier
from mirrorflow_airflow.run_notes import skip_task

log = logging.getLogger(__name__)


def checkpoint_period(flow: FlowConfig) -> int | None:
    """The checkpoint DAG's tick in seconds: the shortest interval of the enabled checkpoint and
    group-sync jobs (None: neither is enabled, the DAG runs only when triggered)."""
    p = flow.props
    timers = [int(p["emit.checkpoints.interval.seconds"])] if p["emit.checkpoints.enabled"] else []
    if p["sync.group.offsets.enabled"]:
        timers.append(int(p["sync.group.offsets.interval.seconds"]))
    return period(timers)


def _skip_unless_due(flow: FlowConfig, job: str, prop: str, times: RunTimes) -> None:
    why = times.not_due_reason(prop, int(flow.props[prop]))
    if why:
        raise AirflowSkipException(f"{flow.name}: {job}: {why}")


def _failed_groups(errors: dict[str, str]) -> str:
    return "; ".join(f"{g}: {e}" for g, e in sorted(errors.items()))


def checkpoint_task(
    flow_name: str, config_path: str | None = None, times: RunTimes | None = None, groups: str | None = None
) -> dict[str, Any]:
    """Translate committed source group offsets exactly and write MM2 checkpoints on the target,
    when emit.checkpoints.interval.seconds is due (listing the source's groups when
    refresh.groups.interval.seconds is due too). `groups`: only the groups this regex fully matches."""
    import time

    from mirrorflow.groups.checkpoint import emit_checkpoints
    from mirrorflow.observe.metrics import checkpoint_pass_samples

    times = times or RunTimes.of()
    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    check_rpo(cfg, flow, f"the checkpoint DAG of {flow.name}")  # every tick, due or not (rpo.seconds)
    _skip_unless_due(flow, "checkpoints", "emit.checkpoints.interval.seconds", times)
    # refresh.groups.enabled is always true here (false is refused: there is no task start to list them at)
    refresh = flow.props["refresh.groups.enabled"] and times.due(int(flow.props["refresh.groups.interval.seconds"]))
    run = emit_checkpoints(cfg, flow, refresh_groups=refresh, only=groups)
    if run.skipped_reason:
        skip_task(run.render(), note=run.state_skip)
    log.info("%s", run.render())
    if not refresh:
        log.info("%s: groups not refreshed (refresh.groups.interval.seconds not due): known groups only", flow.name)
    tags = {"flow": flow.id}
    metric("incr", "checkpoints.emitted", len(run.emitted), tags)
    metric("gauge", "checkpoints.groups", len(run.groups), tags)
    if run.emitted:
        emit_samples(checkpoint_pass_samples(cfg, flow, run.run_record(int(time.time() * 1000))))
    metric("gauge", "checkpoints.missing_records", sum(r.missing for r, _ in run.rows), tags)
    if run.errors:
        raise AirflowFailException(
            f"{flow.name}: checkpoints written for the other groups; failed for " + _failed_groups(run.errors)
        )
    return run.brief()


def group_sync_task(
    flow_name: str, config_path: str | None = None, times: RunTimes | None = None, enabled: bool = True
) -> dict[str, Any]:
    """Commit the checkpointed offsets on the target for idle groups, never backwards, when
    sync.group.offsets.interval.seconds is due. `enabled` False (the `sync_group_offsets` Param
    off): skipped for this run."""
    from mirrorflow.groups.offset_sync import sync_group_offsets

    if not enabled:
        raise AirflowSkipException(f"{flow_name}: group offset sync: off for this run (Param sync_group_offsets)")
    cfg, flow = MirrorflowHook(config_path).get_flow(flow_name)
    if flow.props["sync.group.offsets.enabled"] and not flow.props["emit.checkpoints.enabled"]:
        # MM2 runs no checkpoint task then, and its group sync works from that task's checkpoints
        raise AirflowSkipException(f"{flow.name}: group offset sync: emit.checkpoints.enabled=false")
    _skip_unless_due(flow, "group offset sync", "sync.group.offsets.interval.seconds", times or RunTimes.of())
    run = sync_group_offsets(cfg, flow)
    if run.skipped_reason:
        skip_task(run.render(), note=run.state_skip)
    log.info("%s", run.render())
    metric("incr", "group_sync.committed", sum(run.committed.values()), {"flow": flow.id})
    if run.errors:
        raise AirflowFailException(f"{flow.name}: group offset sync failed for " + _failed_groups(run.errors))
    return run.brief()


def checkpoint_params() -> dict[str, Any]:
    return {
        "groups": regex(
            "Groups (regex)",
            "Checkpoint only the consumer groups matching this regex (full match), "
            "within the flow's group filter; empty: all",
        ),
        "sync_group_offsets": Param(
            True,
            type="boolean",
            title="Sync group offsets",
            description="Commit the checkpointed offsets for idle groups on the target in this run "
            "(off: checkpoints only; sync.group.offsets.enabled must be true for it to run at all)",
        ),
    }


def build_checkpoint_dag(cfg: Config, flow: FlowConfig) -> DAG:
    name, path, tick = flow.name, task_config_path(cfg), checkpoint_period(flow)
    rpo_notifier(flow)  # a notifier path that does not import is this DAG file's import error, naming it
    with flow_dag(
        "checkpoint",
        flow,
        "exact MM2 checkpoints and group offset sync",
        timedelta(seconds=tick) if tick else None,
        retry_delay_s=10,
        params=checkpoint_params(),
        doc_md=__doc__,
    ) as dag:
        checkpoint = timed_task(
            "checkpoint",
            lambda times, params: checkpoint_task(name, path, times, regex_or_none(params, "groups")),
            doc_md="Translate committed source group offsets exactly; write MM2 checkpoints on the target.",
        )
        sync_group_offsets = timed_task(
            "sync_group_offsets",
            lambda times, params: group_sync_task(name, path, times, params.get("sync_group_offsets", True)),
            doc_md="Commit checkpointed offsets on the target for idle groups, never backwards.",
            # runs when `checkpoint` was skipped as not due: the checkpoints are on the target
            trigger_rule="none_failed",
        )
        checkpoint() >> sync_group_offsets()
    return dag


def build_checkpoint_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One checkpoint DAG per configured flow, disabled ones too (their tasks end skipped, saying why)."""
    return flow_dags(cfg, build_checkpoint_dag, enabled_only=False)
