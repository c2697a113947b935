"""HeartbeatOperator: one window of MM2 heartbeats without holding a worker slot.

The task emits the tick's first heartbeat (creating the heartbeats topics), defers the rest to
HeartbeatTrigger on the triggerer, and resumes only to report the flow's replication latency. A
flow at rest therefore costs a worker slot for about a second per window, not the whole window; the
summary's `worker_s` says how long this task held one. It runs as the heartbeat DAG's only task
(dag_builders/heartbeat.py), a window (`tick_s`) per run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow_airflow.common import metric
from mirrorflow_airflow.dag_builders.timers import RunTimes
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.run_notes import skip_task
from mirrorflow_airflow.triggers.heartbeat import HeartbeatTrigger

log = logging.getLogger(__name__)


class HeartbeatOperator(BaseOperator):
    """Emit `flow_name`'s heartbeats every emit.heartbeats.interval.seconds for `tick_s` seconds
    (once, in the runs where that interval is due, when it is not shorter than the tick). A run whose
    `window_seconds` Param is set (the heartbeat DAG's form) lasts that many seconds instead."""

    def __init__(self, *, flow_name: str, config_path: str | None, tick_s: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flow_name, self.config_path, self.tick_s = flow_name, config_path, tick_s

    def execute(self, context: Any) -> dict[str, Any]:
        from mirrorflow.clients import FlowClients
        from mirrorflow.groups.heartbeat import emit_heartbeats, heartbeat_count
        from mirrorflow.state.flow_state import flow_state

        began = time.monotonic()
        tick_s = self.window(context)
        cfg, flow = MirrorflowHook(self.config_path).get_flow(self.flow_name)
        prop = "emit.heartbeats.interval.seconds"
        if int(flow.props[prop]) >= tick_s and flow.props["emit.heartbeats.enabled"]:
            times = RunTimes.of(
                context.get("dag_run"), context.get("logical_date"), context.get("prev_data_interval_end_success")
            )
            why = times.not_due_reason(prop, int(flow.props[prop]))
            if why:
                raise AirflowSkipException(f"{flow.name}: heartbeats: {why}")
        with FlowClients(cfg, flow) as clients:
            skip = flow_state(clients).skip_reason(flow.name, "checkpoint")
            if skip:
                self._skip(context, f"heartbeats: {skip}", skip, tick_s)
            start = time.time()
            first = emit_heartbeats(cfg, flow, clients=clients)
        if not first:
            raise AirflowSkipException(f"{flow.name}: emit.heartbeats.enabled=false")
        count = heartbeat_count(flow, tick_s)
        worker_s = time.monotonic() - began
        if count > 1:
            self.defer(
                trigger=HeartbeatTrigger(
                    flow.name, self.config_path, start, count, [asdict(e) for e in first], worker_s
                ),
                method_name="execute_complete",
                timeout=timedelta(seconds=tick_s + 300),  # a triggerer that never runs it
            )
        return self._finish(flow.name, [asdict(e) for e in first], worker_s)

    def window(self, context: Any) -> int:
        """This run's seconds of heartbeats: its `window_seconds` Param when set, else `tick_s`."""
        chosen = (context.get("params") or {}).get("window_seconds")
        return int(chosen) if chosen else self.tick_s

    def _skip(self, context: Any, reason: str, note: str, tick_s: int) -> None:
        """End skipped; a scheduled run first waits out its window on the triggerer, so that a
        `@continuous` heartbeat DAG of a paused flow does not start run after run."""
        from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger

        if not RunTimes.of(context.get("dag_run")).manual:
            self.defer(
                trigger=TimeDeltaTrigger(timedelta(seconds=tick_s)),
                method_name="skip_after_wait",
                kwargs={"reason": reason, "note": note},
            )
        skip_task(reason, note=note)

    def skip_after_wait(self, context: Any, event: Any = None, reason: str = "", note: str | None = None) -> None:
        skip_task(reason, note=note)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        began = time.monotonic()
        if event.get("error"):
            raise AirflowFailException(f"{self.flow_name}: heartbeats: {event['error']}")
        return self._finish(self.flow_name, list(event["emitted"]), float(event["worker_s"]), began)

    def _finish(
        self, flow_name: str, emitted: list[dict[str, Any]], worker_s: float, began: float | None = None
    ) -> dict[str, Any]:
        from mirrorflow.groups.heartbeat import Emission, HeartbeatRun, replication_latency

        began = time.monotonic() if began is None else began
        cfg, flow = MirrorflowHook(self.config_path).get_flow(flow_name)
        latency = replication_latency(cfg, flow)
        run = HeartbeatRun(flow.name, flow.target, [Emission(**e) for e in emitted], latency)
        log.info("%s", run.render())
        if latency.latency_ms is not None:
            metric("gauge", "replication.latency_ms", latency.latency_ms, {"flow": flow.id})
        worker_s += time.monotonic() - began
        metric("timing", "heartbeat.worker_slot", timedelta(seconds=worker_s), {"flow": flow.id})
        return {**run.brief(), "worker_s": round(worker_s, 3)}
