"""What the operators of a flow's operations share (replicate, checkpoint, sync, verify, failover, failback):
the flow they act on, where its config comes from, and how a step finds the step before it.

Each operator is a thin shell over the task function its generated DAG runs (dag_builders/), so a user's DAG
and the generated one do the same thing, log the same report and push the same summary to XCom.
"""

from __future__ import annotations

from typing import Any

from mirrorflow_airflow.hooks import MirrorflowHook


class FlowOperation:
    """Mixin of the flow operators. `flow`: the flow's name (`A->B`, templated). The config: `config_path`,
    else the `mirrorflow` connection `mirrorflow_conn_id` (its extra `{"config": PATH}`), else
    $MIRRORFLOW_CONFIG of the worker."""

    flow: str
    config_path: str | None
    mirrorflow_conn_id: str | None

    def _flow_args(self, flow: str, config_path: str | None, mirrorflow_conn_id: str | None) -> None:
        self.flow, self.config_path, self.mirrorflow_conn_id = flow, config_path, mirrorflow_conn_id

    def resolved_config_path(self) -> str | None:
        """The config file the task functions reload (None: $MIRRORFLOW_CONFIG or the default)."""
        return MirrorflowHook(self.config_path, self.mirrorflow_conn_id).config_path()


def sibling_task_id(op: Any, task_id: str) -> str:
    """`task_id` of a step in the same task group as `op` (its full id when the group prefixes ids)."""
    group = getattr(op, "task_group", None)
    if group is not None and getattr(group, "group_id", None):
        full = group.child_id(task_id)
        if op.dag is not None and full in op.dag.task_dict:
            return full
    return task_id
