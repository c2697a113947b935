"""One replication run: plan -> copy -> report. Used by `mirrorflow replicate` and the replicate DAG.

The copy runs in Spark (see `spark`: spark-submit by default, or an in-process SparkSession with
`mode="inprocess"`); `mode="direct"` runs the units in threads of this process without Spark
(tests and debugging; the same copier code). The plan holds the flow name, the config path, the
units and the run's id -- never secrets. How plan and results travel (a plan file shipped with
spark-submit, results through the target cluster) is `replication.handoff`'s; the run directory
only holds this process's copy of them (and the report), kept when asked for or when the run failed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.task_copier import copy_planned
from mirrorflow.replication.faults import from_env as faults_from_env
from mirrorflow.replication.handoff import check_results, new_run_id, write_plan_file
from mirrorflow.replication.planner import Plan, Unit, make_plan, source_offsets, wait_for_clusters
from mirrorflow.replication.run_report import RunReport, build_report
from mirrorflow.replication.spark import copy_in_process_spark, copy_with_spark_submit
from mirrorflow.replication.spark_connect import copy_with_connect, preload
from mirrorflow.state import run_log
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.lease import FlowLease, local_owner
from mirrorflow.state.state_topics import ensure_state_topics


def copy_direct(cfg: Config, flow: FlowConfig, plan: dict[str, Any]) -> list[dict]:
    """The same tasks, in threads of this process (no Spark); each task has its own clients."""
    faults = faults_from_env()  # test crash points: read once here, never on the copy path

    def task(indexed: tuple[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        with FlowClients(cfg, flow) as clients:
            return copy_planned(clients, plan, indexed[0], indexed[1], faults)

    tasks = plan["tasks"]
    with ThreadPoolExecutor(max_workers=max(1, len(tasks))) as pool:
        return [r for results in pool.map(task, enumerate(tasks)) for r in results]


def run_dir(flow: FlowConfig, run_id: str | None = None) -> Path:
    """The directory of one run's plan and results: under $MIRRORFLOW_RUN_DIR, else under a base
    private to this user (<tmp>/mirrorflow-runs-<uid>, mode 0700): in a shared base another local
    user could plant a plan or a config for the copy job to read."""
    explicit = os.environ.get("MIRRORFLOW_RUN_DIR")
    base = Path(explicit) if explicit else Path(tempfile.gettempdir()) / f"mirrorflow-runs-{os.getuid()}"
    if not explicit:
        base.mkdir(mode=0o700, exist_ok=True)
        st = base.lstat()
        if base.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise MirrorflowError(
                f"the run directory {base} is not private to this user (owner uid {st.st_uid}, mode "
                f"{oct(st.st_mode & 0o777)}): remove it, or set MIRRORFLOW_RUN_DIR"
            )
    d = base / flow.id / (run_id or time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}")
    d.mkdir(parents=True, exist_ok=True)
    return d


def take_lease(clients: FlowClients, owner: str, who: str) -> FlowLease:
    """Ensure the state topics and take the flow's lease (LeaseError: another run holds it)."""
    ensure_state_topics(clients)
    return FlowLease(clients, owner, who).acquire()


def prepare_plan(
    clients: FlowClients,
    lease: FlowLease | None = None,
    options: RunOptions | None = None,
    run_id: str | None = None,
) -> tuple[Plan, dict[str, Any]]:
    """Ensure the state topics and plan; returns the plan and what is handed to the copy (its dict
    with the run's id). The plan carries the lease's owner (never secrets), so the copy job keeps it
    renewed. A dry run's plan holds no tasks (its summary still says what would be copied)."""
    ensure_state_topics(clients)
    opts = options or RunOptions()
    plan = make_plan(clients, opts.topics, opts.partition_limit)
    if opts.dry_run:
        plan.narrowed([])
    if lease is not None:
        plan.lease = {"owner": lease.owner, "who": lease.who}
    return plan, {**plan.to_dict(), "run": run_id or new_run_id("cli")}


@dataclass(frozen=True)
class RunOptions:
    """What one run may be narrowed to (CLI flags, the replicate DAG's Params)."""

    topics: str | None = None  # only the flow's source topics this regex fully matches
    partition_limit: int | None = None  # at most this many offsets per partition in this run
    dry_run: bool = False  # plan and report what would be copied; copy nothing
    on_plan: Callable[[Plan], None] | None = None  # told the plan before the copy (the CLI's progress bar)


def report_run(
    clients: FlowClients, plan: dict[str, Any], results: list[dict], started: float, spark_s: float = 0.0
) -> RunReport:
    """The run's report: the plan's partitions, the units' results and the source ends now. Its
    summary goes to the flow's run log (state.run_log) for the status page and metrics."""
    flow = clients.flow
    keys = [(p["topic"], p["partition"]) for p in plan.get("partitions", [])]
    try:
        ends = source_offsets(clients, keys, OffsetSpec.latest()) if keys else {}
    except MirrorflowError:
        ends = {}
    rep = build_report(
        flow.name, bool(flow.exactly_once), plan.get("partitions", []), results, ends, time.time() - started, spark_s
    )
    run_log.append(clients, rep.run_record(int(time.time() * 1000)))
    return rep


