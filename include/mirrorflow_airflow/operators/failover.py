"""The failover of a flow as three steps of a user's DAG, bound as the generated failover DAG binds them
(dag_builders/failover.py, whose task functions these run):

    preflight = FailoverPreflightOperator(task_id="failover_preflight", flow="A->B", mode="planned")
    approve = FailoverApprovalOperator(task_id="approve_failover", flow="A->B")
    commit = FailoverCommitOperator(task_id="failover_commit", flow="A->B")
    preflight >> approve >> commit

The preflight makes the plan (planned: after the drain); the approval is Airflow's Required Actions page
showing it (Reject or no answer fails the run, nothing committed); the commit commits exactly the approved
plan, or fails naming what moved since. A dry run, or a flow already failed over with no group left to
move, ends after the preflight: the approval and the commit are skipped.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from mirrorflow_airflow.operators.approval import FailoverApproval
from mirrorflow_airflow.operators.flow_base import FlowOperation
from mirrorflow_airflow.operators.plan_steps import ApprovedPlanCommit, PlanApprovalStep

PREFLIGHT = "failover_preflight"
APPROVAL = "approve_failover"


class FailoverPreflightOperator(FlowOperation, BaseOperator):
    """The plan of `flow`'s failover: `mode` `unplanned` (the source is lost) or `planned` (drain first),
    `groups` (a regex), `max_lag` (planned: offsets the drain may leave), `take_over` (take the flow from a
    run or deployment holding it), `dry_run`. Fails when the plan cannot be committed."""

    template_fields = ("flow", "groups")

    def __init__(
        self,
        *,
        flow: str,
        config_path: str | None = None,
        mirrorflow_conn_id: str | None = None,
        mode: str = "unplanned",
        groups: str | None = None,
        max_lag: int | None = None,
        take_over: bool = False,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        if mode not in ("unplanned", "planned"):
            raise ValueError(f"mode {mode!r}: unplanned or planned")
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self._flow_args(flow, config_path, mirrorflow_conn_id)
        self.mode, self.groups, self.max_lag, self.take_over, self.dry = mode, groups, max_lag, take_over, dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        from mirrorflow_airflow.gated_tasks import preflight_task

        params = {
            "mode": self.mode,
            "groups": self.groups,
            "max_lag": self.max_lag,
            "take_over": self.take_over,
            "dry_run": self.dry,
        }
        return {**preflight_task("failover", self.flow, params, self.resolved_config_path()), "dry_run": self.dry}


class FailoverApprovalOperator(PlanApprovalStep, FailoverApproval):
    """Approve the plan of the preflight task `preflight_task_id`; skipped when it has nothing to approve.
    `approval_timeout_minutes` (default 60) and `approvers` (Airflow user ids, comma-separated; default any
    user who may act on the DAG)."""

    operation = "failover"

    def __init__(self, *, flow: str, preflight_task_id: str = PREFLIGHT, **kwargs: Any) -> None:
        own_text = "subject" not in kwargs  # else the user's subject and body (templated) stand
        kwargs.setdefault("subject", f"{flow}: failover plan")
        kwargs.setdefault("retries", 0)
        super().__init__(preflight_task_id=preflight_task_id, **kwargs)
        self.flow, self.own_text = flow, own_text

    def title(self, preflight: dict[str, Any]) -> str:
        return f"Fail over {self.flow}: plan {preflight['plan_id']}"


class FailoverCommitOperator(ApprovedPlanCommit):
    """Commit exactly the plan the approval `approval_task_id` approved (of the preflight `preflight_task_id`):
    the groups' offsets on the target, the flow stopped, the failover recorded with its approver."""

    operation = "failover"

    def __init__(self, *, preflight_task_id: str = PREFLIGHT, approval_task_id: str = APPROVAL, **kwargs: Any) -> None:
        super().__init__(preflight_task_id=preflight_task_id, approval_task_id=approval_task_id, **kwargs)
