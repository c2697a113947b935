"""The OpenLineage events the session's Airflow tasks emitted (the provider's file transport,
configured in tests/conftest.py): what a lineage backend such as Marquez would receive."""
from __future__ import annotations

import json
import os
from pathlib import Path


def events_file() -> Path:
    return Path(json.loads(os.environ["AIRFLOW__OPENLINEAGE__TRANSPORT"])["log_file_path"])


def lineage(job: str, run_id: str | None = None) -> list[tuple[str, list[tuple[str, str]], list[tuple[str, str]]]]:
    """(eventType, inputs, outputs) of job `job` (`<dag_id>.<task_id>`), in the order emitted, with
    each dataset as (namespace, name); `run_id`: only events of that Airflow DAG run."""
    out = []
    path = events_file()
    for line in path.read_text().splitlines() if path.exists() else []:
        e = json.loads(line)
        if e.get("job", {}).get("name") != job:
            continue
        airflow_run = e.get("run", {}).get("facets", {}).get("airflow", {}).get("dagRun", {})
        if run_id is not None and airflow_run.get("run_id") != run_id:
            continue
        out.append((e["eventType"], [(d["namespace"], d["name"]) for d in e.get("inputs", [])],
                    [(d["namespace"], d["name"]) for d in e.get("outputs", [])]))
    return out


def fresh_lineage_collector() -> None:
    """Start the next dag.test() with an empty hook lineage collector. It is one per process: a
    worker runs each task in a process of its own, but dag.test() runs them all in the test's, so
    what earlier tasks (and tests) collected would be reported again."""
    from airflow.sdk.lineage import get_hook_lineage_collector

    get_hook_lineage_collector.cache_clear()
