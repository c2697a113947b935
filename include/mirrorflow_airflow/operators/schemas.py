"""SchemasOperator: one schema pass of a flow in a task of a user's DAG -- the source registry's subjects,
versions with their ids, references and compatibility copied into the target's registry, incrementally
(docs/schemas.md); the generated schemas DAG's task function (dag_builders/schemas.schemas_task)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from mirrorflow_airflow.operators.flow_base import FlowOperation


class SchemasOperator(FlowOperation, BaseOperator):
    """Copy `flow`'s schemas with their ids (`dry_run`: list what would be copied, write nothing). Fails before
    any write on a conflict, an unreachable registry or a refused credential, naming the subject and id."""

    template_fields = ("flow",)

    def __init__(
        self,
        *,
        flow: str,
        config_path: str | None = None,
        mirrorflow_conn_id: str | None = None,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._flow_args(flow, config_path, mirrorflow_conn_id)
        self.dry = dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        from mirrorflow_airflow.dag_builders.schemas import schemas_task

        return schemas_task(self.flow, self.dry, self.resolved_config_path())
