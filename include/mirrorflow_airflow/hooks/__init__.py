"""Hooks: what mirrorflow tasks connect with. `kafka_connection_settings` is the core's
`mirrorflow.connection_providers: airflow` entry point (pyproject.toml), so it stays importable here."""

from mirrorflow_airflow.hooks.mirrorflow import MirrorflowHook, kafka_connection_settings

__all__ = ["MirrorflowHook", "kafka_connection_settings"]
