"""MirrorflowHook: the mirrorflow configuration and the Kafka connections, as Airflow tasks see them."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from mirrorflow import config as config_mod
from mirrorflow.errors import ConfigError


def kafka_connection_settings(conn_id: str) -> dict[str, str]:
    """librdkafka settings of an Airflow connection of the Kafka provider's type (`kafka`): its
    `extra` holds the client settings, as the provider's KafkaBaseHook reads them. Registered as
    the `airflow` connection provider of mirrorflow (pyproject entry point), so the core resolves
    `airflow.conn.id` without importing Airflow; raises LookupError when the connection is missing."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:  # noqa: BLE001 - the Task SDK raises its own not-found types
        raise LookupError(f"Airflow connection not found ({type(exc).__name__})") from None
    return {k: str(v) for k, v in (conn.extra_dejson or {}).items()}


class MirrorflowHook(BaseHook):
    """Owns what a mirrorflow task connects with: the config file and, through it, the clusters' Kafka
    connections.

    The config file is `mirrorflow_config` (a path), else the one a `mirrorflow` connection names
    (`mirrorflow_conn_id`: the connection type this provider registers, its extra `{"config": PATH}`), else
    $MIRRORFLOW_CONFIG or the embedded default. Cluster secrets stay out of the file: a cluster names an
    Airflow connection of the Kafka provider's type with `airflow.conn.id`; `kafka_connection_settings`
    resolves it when a client is built.
    """

    conn_name_attr = "mirrorflow_conn_id"
    default_conn_name = "mirrorflow_default"
    conn_type = "mirrorflow"
    hook_name = "mirrorflow"

    def __init__(self, mirrorflow_config: str | None = None, mirrorflow_conn_id: str | None = None) -> None:
        super().__init__()
        self.mirrorflow_config = mirrorflow_config
        self.mirrorflow_conn_id = mirrorflow_conn_id

    def config_path(self) -> str | None:
        """The config file's path (None: $MIRRORFLOW_CONFIG or the embedded default); a `mirrorflow`
        connection without `config` in its extra is a ConfigError naming the connection."""
        if self.mirrorflow_config or not self.mirrorflow_conn_id:
            return self.mirrorflow_config
        path = (self.get_connection(self.mirrorflow_conn_id).extra_dejson or {}).get("config")
        if not path:
            raise ConfigError(
                f"Airflow connection {self.mirrorflow_conn_id!r} names no mirrorflow config: set its extra to "
                '{"config": "/path/to/mirrorflow.yaml"}'
            )
        return str(path)

    def get_conn(self) -> config_mod.Config:
        """The loaded, validated config (a ConfigError names every problem with its key)."""
        return config_mod.load(self.config_path())

    def get_flow(self, name: str) -> tuple[config_mod.Config, config_mod.FlowConfig]:
        """The loaded config and its flow `name` (an unknown name: a ConfigError listing the flows)."""
        cfg = self.get_conn()
        return cfg, cfg.flow(name)

    def test_connection(self) -> tuple[bool, str]:
        """Load the config and reach every cluster it names, as Airflow's connection test does."""
        from mirrorflow.clients import cluster_connection
        from mirrorflow.errors import MirrorflowError

        try:
            cfg = self.get_conn()
            for alias in cfg.clusters:
                cluster_connection(cfg.cluster(alias)).admin()
        except MirrorflowError as exc:
            return False, str(exc)
        return True, f"{len(cfg.clusters)} cluster(s) reachable"

    def cluster_settings(self, alias: str) -> dict[str, Any]:
        """librdkafka settings of configured cluster `alias`, secrets resolved (never log them)."""
        return self.get_conn().cluster(alias).client_config()
