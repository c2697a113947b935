"""The approval step of the disaster-recovery DAGs (failover, failback): Airflow's ApprovalOperator
showing a plan the preflight made, whose response timeout and assignees come from the run's Params,
and whose Reject or timeout fails the run naming who rejected (or that nobody answered): an operation
that did not happen must not look like a green run in the DAG list. Returns the plan id and the
approver's Airflow user name for the commit, which executes exactly that plan."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLOperator
from airflow.sdk.exceptions import AirflowFailException

log = logging.getLogger(__name__)

APPROVAL_TIMEOUT_MINUTES = 60


class PlanApproval(ApprovalOperator):
    """Approve the plan of the `preflight` task's XCom (`plan_id`). `what`: the operation ("failover");
    `unchanged`: what stays as it was when the plan is not approved ("nothing committed, the flow is
    unchanged"). `preflight_task_id`: the task whose XCom holds the plan. The response timeout and who may
    answer: the run's Params `approval_timeout_minutes` and `approvers` (the generated DAGs' form), else
    `approval_timeout_minutes` and `approvers` given here (a user's own DAG), else 60 min and anyone."""

    def __init__(
        self,
        *,
        what: str,
        unchanged: str,
        preflight_task_id: str = "preflight",
        approval_timeout_minutes: float | None = None,
        approvers: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.what = what
        self.unchanged = unchanged
        self.preflight_task_id = preflight_task_id
        self.approval_timeout_minutes = approval_timeout_minutes
        self.approvers = approvers

    def _minutes(self, context: Any) -> float:
        given = context["params"].get("approval_timeout_minutes") or self.approval_timeout_minutes
        return float(given or APPROVAL_TIMEOUT_MINUTES)

    def execute(self, context: Any) -> Any:
        self.response_timeout = timedelta(minutes=self._minutes(context))
        approvers = context["params"].get("approvers") or self.approvers or ""
        users = [u.strip() for u in str(approvers).split(",") if u.strip()]
        self.assigned_users = [{"id": u, "name": u} for u in users] or None
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        plan_id = context["ti"].xcom_pull(task_ids=self.preflight_task_id)["plan_id"]
        if event.get("error_type") == "timeout":
            raise AirflowFailException(
                f"{self.what} plan {plan_id}: no answer within {self._minutes(context):g} min: {self.unchanged} "
                "(trigger the DAG again for a new preflight)"
            )
        # HITLOperator's, not ApprovalOperator's: that one would mark the commit skipped on a Reject, and a
        # run whose leaf is skipped ends "success" although this task failed
        ret = HITLOperator.execute_complete(self, context, event)  # validates the answer
        user = (ret.get("responded_by_user") or {}).get("name") or "?"
        if ret["chosen_options"] != [self.APPROVE]:
            raise AirflowFailException(f"{self.what} plan {plan_id} rejected by {user}: {self.unchanged}")
        log.info("%s plan %s approved by %s", self.what, plan_id, user)
        return {"plan_id": plan_id, "approved_by": user}


class FailoverApproval(PlanApproval):
    """The failover's approval (its DAG: dag_builders/failover.py)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(what="failover", unchanged="nothing committed, the flow is unchanged", **kwargs)


class FailbackApproval(PlanApproval):
    """The failback's approval (its DAG: dag_builders/failback.py)."""

    def __init__(self, *, reverse: str, **kwargs: Any) -> None:
        super().__init__(what="failback", unchanged=f"nothing started, {reverse} is unchanged", **kwargs)


def approval_params() -> dict[str, Any]:
    """The Params of the approval step: its response timeout and who may answer."""
    from airflow.sdk import Param

    from mirrorflow_airflow.params import optional_text

    return {
        "approval_timeout_minutes": Param(
            APPROVAL_TIMEOUT_MINUTES,
            type="integer",
            minimum=1,
            title="Approval timeout (minutes)",
            description="No answer in Required Actions within this time fails the run, nothing changed",
        ),
        "approvers": optional_text(
            "Approvers", "Airflow user ids allowed to approve, comma-separated; empty: any user with access"
        ),
    }
