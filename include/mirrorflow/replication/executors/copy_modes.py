"""How a planned run is copied: spark-submit, an in-process SparkSession, a Spark Connect server, or
threads of this process (`direct`: no Spark; tests and debugging). Every mode runs the same tasks
with the same copier (replication.task.task_copier.copy_planned) and returns one result per planned unit
(else a MirrorflowError naming the units without one).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.executors.handoff import check_results, write_plan_file
from mirrorflow.replication.executors.spark import copy_in_process_spark, copy_with_spark_submit
from mirrorflow.replication.executors.spark_connect import copy_with_connect
from mirrorflow.replication.plan.run_plan import Plan, Unit
from mirrorflow.replication.task.faults import from_env as faults_from_env
from mirrorflow.replication.task.task_attempt import TaskAttempt
from mirrorflow.replication.task.task_copier import copy_planned

MODES = ("submit", "inprocess", "connect", "direct")


def copy_direct(cfg: Config, flow: FlowConfig, plan: Plan) -> list[dict]:
    """The plan's tasks in threads of this process (no Spark); each task has its own clients."""
    how = TaskAttempt(faults=faults_from_env())  # test crash points: read once here, never on the copy path
    head = plan.head()

    def task(indexed: tuple[int, list[Unit]]) -> list[dict[str, Any]]:
        with FlowClients(cfg, flow) as clients:
            return copy_planned(clients, head, indexed[0], indexed[1], how)

    tasks = plan.tasks
    with ThreadPoolExecutor(max_workers=max(1, len(tasks))) as pool:
        return [r for results in pool.map(task, enumerate(tasks)) for r in results]


def copy_plan(
    clients: FlowClients,
    mode: str,
    master: str | None,
    plan: Plan,
    directory: Path,
    log: Callable[[str], None],
) -> list[dict]:
    """Copy a planned run's tasks in `mode`. spark-submit gets the plan as a file in `directory`,
    which it ships to the driver; the driver hands the results back through the target
    (replication.executors.handoff), as to a DAG's report task. The caller renews the run's lease."""
    cfg, flow = clients.cfg, clients.flow
    if mode == "submit":
        return copy_with_spark_submit(clients, plan, write_plan_file(plan, directory), master, log)
    if mode == "inprocess":
        return check_results(plan, copy_in_process_spark(cfg, plan, master))
    if mode == "direct":
        return check_results(plan, copy_direct(cfg, flow, plan))
    if mode == "connect":  # a running Spark Connect server (spark.remote, or master sc://...)
        remote = master if master and master.startswith("sc://") else None
        return check_results(plan, copy_with_connect(cfg, plan, remote, log, keep_lease=False))
    raise MirrorflowError(f"unknown copy mode {mode!r} ({', '.join(MODES)})")
