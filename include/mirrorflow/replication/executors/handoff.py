"""How a run's plan and results travel between the places a run happens, without a shared disk.

A run is planned in one place (the CLI, or the replicate DAG's `plan` task), copied in another
(spark-submit's driver, maybe in --deploy-mode cluster on another host; a Spark Connect server)
and reported in a third (the DAG's `report` task, on any Celery worker or Kubernetes pod):

* the plan (replication.plan.run_plan: units, flow name, config path, the lease's owner, the run's
  id -- never secrets) goes from `plan` to `copy` in XCom as `Plan.encode`'s compressed text, and to
  the Spark driver as a file that spark-submit ships itself (`--files`, see `spark.submit_command`);
* the results come back through the target cluster: the driver (or the copy task) writes them
  under the run's id (`state.run_results`), the report reads them by that id and fails, naming
  the units, when a planned unit has no result (never "ok, 0 copied").
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.plan.run_plan import Plan, Unit
from mirrorflow.replication.task.reader import OPEN_END
from mirrorflow.state import run_results

PLAN_FILE = "plan.json"
MAX_NAMED = 10  # missing units named in an error (then "and N more")


def new_run_id(label: str = "run") -> str:
    """A run's id: the label (a DAG run id, the CLI) made safe, and a random part, so a task
    retried or a DAG run cleared never reads the results of an earlier attempt."""
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', label)[:120]}-{uuid.uuid4().hex[:12]}"


def write_plan_file(plan: Plan, directory: Path) -> Path:
    """The plan as the copy job's input file (`directory` is local to whoever starts the job)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / PLAN_FILE
    path.write_text(json.dumps(plan.to_dict()))
    return path


def unit_name(u: Unit) -> str:
    end = "end" if u.end == OPEN_END else u.end  # a continuous unit has no end
    return f"{u.topic}[{u.partition}] {u.start}..{end}"


def check_results(plan: Plan, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`results` when every planned unit has one; else a MirrorflowError naming the units without."""
    have = {(r["topic"], r["partition"], r["start"]) for r in results}
    units = plan.units
    missing = [u for u in units if (u.topic, u.partition, u.start) not in have]
    if missing:
        named = ", ".join(unit_name(u) for u in missing[:MAX_NAMED])
        more = f" and {len(missing) - MAX_NAMED} more" if len(missing) > MAX_NAMED else ""
        raise MirrorflowError(
            f"flow {plan.flow}: run {plan.run} has no result for {len(missing)} of its "
            f"{len(units)} planned unit(s): {named}{more} (the copy job ended without "
            "handing them back; their progress on the target says what was copied)"
        )
    return results


def publish_results(clients: FlowClients, plan: Plan, results: list[dict[str, Any]], **extra: Any) -> None:
    """Write the copy's unit results under the plan's run id for the report (state.run_results)."""
    run_results.write(clients, run_id_of(plan), results, **extra)


def collect_results(clients: FlowClients, plan: Plan) -> list[dict[str, Any]]:
    """The unit results of the plan's run, read from the target and checked against the plan."""
    if not plan.tasks:
        return []
    found = run_results.read(clients, run_id_of(plan))
    return check_results(plan, found["results"] if found else [])


def run_id_of(plan: Plan) -> str:
    if not plan.run:
        raise MirrorflowError(f"the plan of flow {plan.flow} has no run id (planned by an older mirrorflow?)")
    return plan.run
