"""What the replicate and backfill DAGs' tasks share around the run object (replication.run.run).

* the run's lease belongs to the DAG run (`lease_owner`): its tasks, and a retry of one, share it;
* `begin`: the run's first step as Airflow sees it: a paused or stopped flow ends the task skipped
  with the run's note; another run holding the lease ends it skipped, or makes a run that waits for
  the lease (a run of `airflow backfill create`) wait; clusters that do not answer are waited for.
  Both waits happen on the triggerer (RunWaitTrigger), never in a worker slot;
* the copy of a run through spark-submit (`submit_copy`), the application of its own that the
  DAG's `copy` task starts, and freeing the lease when that task fails (`release_after_failure`).
"""

from __future__ import annotations

import time
from typing import Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import BrokerUnavailableError, ConfigError, LeaseError
from mirrorflow.replication.executors.spark import JOB_PATH, spark_env
from mirrorflow.replication.run.run import ReplicationRun, RunSkipped
from mirrorflow_airflow.common import flow_dag_id
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.operators.deferrable import wait_on_triggerer
from mirrorflow_airflow.operators.spark_submit import SPARK_CONN_ID, MirrorflowSparkSubmitOperator
from mirrorflow_airflow.run_notes import skip_task
from mirrorflow_airflow.triggers.run_wait import CLUSTERS, LEASE, RunWaitTrigger

CLUSTER_TRY_S = 5.0  # a broker's blip is ridden through in the task; a longer outage on the triggerer
TRIGGER_MARGIN_S = 300.0  # a trigger that never ran fails its task this long after its deadline


def lease_owner(flow: FlowConfig, run_id: str, kind: str = "replicate", dag_id: str | None = None) -> tuple[str, str]:
    """(owner, who) of a DAG run's lease on its flow: shared by its plan, copy and report tasks. `dag_id`:
    the DAG of that run when it is not the flow's generated one (ReplicateOperator in a user's DAG)."""
    dag_id = dag_id or flow_dag_id(kind, flow)
    return f"airflow:{dag_id}:{run_id}", f"Airflow DAG run {dag_id} / {run_id}"


def begin(
    run: ReplicationRun,
    clients: FlowClients,
    config_path: str | None,
    lease_wait_s: float | None = None,
    event: dict[str, Any] | None = None,
    waited: str | None = None,
    deadline: float | None = None,
) -> None:
    """`run.begin` in a task (see the module doc). `lease_wait_s`: how long a run that waits for
    the lease waits (None: it does not). `event`, `waited`, `deadline`: what the last wait of this
    task ended with, what it waited for and until when (DeferrableTask passes them back)."""
    if event is not None and not event["ready"]:
        give_up(run, waited, event["why"], lease_wait_s)
    try:
        run.begin(clients, cluster_wait_s=min(CLUSTER_TRY_S, clients.outage_timeout))
    except RunSkipped as exc:
        skip_task(str(exc), note=str(exc))
    except ConfigError as exc:  # an option a continuous run cannot honour
        raise AirflowFailException(f"{run.flow.name} runs continuously: {exc}") from None
    except BrokerUnavailableError as exc:
        wait_for(run, config_path, CLUSTERS, str(exc), deadline or time.time() + clients.outage_timeout)
    except LeaseError as exc:
        if lease_wait_s is None:
            raise AirflowSkipException(str(exc)) from None
        wait_for(run, config_path, LEASE, str(exc), deadline or time.time() + lease_wait_s, lease_wait_s)


def wait_for(
    run: ReplicationRun, config_path: str | None, what: str, why: str, deadline: float, lease_wait_s: float = 0.0
) -> None:
    """Wait on the triggerer for `what` until `deadline` (past it: the task fails saying `why`)."""
    left = deadline - time.time()
    if left <= 0:
        give_up(run, what, why, lease_wait_s)
    run.log(f"{why}; waiting for it on the triggerer (up to {left:.0f} s)")
    trigger = RunWaitTrigger(run.flow.name, config_path, what, run.owner, deadline)
    wait_on_triggerer(trigger, left + TRIGGER_MARGIN_S, waited=what, deadline=deadline)


def give_up(run: ReplicationRun, what: str | None, why: str, lease_wait_s: float | None) -> None:
    if what == LEASE:
        raise AirflowFailException(
            f"{why}; waited {lease_wait_s or 0:.0f} s for it: run the same `airflow backfill create` "
            "again with --reprocess-behavior failed (it copies only what is still missing)"
        )
    bound = run.flow.props.get("broker.outage.max.seconds", 300)
    raise AirflowFailException(f"flow {run.flow.name}: {why} (waited broker.outage.max.seconds, {bound} s)")


def submit_copy(cfg: Config, flow: FlowConfig, kind: str, config_path: str | None) -> MirrorflowSparkSubmitOperator:
    """The `copy` task of a run whose plan task hands it the plan: spark-submit of the copy job."""
    env = {k: v for k, v in spark_env().items() if k in ("PATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    clusters = (cfg.cluster(alias).airflow_conn_id for alias in (flow.source, flow.target))
    return MirrorflowSparkSubmitOperator(
        task_id="copy",
        application=str(JOB_PATH),  # its argument (the plan file), its conf and py-files: at execute time
        spark_conn_id=SPARK_CONN_ID,
        plan_task_id="plan",
        kafka_conn_ids=sorted({c for c in clusters if c}),
        config_path=config_path,
        env_vars=env,
        name=f"mirrorflow-{'copy' if kind == 'replicate' else kind}-{flow.id}",
        retries=0,  # a rerun is a new plan: the next run continues exactly, a backfill's ledger has the rest
        on_failure_callback=release_after_failure(config_path),
    )


def release_after_failure(config_path: str | None) -> Any:
    """on_failure_callback of the copy task: free the run's lease now rather than after its timeout."""

    def callback(context: Any) -> None:
        handed = context["ti"].xcom_pull(task_ids="plan") or {}
        if handed.get("plan"):
            ReplicationRun.from_handoff(MirrorflowHook(config_path).get_conn(), handed["plan"]).release_lease()

    return callback
