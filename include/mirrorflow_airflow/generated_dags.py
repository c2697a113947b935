"""The per-flow DAGs generated from a mirrorflow config, as one call of a user's DAG file:

    # dags/mirrorflow.py of your Airflow deployment
    from mirrorflow_airflow import build_flow_dags

    globals().update(build_flow_dags("/opt/airflow/config/mirrorflow.yaml"))

Each kind's builder (dag_builders/<kind>.py, `build_<kind>_dags(cfg)`) makes its DAGs for every flow it
applies to, `mirrorflow_<kind>__<flow.id>`; this repository's dags/ holds one file per kind over the same
builders. Parsing touches no cluster; a config that cannot be read or is invalid raises ConfigError naming
the file and the key, which Airflow shows as the DAG file's import error.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mirrorflow.config import Config
from mirrorflow.ops.registry import dag_kinds

# every kind of generated DAG, scheduled ones first: the operations that have one (mirrorflow.ops.registry)
KINDS = dag_kinds()


def build_flow_dags(config: str | Path | Config | None = None, kinds: Iterable[str] | None = None) -> dict[str, Any]:
    """The DAGs of `kinds` (default: all of KINDS) for the flows of `config` (a path, a loaded Config, or
    None: $MIRRORFLOW_CONFIG, else the embedded default), keyed by dag_id: `globals().update(...)` them in a
    DAG file. Their tasks reload the config from the same file."""
    from mirrorflow_airflow.hooks import MirrorflowHook

    chosen = list(KINDS if kinds is None else kinds)
    unknown = [k for k in chosen if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown DAG kind(s) {unknown}: choose from {', '.join(KINDS)}")
    cfg = config if isinstance(config, Config) else MirrorflowHook(str(config) if config else None).get_conn()
    dags: dict[str, Any] = {}
    for kind in chosen:
        builder = getattr(importlib.import_module(f"mirrorflow_airflow.dag_builders.{kind}"), f"build_{kind}_dags")
        dags.update(builder(cfg))
    return dags
