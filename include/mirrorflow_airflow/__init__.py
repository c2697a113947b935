"""Airflow adapters for mirrorflow, laid out like a provider package; thin: logic is in `mirrorflow`.

Installed with `pip install "mirrorflow[airflow]"`, this is the Airflow provider `mirrorflow`
(`get_provider_info`: its hook, connection type, operators and plugins; docs/airflow-provider.md).
`hooks/` MirrorflowHook (the config and the clusters' Kafka connections), `operators/` the flow's operations
for a user's own DAG (replicate, checkpoint, sync, verify, failover and failback with their approvals), the
Spark copy step and the deferrable heartbeat task, `triggers/` what those wait on (on Airflow's triggerer),
`dag_builders/` one module per DAG kind (`build_<kind>_dags(cfg=None)`, `build_<kind>_dag(cfg, flow)`),
`generated_dags.build_flow_dags` all of them for a config in one call (exported here), `common` what every
generated DAG shares, `plugins/` the status page, metrics and notes plugins, `status_html` the status page's
HTML (its data: `mirrorflow.observe.status_page`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_flow_dags"]


def __getattr__(name: str) -> Any:
    # lazy: importing a hook (the core's connection provider) must not import every DAG builder
    if name == "build_flow_dags":
        from mirrorflow_airflow.generated_dags import build_flow_dags

        return build_flow_dags
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
