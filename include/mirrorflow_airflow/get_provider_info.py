"""The Airflow provider's description, read by Airflow through the package's `apache_airflow_provider`
entry point (pyproject.toml): `airflow providers list` shows it, the connection form offers its
connection type, and the docs of `airflow providers hooks|behaviours|plugins` list what is here."""

from __future__ import annotations

from typing import Any

OPERATOR_MODULES = [
    "mirrorflow_airflow.operators.replicate",
    "mirrorflow_airflow.operators.checkpoint",
    "mirrorflow_airflow.operators.sync",
    "mirrorflow_airflow.operators.verify",
    "mirrorflow_airflow.operators.schemas",
    "mirrorflow_airflow.operators.failover",
    "mirrorflow_airflow.operators.failback",
    "mirrorflow_airflow.operators.approval",
    "mirrorflow_airflow.operators.heartbeat",
    "mirrorflow_airflow.operators.spark_submit",
]
PLUGINS = {
    "mirrorflow_status": "mirrorflow_airflow.plugins.status.MirrorflowStatusPlugin",
    "mirrorflow_metrics": "mirrorflow_airflow.plugins.metrics.MirrorflowMetricsPlugin",
    "mirrorflow_notes": "mirrorflow_airflow.plugins.notes.MirrorflowNotesPlugin",
}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "mirrorflow",
        "name": "mirrorflow",
        "description": "Kafka-to-Kafka replication with MirrorMaker 2 semantics, exactly once: operators for a "
        "flow's replicate, checkpoint, sync, verify, schemas, failover and failback, the per-flow DAGs generated "
        "from a config in one call, and the replication status page.",
        "integrations": [
            {
                "integration-name": "mirrorflow",
                "tags": ["apache"],
            }
        ],
        "operators": [{"integration-name": "mirrorflow", "python-modules": OPERATOR_MODULES}],
        "hooks": [{"integration-name": "mirrorflow", "python-modules": ["mirrorflow_airflow.hooks.mirrorflow"]}],
        "triggers": [
            {
                "integration-name": "mirrorflow",
                "python-modules": ["mirrorflow_airflow.triggers.run_wait", "mirrorflow_airflow.triggers.heartbeat"],
            }
        ],
        "connection-types": [
            {
                "connection-type": "mirrorflow",
                "hook-class-name": "mirrorflow_airflow.hooks.mirrorflow.MirrorflowHook",
                "hook-name": "mirrorflow",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "login", "password", "port", "host"],
                    "relabeling": {"extra": "mirrorflow config"},
                    "placeholders": {"extra": '{"config": "/opt/airflow/config/mirrorflow.yaml"}'},
                },
            }
        ],
        "plugins": [{"name": name, "plugin-class": cls} for name, cls in PLUGINS.items()],
    }
