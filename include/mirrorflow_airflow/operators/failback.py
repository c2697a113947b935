"""The failback of a failed-over flow (start its reverse flow from the failover record) as three steps of a
user's DAG, bound as the generated failback DAG binds them (dag_builders/failback.py, whose task functions
these run):

    preflight = FailbackPreflightOperator(task_id="failback_preflight", flow="A->B")
    approve = FailbackApprovalOperator(task_id="approve_failback", flow="A->B")
    start = FailbackStartOperator(task_id="failback_start", flow="A->B")
    preflight >> approve >> start

A dry run, or a reverse flow already started by this failover's failback, ends after the preflight.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from mirrorflow_airflow.operators.approval import FailbackApproval
from mirrorflow_airflow.operators.flow_base import FlowOperation
from mirrorflow_airflow.operators.plan_steps import ApprovedPlanCommit, PlanApprovalStep

PREFLIGHT = "failback_preflight"
APPROVAL = "approve_failback"


def reverse_of(flow: str) -> str:
    source, _, target = flow.partition("->")
    return f"{target}->{source}"


class FailbackPreflightOperator(FlowOperation, BaseOperator):
    """The plan of `flow`'s failback: what the reverse flow copies and where it starts, the divergence and
    what the target lost. `reseed` (the source was rebuilt empty), `accept_loss` (start although the target
    lost records the plan names), `dry_run`. Fails when the plan cannot be started."""

    template_fields = ("flow",)

    def __init__(
        self,
        *,
        flow: str,
        config_path: str | None = None,
        mirrorflow_conn_id: str | None = None,
        reseed: bool = False,
        accept_loss: bool = False,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self._flow_args(flow, config_path, mirrorflow_conn_id)
        self.reseed, self.accept_loss, self.dry = reseed, accept_loss, dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        from mirrorflow_airflow.gated_tasks import preflight_task

        params = {"reseed": self.reseed, "accept_loss": self.accept_loss, "dry_run": self.dry}
        return {**preflight_task("failback", self.flow, params, self.resolved_config_path()), "dry_run": self.dry}


class FailbackApprovalOperator(PlanApprovalStep, FailbackApproval):
    """Approve the plan of the preflight task `preflight_task_id`; skipped when it has nothing to approve.
    `approval_timeout_minutes` (default 60) and `approvers` as FailoverApprovalOperator's."""

    operation = "failback"

    def __init__(self, *, flow: str, preflight_task_id: str = PREFLIGHT, **kwargs: Any) -> None:
        reverse = reverse_of(flow)
        own_text = "subject" not in kwargs  # else the user's subject and body (templated) stand
        kwargs.setdefault("subject", f"{flow}: failback plan")
        kwargs.setdefault("retries", 0)
        super().__init__(reverse=reverse, preflight_task_id=preflight_task_id, **kwargs)
        self.flow, self.own_text = flow, own_text

    def title(self, preflight: dict[str, Any]) -> str:
        return f"Start {reverse_of(self.flow)} (failback of {self.flow}): plan {preflight['plan_id']}"


class FailbackStartOperator(ApprovedPlanCommit):
    """Start exactly the approved plan: seed the reverse flow's progress and offset map, set it running,
    record the failback with its approver. The reverse flow's own operators or DAGs copy from there."""

    operation = "failback"

    def __init__(self, *, preflight_task_id: str = PREFLIGHT, approval_task_id: str = APPROVAL, **kwargs: Any) -> None:
        super().__init__(preflight_task_id=preflight_task_id, approval_task_id=approval_task_id, **kwargs)
