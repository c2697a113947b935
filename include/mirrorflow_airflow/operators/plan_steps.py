"""What the approval and the commit of an approved plan share, for every operation that has one (the
failover, the failback): the preflight's result pulled from its sibling task (found inside a task group
too), skipped when it has nothing to approve, and the commit given exactly that plan and its approval."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from mirrorflow_airflow.operators.flow_base import FlowOperation, sibling_task_id


def nothing_to_approve(preflight: dict[str, Any] | None) -> str | None:
    """Why a preflight's plan is not for approval (None: it is)."""
    if not preflight:
        return "no preflight result"
    if preflight.get("dry_run"):
        return "dry run: nothing changed"
    if not preflight.get("plan_id"):
        return preflight.get("note") or "nothing to do"
    return None


class PlanApprovalStep:
    """The approval of a preflight's plan (mixed in before the operation's approval class): skipped when
    the preflight has nothing to approve; its subject and body the plan's id and report, unless the user
    gave their own."""

    operation: str  # "failover" | "failback"
    flow: str
    own_text: bool
    preflight_task_id: str
    subject: str
    body: str | None

    def title(self, preflight: dict[str, Any]) -> str:
        raise NotImplementedError

    def execute(self, context: Any) -> Any:
        self.preflight_task_id = sibling_task_id(self, self.preflight_task_id)
        preflight = context["ti"].xcom_pull(task_ids=self.preflight_task_id)
        why = nothing_to_approve(preflight)
        if why:
            raise AirflowSkipException(f"{self.flow}: {self.operation}: {why}")
        if self.own_text:
            self.subject, self.body = self.title(preflight), preflight.get("markdown") or preflight.get("text")
        return super().execute(context)  # type: ignore[misc]


class ApprovedPlanCommit(FlowOperation, BaseOperator):
    """Carry out exactly the plan the approval `approval_task_id` approved (of the preflight
    `preflight_task_id`); skipped when the preflight had nothing to approve."""

    template_fields = ("flow",)
    operation = ""

    def __init__(
        self,
        *,
        flow: str,
        preflight_task_id: str,
        approval_task_id: str,
        config_path: str | None = None,
        mirrorflow_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self._flow_args(flow, config_path, mirrorflow_conn_id)
        self.preflight_task_id, self.approval_task_id = preflight_task_id, approval_task_id

    def carry_out(self, preflight: dict[str, Any], approval: dict[str, Any] | None) -> dict[str, Any]:
        from mirrorflow_airflow.gated_tasks import commit_task

        return commit_task(self.operation, self.flow, preflight, approval, self.resolved_config_path())

    def execute(self, context: Any) -> dict[str, Any]:
        ti = context["ti"]
        preflight = ti.xcom_pull(task_ids=sibling_task_id(self, self.preflight_task_id))
        why = nothing_to_approve(preflight)
        if why:
            raise AirflowSkipException(f"{self.flow}: {self.operation}: {why}")
        return self.carry_out(preflight, ti.xcom_pull(task_ids=sibling_task_id(self, self.approval_task_id)))
