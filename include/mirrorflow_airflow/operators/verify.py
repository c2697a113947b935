"""VerifyOperator: compare a flow's source and target record by record over the copied ranges, through
the exact offset map -- the generated verify DAG's task function (dag_builders/verify.verify_task)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from mirrorflow_airflow.operators.flow_base import FlowOperation


class VerifyOperator(FlowOperation, BaseOperator):
    """Verify `flow` over [`start`, `end`) (`earliest`, `latest`, `start`, `offset:N` or an ISO-8601 time with
    a zone) of the source topics matching `topics`; `since_last`: from where the last verify that passed got
    to; `record`: record how far this one gets (for a later `since_last` or a planned failover). Fails on a
    mismatch naming the first one; the report is in the log and in the XCom `report` either way."""

    template_fields = ("flow", "topics", "start", "end")

    def __init__(
        self,
        *,
        flow: str,
        config_path: str | None = None,
        mirrorflow_conn_id: str | None = None,
        topics: str | None = None,
        start: str = "earliest",
        end: str = "latest",
        since_last: bool = False,
        record: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("retries", 0)  # a mismatch is an answer, not a failure to retry
        super().__init__(**kwargs)
        self._flow_args(flow, config_path, mirrorflow_conn_id)
        self.topics, self.start, self.end, self.since_last, self.record = topics, start, end, since_last, record

    def execute(self, context: Any) -> dict[str, Any]:
        from mirrorflow_airflow.dag_builders.control import triggering_user
        from mirrorflow_airflow.dag_builders.verify import verify_task

        return verify_task(
            self.flow,
            {
                "topics": self.topics,
                "from": self.start,
                "to": self.end,
                "since_last": self.since_last,
                "record": self.record,
            },
            self.resolved_config_path(),
            context["ti"],
            by=triggering_user(context.get("dag_run")),
        )
