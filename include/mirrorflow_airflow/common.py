"""What every generated mirrorflow DAG shares: its start date and how tasks send metrics."""
from __future__ import annotations

import logging

import pendulum

log = logging.getLogger(__name__)

# Generated DAGs never catch up, so the start date only has to lie in the past.
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def metric(kind: str, name: str, value: float, tags: dict[str, str]) -> None:
    """Send `mirrorflow.<name>` through Airflow's stats (a no-op backend unless [metrics] enables one)."""
    try:
        from airflow.sdk.observability import stats

        getattr(stats, kind)(f"mirrorflow.{name}", value, tags=tags)
    except Exception:  # noqa: BLE001 - metrics must never fail a task
        log.debug("metric %s not sent", name, exc_info=True)
