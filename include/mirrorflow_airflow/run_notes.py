"""Why a DAG run did nothing (or what it found, e.g. a missed RPO), on the run itself: its note in the Airflow UI.

A run of a paused, stopped or failed-over flow ends with every task skipped, which Airflow counts as
"success": the DAG's runs stay green and the reason sat only in each task's log. Airflow 3.3's Task
SDK cannot set a run's note (only the REST API and the scheduler's database session can), so the two
halves meet through one XCom:

* in the task (`skip_task`): the flow state's reason and next step are pushed as the XCom
  `mirrorflow_run_note`, then the task ends skipped with its own message;
* in the scheduler (`note_run`, called by the listener of mirrorflow_airflow/plugins/notes.py when a run
  ends): that XCom becomes the run's note, unless a person wrote one already. The DAG's grid marks
  the run as having a note and the run's page shows it (Markdown) above its tasks.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

log = logging.getLogger(__name__)

RUN_NOTE_KEY = "mirrorflow_run_note"
NOTE_MAX = 1000  # Airflow's dag_run_note.content is a String(1000)


def skip_task(reason: str, note: str | None = None) -> NoReturn:
    """End the running task skipped with `reason`; `note` (why the whole run does nothing, with the
    next step) is left for the run's note. Never fails the task for the note's sake."""
    from airflow.sdk.exceptions import AirflowSkipException

    if note:
        leave_note(note)
    raise AirflowSkipException(reason)


def leave_note(note: str) -> None:
    """Leave `note` for the running task's DAG run (its note in the UI once the run ends). Never
    fails the task for the note's sake."""
    try:
        from airflow.sdk import get_current_context

        get_current_context()["ti"].xcom_push(key=RUN_NOTE_KEY, value=note)
    except Exception:  # noqa: BLE001 - a note that cannot be left must not fail the task
        log.warning("the run's note could not be left: %s", note, exc_info=True)


def run_note_text(value: Any) -> str | None:
    """The note a task left (an XCom value), cut to what Airflow stores."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    return text if len(text) <= NOTE_MAX else text[: NOTE_MAX - 1] + "…"


def note_run(dag_run: Any) -> str | None:
    """Write the note a task of `dag_run` left (RUN_NOTE_KEY) on the run, in the database session
    holding the run (the scheduler's, which commits it with the run's new state), or in a session of
    its own when the run is detached (`dag.test()`). A note a person wrote is kept. Returns the note
    written (None: nothing to write)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy.orm import object_session

    if not str(dag_run.dag_id).startswith("mirrorflow_"):
        return None
    session = object_session(dag_run)
    if session is not None:
        return _write_note(session, dag_run)
    with create_session() as own:
        attached = own.get(DagRun, dag_run.id)
        return None if attached is None else _write_note(own, attached)


def _write_note(session: Any, dag_run: Any) -> str | None:
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    rows = session.execute(
        select(XComModel.value)
        .where(XComModel.dag_run_id == dag_run.id, XComModel.key == RUN_NOTE_KEY)
        .order_by(XComModel.timestamp.desc())
        .limit(1)
    ).all()
    text = run_note_text(XComModel.deserialize_value(rows[0])) if rows else None
    if text is None or dag_run.note:
        return None
    dag_run.note = text
    return text
