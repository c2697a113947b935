"""Airflow plugin: a listener that writes why a mirrorflow DAG run did nothing (the flow is paused,
stopped or failed over, and the next step) on the run as its note, when the run ends.

Thin: mirrorflow_airflow.run_notes does the work. Airflow calls DAG-run listeners where a run's state
changes: in the scheduler (and in the API server when a user marks a run), inside the database session
that commits the new state, so the note lands with it. Never raises: Airflow logs a listener's error
and goes on, and a note is not worth more than that.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from airflow.listeners import hookimpl
from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger(__name__)


def _note(dag_run: Any) -> None:
    from mirrorflow_airflow.run_notes import note_run

    try:
        note_run(dag_run)
    except Exception:  # noqa: BLE001 - never disturb the scheduler for a note
        log.warning("no note written on %s", getattr(dag_run, "run_id", "?"), exc_info=True)


@hookimpl
def on_dag_run_success(dag_run: Any, msg: str) -> None:
    _note(dag_run)


@hookimpl
def on_dag_run_failed(dag_run: Any, msg: str) -> None:
    _note(dag_run)


class MirrorflowNotesPlugin(AirflowPlugin):
    name = "mirrorflow_notes"
    listeners = [sys.modules[__name__]]
