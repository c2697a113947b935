"""SyncOperator: a flow's topic, partition, topic-config and topic-ACL sync in one task of a user's DAG --
the generated sync DAG's task function per concern (dag_builders/sync.sync_task), topics first, all due
now (as a manual trigger of that DAG)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from mirrorflow_airflow.operators.flow_base import FlowOperation

CONCERNS = ("topics", "configs", "acls")


class SyncOperator(FlowOperation, BaseOperator):
    """Sync `concerns` of `flow` (default all three, topics first); `dry_run` plans and reports, changing
    nothing. Returns each concern's summary (a concern that did not run: the reason, e.g. disabled in the
    flow's config); skipped when none ran; fails when a change failed, after the others were applied."""

    template_fields = ("flow",)

    def __init__(
        self,
        *,
        flow: str,
        config_path: str | None = None,
        mirrorflow_conn_id: str | None = None,
        concerns: Sequence[str] = CONCERNS,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        unknown = sorted(set(concerns) - set(CONCERNS))
        if unknown or not concerns:
            raise ValueError(f"concerns {list(concerns)}: some of {', '.join(CONCERNS)}")
        super().__init__(**kwargs)
        self._flow_args(flow, config_path, mirrorflow_conn_id)
        self.concerns, self.dry = [c for c in CONCERNS if c in concerns], dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        from mirrorflow_airflow.dag_builders.sync import sync_task

        path = self.resolved_config_path()
        done: dict[str, Any] = {}
        skipped: list[str] = []
        for concern in self.concerns:
            try:
                done[concern] = sync_task(self.flow, concern, path, dry_run=self.dry)
            except AirflowSkipException as exc:
                done[concern] = str(exc)
                skipped.append(str(exc))
        if len(skipped) == len(self.concerns):
            raise AirflowSkipException("; ".join(skipped))
        return done
