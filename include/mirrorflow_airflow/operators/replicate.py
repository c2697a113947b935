"""ReplicateOperator: one replication run of a flow in a task of the user's own DAG ("replicate, then run
my job"): begin (the flow's lease; a paused or stopped flow ends the task skipped; clusters that do not
answer and a lease another run holds are waited for on the triggerer), plan, copy, report, release -- the
function the generated replicate DAG's one task runs (dag_builders/replicate.carry_out_whole), with its
metrics, Asset events, lineage and RPO check."""

from __future__ import annotations

from typing import Any

from airflow.sdk import AssetAlias

from mirrorflow.state.names import dag_id
from mirrorflow_airflow.operators.deferrable import DeferrableTask
from mirrorflow_airflow.operators.flow_base import FlowOperation

COPY_MODES = ("connect", "submit", "inprocess", "direct")


def copied_alias(flow: str) -> str:
    """The AssetAlias a run of `flow` emits its target topics' Asset events through (the replicate DAG's)."""
    return dag_id("replicate", flow.replace("->", "-"))


def _replicate(context: Any, op: ReplicateOperator, **waited: Any) -> dict[str, Any]:
    from mirrorflow_airflow.dag_builders.replicate import carry_out_whole, new_run
    from mirrorflow_airflow.hooks import MirrorflowHook

    path = op.resolved_config_path()
    mode = op.copy_mode or ("connect" if MirrorflowHook(path).get_conn().spark.remote else "submit")
    params = {"topics": op.topics, "max_records_per_partition": op.max_records_per_partition, "dry_run": op.dry}
    run = new_run(op.flow, context.get("run_id") or "manual", path, params, None, f"{op.dag_id}.{op.task_id}")
    return carry_out_whole(run, path, context.get("outlet_events"), mode, op.master, **waited)


class ReplicateOperator(FlowOperation, DeferrableTask):
    """Copy what is new on `flow`'s source, exactly once; returns the run's summary (records, bytes, lag,
    duration, the target topics written) and fails when a unit failed or a partition stopped.

    `copy_mode`: `connect` (the config's `spark.remote` Spark Connect server), `submit` (spark-submit from this
    task, `master` or the config's `spark.master`), `inprocess` (a SparkSession in the worker) or `direct`
    (threads of the worker, no Spark); default: `connect` when the config names a server, else `submit`.
    `topics` (a regex over source topics), `max_records_per_partition` and `dry_run` narrow the run as the
    replicate DAG's trigger form does."""

    template_fields = ("flow", "topics")

    def __init__(
        self,
        *,
        flow: str,
        config_path: str | None = None,
        mirrorflow_conn_id: str | None = None,
        copy_mode: str | None = None,
        master: str | None = None,
        topics: str | None = None,
        max_records_per_partition: int | None = None,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        if copy_mode is not None and copy_mode not in COPY_MODES:
            raise ValueError(f"copy_mode {copy_mode!r}: one of {', '.join(COPY_MODES)}")
        kwargs.setdefault("outlets", [AssetAlias(copied_alias(flow))])
        kwargs.setdefault("retries", 0)  # a rerun is a new run: it continues exactly where this one stopped
        super().__init__(python_callable=_replicate, **kwargs)
        self._flow_args(flow, config_path, mirrorflow_conn_id)
        self.copy_mode, self.master = copy_mode, master
        self.topics, self.max_records_per_partition, self.dry = topics, max_records_per_partition, dry_run

    def execute(self, context: Any) -> Any:
        return _replicate(context, self)

    def resume(self, context: Any, **passed: Any) -> Any:
        return _replicate(context, self, **passed)
