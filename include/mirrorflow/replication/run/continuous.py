"""Continuous replication: one run that holds the flow's lease and keeps copying until a deadline.

A continuous run is a normal run whose units have no end (`reader.OPEN_END`): it plans every
partition the flow replicates (not only those with new records), and each copy task keeps one
transactional producer (one init_transactions) and one consumer per partition and loops: read what
the source has (short polls), commit it as one transaction (records + offset-map entry + progress,
exactly as a one-shot run: same copier, same writer), repeat. Between polls it checks whether to stop
(`follow.StopWatch`): the deadline (`continuous.run.seconds` after the copy started), the flow paused
or stopped (read every `continuous.state.check.seconds`), SIGTERM of the driver. Stopping commits
what the current batch read; no transaction is left open.

Partitions and topics created while a run copies are picked up by the next run (each run plans
again). A run's options (the CLI's flags, the DAG's Params: runner.RunOptions) apply as to a
one-shot run: `topics` narrows the partitions followed, a dry run plans, reports what a one-shot
run would copy now and copies nothing; a per-partition cap is refused (a followed partition has no
end to cap: a one-shot run takes it).

Airflow's `@continuous` schedule (flow property `schedule: "@continuous"`) starts the next run as
soon as one ends; the lease, released at the end of one run and taken by the next, keeps
them from overlapping, so the gap in copying is the hand-over (report, plan, job start).
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import ConfigError
from mirrorflow.replication.plan.planner import gather_inputs, group_by_slot, new_plan, plan_units
from mirrorflow.replication.plan.run_options import RunOptions
from mirrorflow.replication.plan.run_plan import FollowSpec, Plan, Unit
from mirrorflow.replication.task.follow import STOP_REQUESTED
from mirrorflow.replication.task.reader import OPEN_END

CONTINUOUS_SCHEDULE = "@continuous"
STOP_FILE = "stop"


def is_continuous(flow: FlowConfig) -> bool:
    """The flow's replicate DAG runs continuously (`schedule: "@continuous"`)."""
    return str(flow.props.get("schedule", "")).strip() == CONTINUOUS_SCHEDULE


def run_seconds(flow: FlowConfig, seconds: float | None = None) -> float:
    return float(seconds if seconds is not None else flow.props["continuous.run.seconds"])


def follow_spec(flow: FlowConfig, seconds: float | None, stop_file: Path | None) -> FollowSpec:
    return FollowSpec(
        seconds=run_seconds(flow, seconds),
        batch_ms=int(flow.props["continuous.poll.ms"]),
        check_s=float(flow.props["continuous.state.check.seconds"]),
        stop_file=str(stop_file) if stop_file is not None else None,
    )


def check_options(options: RunOptions | None, limit_name: str = "max_records_per_partition") -> None:
    """Refuse what a continuous run cannot honour, before anything runs (ConfigError naming
    `limit_name`, the option as the caller spells it): a per-partition cap."""
    if options is not None and options.partition_limit is not None:
        raise ConfigError(
            [
                (
                    limit_name,
                    "caps a one-shot run; a continuous run follows every partition until its deadline, "
                    "with no end to cap (run once instead: `mirrorflow replicate --once`, or a flow schedule "
                    "other than @continuous)",
                )
            ]
        )


def continuous_plan(clients: FlowClients, topics: str | None = None) -> Plan:
    """Every partition the flow can copy now (of the source topics `topics` fully matches, when
    given), as one unit without an end, spread round-robin over at most tasks.max tasks; the
    summary (lag, waiting, stopped) is a one-shot plan's."""
    flow = clients.flow
    subset = re.compile(topics) if topics else None
    gathered = gather_inputs(clients)
    inputs = {
        (pi.topic, pi.partition): pi for pi in gathered.partitions if subset is None or subset.fullmatch(pi.topic)
    }
    _, summary = plan_units(
        inputs.values(), flow.props["unit.max.records"], flow.parallelism, flow.name, slot_of=gathered.slot_of
    )
    units = []
    for s in summary:
        if s.get("waiting") or s.get("stopped"):
            continue
        pi = inputs[(s["topic"], s["partition"])]
        start = s["start"]
        units.append(
            Unit(
                pi.topic, pi.partition, pi.target_topic, start, OPEN_END, pi.log_start, pi.topic_id, pi.target_topic_id
            )
        )
    tasks = group_by_slot([[u] for u in units], gathered.slot_of)
    return new_plan(clients, gathered, tasks, summary)


@contextlib.contextmanager
def stop_on_signals(stop_file: Path) -> Iterator[None]:
    """SIGTERM/SIGINT stop the run cleanly: this process's copy threads see STOP_REQUESTED, Spark
    tasks (other processes) the stop file. Only the main thread can install handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        STOP_REQUESTED.set()
        with contextlib.suppress(OSError):
            stop_file.touch()

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
