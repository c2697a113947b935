"""Heartbeat DAGs: one per configured flow, `mirrorflow_heartbeat__<flow.id>`: MM2's heartbeats
every `emit.heartbeats.interval.seconds` (1 s), waited for on Airflow's triggerer.

MM2's heartbeat task writes a heartbeat every interval for as long as it runs, so a run of this DAG
is a window of WINDOW_S (60 s) of heartbeats: its `heartbeat` task emits the first (creating the
`heartbeats` topics), defers the rest to HeartbeatTrigger on the triggerer (no worker slot while it
waits), and resumes at the window's end only to report the flow's replication latency (log and the
`mirrorflow.replication.latency_ms` metric, once per window). The schedule is `@continuous`: the next
window starts as soon as one ends (a few seconds of Airflow's run start between windows). An
interval as long as the window (or longer) gives one emission per run on a schedule of that
interval; `emit.heartbeats.enabled: false` leaves the DAG unscheduled (a manual run ends skipped).
A manual run may choose its own window (the `window_seconds` Param): 1 s gives one heartbeat at once,
a longer window keeps emitting for that long.

The heartbeats are a DAG of their own so that no other DAG's run lasts a window: the checkpoint
DAG's run, which held them before, ends in seconds. Disabled flows get one too: MM2's heartbeat
connector ignores `enabled`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param

from mirrorflow.config import Config, FlowConfig
from mirrorflow_airflow.common import flow_dag, flow_dags, task_config_path
from mirrorflow_airflow.operators.heartbeat import HeartbeatOperator

WINDOW_S = 60  # one run's heartbeats; the latency is reported once per run (the checkpoint DAG's default tick)
MAX_WINDOW_S = 3600  # a manual run's longest window (the flow's next scheduled window waits for it)


def heartbeat_window(flow: FlowConfig) -> int:
    """Seconds of heartbeats in one run: WINDOW_S, or the interval when it is not shorter."""
    return max(WINDOW_S, int(flow.props["emit.heartbeats.interval.seconds"]))


def heartbeat_schedule(flow: FlowConfig) -> Any:
    """`@continuous` (windows back to back), the interval itself when one run emits once, or None
    (emit.heartbeats.enabled false: manual runs only)."""
    if not flow.props["emit.heartbeats.enabled"]:
        return None
    interval = int(flow.props["emit.heartbeats.interval.seconds"])
    return "@continuous" if interval < WINDOW_S else timedelta(seconds=interval)


def heartbeat_params(flow: FlowConfig) -> dict[str, Any]:
    return {
        "window_seconds": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            maximum=MAX_WINDOW_S,
            title="Window (seconds)",
            description="Emit heartbeats for this many seconds in this run, every emit.heartbeats.interval.seconds "
            f"(1: one heartbeat at once); empty: the DAG's window, {heartbeat_window(flow)} s",
        ),
    }


def build_heartbeat_dag(cfg: Config, flow: FlowConfig) -> DAG:
    window = heartbeat_window(flow)
    with flow_dag(
        "heartbeat",
        flow,
        "MM2 heartbeats (waited for on the triggerer) and the replication latency they show",
        heartbeat_schedule(flow),
        retry_delay_s=10,
        params=heartbeat_params(flow),
        doc_md=__doc__,
    ) as dag:
        HeartbeatOperator(
            task_id="heartbeat",
            flow_name=flow.name,
            config_path=task_config_path(cfg),
            tick_s=window,
            doc_md=f"Emit MM2 heartbeats for {window} s (on the triggerer between the first and the last), "
            "then log the flow's replication latency.",
        )
    return dag


def build_heartbeat_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One heartbeat DAG per configured flow, disabled ones too (MM2 emits heartbeats for them)."""
    return flow_dags(cfg, build_heartbeat_dag, enabled_only=False)
