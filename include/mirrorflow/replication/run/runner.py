"""`mirrorflow replicate` in this process: a one-shot or a continuous run (replication.run.run does the
steps). The copy runs in Spark (spark-submit by default, `mode="inprocess"`: a SparkSession here,
`connect`: a running Spark Connect server) or in threads (`direct`); see replication.executors.copy_modes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mirrorflow.config import Config, FlowConfig
from mirrorflow.replication.executors.copy_modes import copy_direct
from mirrorflow.replication.plan.run_options import RunOptions
from mirrorflow.replication.run.continuous import STOP_FILE, check_options, stop_on_signals
from mirrorflow.replication.run.run import ReplicationRun
from mirrorflow.replication.run.run_kinds import Continuous
from mirrorflow.replication.run.run_report import RunReport
from mirrorflow.replication.run.scratch import Scratch, run_dir
from mirrorflow.replication.task.follow import STOP_REQUESTED
from mirrorflow.state.run_lease import take_lease

__all__ = ["RunOptions", "copy_direct", "run_continuous", "run_dir", "run_once", "take_lease"]


def run_once(
    cfg: Config,
    flow: FlowConfig,
    mode: str = "submit",
    master: str | None = None,
    log: Callable[[str], None] = lambda s: None,
    directory: Path | None = None,
    options: RunOptions | None = None,
) -> RunReport:
    """Plan, copy, report. mode: submit | inprocess | connect | direct. `options` narrow the run
    (topics subset, offsets per partition) or make it a dry run."""
    run = ReplicationRun.local(
        cfg, flow, f"mirrorflow replicate --mode {mode}", options=options or RunOptions(), log=log
    )
    return run.run(mode, master, directory)


def run_continuous(
    cfg: Config,
    flow: FlowConfig,
    mode: str = "submit",
    master: str | None = None,
    log: Callable[[str], None] = lambda s: None,
    seconds: float | None = None,
    directory: Path | None = None,
    options: RunOptions | None = None,
) -> RunReport:
    """One continuous run (replication.run.continuous): take the lease, plan every partition (of
    `options.topics`), copy until the deadline (or a pause, a stop, SIGTERM), report, release the
    lease. A dry run plans and reports what would be copied, copies nothing and ends. A stop
    requested before the run started (SIGTERM) still ends it at once."""
    check_options(options)
    scratch = Scratch.of(flow, directory)
    stop_file = scratch.path / STOP_FILE
    run = ReplicationRun.local(
        cfg,
        flow,
        f"mirrorflow replicate --continuous --mode {mode}",
        kind=Continuous(seconds, stop_file),
        options=options or RunOptions(),
        log=log,
        label="cli-continuous",
    )
    try:
        with stop_on_signals(stop_file):
            return run.run(mode, master, scratch=scratch)
    finally:
        STOP_REQUESTED.clear()
