"""MM2's `*.interval.seconds` timers, run by Airflow schedules.

MM2 runs each periodic job (topic refresh, config sync, ACL sync, checkpoints, group offset sync,
group refresh) on its own timer. Here one DAG per concern group ticks at the shortest enabled
interval of its tasks, and each task runs only in the runs where its own interval is due:

* a job with interval I is due in a scheduled run when a multiple of I seconds (counted from the
  Unix epoch, UTC) lies in (the previous successful run's logical date, this run's logical date];
  so it runs once in every I-second window, in the first run of that window;
* a failed run does not count: the next run's window starts at the last successful run, so a
  job whose run failed is due again at once;
* with no previous successful run, and in every manually triggered run, every job is due (a
  manual trigger means "now").

A DAG run is successful only if each task that was due succeeded, so the previous successful
run is also the last time each due job succeeded (or was not yet due). Nothing is stored besides
what Airflow keeps about its runs: losing the Airflow database only makes every job due once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow.sdk import task

TRIGGERED = ("manual", "operator_triggered")  # run types that mean "now": every job is due


def is_due(interval_s: int, now: datetime | None, last_success: datetime | None) -> bool:
    """True when a multiple of `interval_s` seconds since the epoch lies in (last_success, now]."""
    if now is None or last_success is None:
        return True
    return math.floor(now.timestamp() / interval_s) > math.floor(last_success.timestamp() / interval_s)


def period(intervals: list[int]) -> int | None:
    """The DAG's tick: the shortest interval of its enabled jobs (None: no job runs on a timer)."""
    return min(intervals) if intervals else None


def _datetime(value: Any) -> datetime | None:
    # Airflow passes lazy proxies; isinstance sees through them (a proxy of None is no datetime).
    return value if isinstance(value, datetime) else None


@dataclass(frozen=True)
class RunTimes:
    """What a task needs to know about its DAG run to decide whether a timer is due."""

    manual: bool
    now: datetime | None
    last_success: datetime | None

    @classmethod
    def of(cls, dag_run: Any = None, logical_date: Any = None, prev_data_interval_end_success: Any = None) -> RunTimes:
        """From the task's context (None values: a run outside Airflow, every job is due)."""
        run_type = getattr(dag_run, "run_type", None)
        run_type = str(getattr(run_type, "value", run_type) or "")
        return cls(
            manual=dag_run is None or run_type in TRIGGERED,
            now=_datetime(logical_date),
            last_success=_datetime(prev_data_interval_end_success),
        )

    def due(self, interval_s: int) -> bool:
        return self.manual or is_due(interval_s, self.now, self.last_success)

    def not_due_reason(self, prop: str, interval_s: int) -> str | None:
        """Why a job on `prop`'s timer does not run now (None: it is due)."""
        if self.due(interval_s):
            return None
        return (
            f"not due: {prop}={interval_s} and the last successful run "
            f"({self.last_success.isoformat() if self.last_success else '?'}) was in the same interval"
        )


def timed_task(task_id: str, body: Callable[[RunTimes, dict[str, Any]], dict[str, Any]], **task_args: Any) -> Any:
    """An Airflow task on an MM2 timer: `body` gets the run's RunTimes and its Params (the trigger
    form; scheduled runs: the defaults). `task_args` go to `@task` (doc_md, trigger_rule, ...)."""

    @task(task_id=task_id, **task_args)
    def run(
        params: dict | None = None,
        dag_run: Any = None,
        logical_date: Any = None,
        prev_data_interval_end_success: Any = None,
    ) -> dict[str, Any]:
        return body(RunTimes.of(dag_run, logical_date, prev_data_interval_end_success), params or {})

    return run
