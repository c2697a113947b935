"""How a run's plan and results travel between the places a run happens, without a shared disk.

A run is planned in one place (the CLI, or the replicate DAG's `plan` task), copied in another
(spark-submit's driver, maybe in --deploy-mode cluster on another host; a Spark Connect server)
and reported in a third (the DAG's `report` task, on any Celery worker or Kubernetes pod):

* the plan (units, flow name, config path, the lease's owner, the run's id -- never secrets) goes
  from `plan` to `copy` in XCom as `encode_plan`'s compressed text, and to the Spark driver as a
  file that spark-submit ships itself (`--files`, see `spark.submit_command`);
* the results come back through the target cluster: the driver (or the copy task) writes them
  under the run's id (`state.run_results`), the report reads them by that id and fails, naming
  the units, when a planned unit has no result (never "ok, 0 copied").
"""

from __future__ import annotations

import base64
import json
import re
import uuid
import zlib
from pathlib import Path
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.task.reader import OPEN_END
from mirrorflow.state import run_results

PLAN_PREFIX = "mfplan1:"  # zlib + base64 of the plan's JSON
PLAN_FILE = "plan.json"
MAX_NAMED = 10  # missing units named in an error (then "and N more")


def new_run_id(label: str = "run") -> str:
    """A run's id: the label (a DAG run id, the CLI) made safe, and a random part, so a task
    retried or a DAG run cleared never reads the results of an earlier attempt."""
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', label)[:120]}-{uuid.uuid4().hex[:12]}"


def encode_plan(plan: dict[str, Any]) -> str:
    """The plan as XCom carries it: one short string (2,000 units: ~60 KB instead of ~770 KB of JSON)."""
    raw = json.dumps(plan, separators=(",", ":")).encode()
    return PLAN_PREFIX + base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def decode_plan(text: str) -> dict[str, Any]:
    if not isinstance(text, str) or not text.startswith(PLAN_PREFIX):
        raise MirrorflowError(f"not a mirrorflow plan (expected text starting {PLAN_PREFIX!r}): {str(text)[:60]!r}")
    try:
        plan: dict[str, Any] = json.loads(zlib.decompress(base64.b64decode(text[len(PLAN_PREFIX) :])))
    except (ValueError, zlib.error) as exc:
        raise MirrorflowError(f"the plan handed over is damaged: {exc}") from None
    return plan


def write_plan_file(plan: dict[str, Any], directory: Path) -> Path:
    """The plan as the copy job's input file (`directory` is local to whoever starts the job)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / PLAN_FILE
    path.write_text(json.dumps(plan))
    return path


def planned_units(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [u for t in plan.get("tasks", []) for u in t]


def unit_name(u: dict[str, Any]) -> str:
    end = "end" if u["end"] == OPEN_END else u["end"]  # a continuous unit has no end
    return f"{u['topic']}[{u['partition']}] {u['start']}..{end}"


def check_results(plan: dict[str, Any], results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`results` when every planned unit has one; else a MirrorflowError naming the units without."""
    have = {(r["topic"], r["partition"], r["start"]) for r in results}
    missing = [u for u in planned_units(plan) if (u["topic"], u["partition"], u["start"]) not in have]
    if missing:
        named = ", ".join(unit_name(u) for u in missing[:MAX_NAMED])
        more = f" and {len(missing) - MAX_NAMED} more" if len(missing) > MAX_NAMED else ""
        raise MirrorflowError(
            f"flow {plan.get('flow')}: run {plan.get('run')} has no result for {len(missing)} of its "
            f"{len(planned_units(plan))} planned unit(s): {named}{more} (the copy job ended without "
            "handing them back; their progress on the target says what was copied)"
        )
    return results


def publish_results(clients: FlowClients, plan: dict[str, Any], results: list[dict[str, Any]], **extra: Any) -> None:
    """Write the copy's unit results under the plan's run id for the report (state.run_results)."""
    run_results.write(clients, run_id_of(plan), results, **extra)


def collect_results(clients: FlowClients, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The unit results of the plan's run, read from the target and checked against the plan."""
    if not planned_units(plan):
        return []
    found = run_results.read(clients, run_id_of(plan))
    return check_results(plan, found["results"] if found else [])


def run_id_of(plan: dict[str, Any]) -> str:
    run = plan.get("run")
    if not run:
        raise MirrorflowError(f"the plan of flow {plan.get('flow')} has no run id (planned by an older mirrorflow?)")
    return str(run)
