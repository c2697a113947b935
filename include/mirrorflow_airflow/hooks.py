"""MirrorflowHook: the mirrorflow configuration as Airflow tasks see it."""
from __future__ import annotations

from airflow.sdk import BaseHook

from mirrorflow import config as config_mod


class MirrorflowHook(BaseHook):
    """Loads the config file ($MIRRORFLOW_CONFIG or the embedded default).

    Cluster secrets stay out of the file: a cluster names an Airflow Kafka connection with
    `airflow.conn.id`, which the core resolves through the Task SDK when a client is built.
    """

    conn_name_attr = "mirrorflow_config"
    hook_name = "mirrorflow"

    def __init__(self, config_path: str | None = None) -> None:
        super().__init__()
        self.config_path = config_path

    def get_config(self) -> config_mod.Config:
        return config_mod.load(self.config_path)