def run_once(
    cfg: Config,
    flow: FlowConfig,
    mode: str = "submit",
    master: str | None = None,
    log: Callable[[str], None] = lambda s: None,
    directory: Path | None = None,
    options: RunOptions | None = None,
) -> RunReport:
    """Plan, copy, report. mode: submit (spark-submit) | inprocess (SparkSession here) | direct (no Spark).
    `options` narrow the run (topics subset, offsets per partition) or make it a dry run."""
    started = time.time()
    if mode == "connect":
        preload()  # the Connect client's imports overlap the lease and the plan
    directory, keep = run_directory(flow, directory)
    with FlowClients(cfg, flow) as clients:
        wait_for_clusters(clients)  # a broker restarting as the run starts is waited for, not failed
        skip = flow_state(clients).skip_reason(flow.name, "copy")
        if skip:
            return RunReport(flow.name, bool(flow.exactly_once), skipped=skip)
        lease = take_lease(clients, *local_owner(f"mirrorflow replicate --mode {mode}"))
        lease.start_renewing()
        try:
            return _run(clients, mode, master, log, directory, keep, started, lease, options)
        finally:
            lease.release()


def _run(
    clients: FlowClients,
    mode: str,
    master: str | None,
    log: Callable[[str], None],
    directory: Path,
    keep: bool,
    started: float,
    lease: FlowLease,
    options: RunOptions | None = None,
) -> RunReport:
    flow = clients.flow
    plan, pd = prepare_plan(clients, lease, options)
    if options is not None and options.dry_run:
        would = sum(p["planned"] for p in plan.partitions)
        log(f"dry run: would copy {would:,} offsets of {flow.name}; copying nothing")
    log(
        f"planned {len(plan.units)} units in {len(plan.tasks)} tasks "
        f"({sum(u.records for u in plan.units):,} offsets) for flow {flow.name}"
    )
    if options is not None and options.on_plan is not None:
        options.on_plan(plan)
    t0 = time.time()
    results = copy_plan(clients, mode, master, pd, directory, log) if plan.units else []
    spark_s = time.time() - t0 if plan.units else 0.0
    return finish_run(clients, directory, keep, pd, results, started, spark_s)


def run_directory(flow: FlowConfig, directory: Path | None) -> tuple[Path, bool]:
    """The run's directory, and whether its files are kept: when asked for (a directory,
    $MIRRORFLOW_RUN_DIR), else only when the run failed (see finish_run)."""
    keep = directory is not None or bool(os.environ.get("MIRRORFLOW_RUN_DIR"))
    directory = directory or run_dir(flow)
    directory.mkdir(parents=True, exist_ok=True)
    return directory, keep


def finish_run(
    clients: FlowClients,
    directory: Path,
    keep: bool,
    plan: dict[str, Any],
    results: list[dict],
    started: float,
    spark_s: float,
) -> RunReport:
    """Write the run's plan, results and report files (this process's copy, for inspection), report,
    and remove the files of a run that went well (unless kept): the end of one-shot and continuous
    runs alike."""
    write_plan_file(plan, directory)
    (directory / "results.json").write_text(json.dumps({"flow": clients.flow.name, "results": results}))
    rep = report_run(clients, plan, results, started, spark_s)
    (directory / "report.json").write_text(json.dumps(rep.to_dict()))
    if rep.ok and not keep:
        cleanup(directory)
    return rep


def copy_plan(
    clients: FlowClients,
    mode: str,
    master: str | None,
    plan: dict[str, Any],
    directory: Path,
    log: Callable[[str], None],
) -> list[dict]:
    """Copy a planned run's units in `mode`; the units' results (one-shot and continuous runs), one
    per planned unit (else a MirrorflowError naming the units without one). spark-submit gets the
    plan as a file in `directory`, which it ships to the driver; the driver hands the results back
    through the target (replication.handoff), as to a DAG's report task."""
    cfg, flow = clients.cfg, clients.flow
    if mode == "submit":
        return copy_with_spark_submit(clients, plan, write_plan_file(plan, directory), master, log)
    if mode == "inprocess":
        return check_results(plan, copy_in_process_spark(cfg, plan, master))
    if mode == "direct":
        return check_results(plan, copy_direct(cfg, flow, plan))
    if mode == "connect":  # a running Spark Connect server (spark.remote, or master sc://...)
        remote = master if master and master.startswith("sc://") else None
        # the caller renews the lease
        return check_results(plan, copy_with_connect(cfg, plan, remote, log, keep_lease=False))
    raise MirrorflowError(f"unknown copy mode {mode!r} (submit, inprocess, connect or direct)")


def cleanup(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
