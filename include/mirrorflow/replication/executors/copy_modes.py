"""How a planned run is copied, one `Executor` per copy mode: spark-submit, an in-process SparkSession, a
Spark Connect server, or threads of this process (`direct`: no Spark; tests and debugging). Every one runs
the same tasks with the same copier (replication.task.task_copier.copy_planned) and returns one result per
planned unit (else a MirrorflowError naming the units without one). The replicate DAG's spark-submit is
the Spark provider's operator, given the same assembly (spark.SubmitSpec) as `Submit`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

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


class Executor(Protocol):
    """Where a planned run's tasks are copied; the caller renews the run's lease."""

    def copy(self, clients: FlowClients, plan: Plan, directory: Path, log: Callable[[str], None]) -> list[dict]:
        """One result per planned unit (else a MirrorflowError naming the units without one)."""
        ...


@dataclass(frozen=True)
class Submit:
    """spark-submit: the plan as a file in `directory`, which spark-submit ships to the driver; the driver
    hands the results back through the target (replication.executors.handoff), as to a DAG's report task."""

    master: str | None = None

    def copy(self, clients: FlowClients, plan: Plan, directory: Path, log: Callable[[str], None]) -> list[dict]:
        return copy_with_spark_submit(clients, plan, write_plan_file(plan, directory), self.master, log)


@dataclass(frozen=True)
class InProcess:
    """A SparkSession in this process."""

    master: str | None = None

    def copy(self, clients: FlowClients, plan: Plan, directory: Path, log: Callable[[str], None]) -> list[dict]:
        return check_results(plan, copy_in_process_spark(clients.cfg, plan, self.master))


@dataclass(frozen=True)
class Direct:
    """Threads of this process, no Spark (tests, debugging)."""

    def copy(self, clients: FlowClients, plan: Plan, directory: Path, log: Callable[[str], None]) -> list[dict]:
        return check_results(plan, copy_direct(clients.cfg, clients.flow, plan))


@dataclass(frozen=True)
class Connect:
    """A running Spark Connect server (`remote`, else the config's spark.remote)."""

    remote: str | None = None

    def copy(self, clients: FlowClients, plan: Plan, directory: Path, log: Callable[[str], None]) -> list[dict]:
        return check_results(plan, copy_with_connect(clients.cfg, plan, self.remote, log, keep_lease=False))


def executor(mode: str, master: str | None = None) -> Executor:
    """The executor of copy mode `mode` (`master`: spark-submit's or the session's; sc://... for connect)."""
    if mode == "submit":
        return Submit(master)
    if mode == "inprocess":
        return InProcess(master)
    if mode == "direct":
        return Direct()
    if mode == "connect":
        return Connect(master if master and master.startswith("sc://") else None)
    raise MirrorflowError(f"unknown copy mode {mode!r} ({', '.join(MODES)})")
