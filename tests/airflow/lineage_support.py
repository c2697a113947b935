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


def record_lineage(dag) -> None:
    """The next dag.test() of `dag` emits OpenLineage task events (the session's emission_policy
    turns them off elsewhere), starting with an empty hook lineage collector. The
    collector is one per process: a worker runs each task in a process of its own, but dag.test()
    runs them all in the test's, so what earlier tasks (and tests) collected would be reported again."""
    from airflow.providers.openlineage.api.emission_policy import extend_global_openlineage_emission_policy
    from airflow.sdk.lineage import get_hook_lineage_collector

    extend_global_openlineage_emission_policy(dag, emit=True, emit_dag_events=False)
    get_hook_lineage_collector.cache_clear()
