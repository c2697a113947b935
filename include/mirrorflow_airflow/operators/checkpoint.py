"""CheckpointOperator: one checkpoint pass of a flow (exact MM2 checkpoints of the source groups' committed
offsets) and, unless turned off, the group offset sync (commit them on the target for idle groups, never
backwards) -- the generated checkpoint DAG's two task functions (dag_builders/checkpoint.py), run as a
manual trigger runs them: both due now."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from mirrorflow_airflow.operators.flow_base import FlowOperation


class CheckpointOperator(FlowOperation, BaseOperator):
    """Checkpoint `flow`'s groups (`groups`: a regex, full match; default all of the flow's), then sync their
    offsets on the target (`sync_group_offsets`; the flow's sync.group.offsets.enabled must be true). Returns
    `{"checkpoint": ..., "group_sync": ...}` (a step that did not run: the reason). Skipped when the flow is
    paused, stopped or failed over; fails naming the groups whose checkpoint or commit failed."""

    template_fields = ("flow", "groups")

    def __init__(
        self,
        *,
        flow: str,
        config_path: str | None = None,
        mirrorflow_conn_id: str | None = None,
        groups: str | None = None,
        sync_group_offsets: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._flow_args(flow, config_path, mirrorflow_conn_id)
        self.groups, self.sync_group_offsets = groups, sync_group_offsets

    def execute(self, context: Any) -> dict[str, Any]:
        from mirrorflow_airflow.dag_builders.checkpoint import checkpoint_task, group_sync_task

        path = self.resolved_config_path()
        done: dict[str, Any] = {"checkpoint": checkpoint_task(self.flow, path, None, self.groups or None)}
        try:
            done["group_sync"] = group_sync_task(self.flow, path, None, self.sync_group_offsets)
        except AirflowSkipException as exc:  # off here or in the flow's config: the checkpoints stand
            done["group_sync"] = str(exc)
        return done
