"""One replication run: plan -> copy -> report. Used by `mirrorflow replicate` and the replicate DAG.

The copy runs in Spark: `spark-submit spark_jobs/copy_units.py PLAN RESULTS` (the default; the
master comes from the config, `local[*]` unless set), or the same job function in an in-process
SparkSession (`mode="inprocess"`). `mode="direct"` runs the units in threads of this process
without Spark (tests and debugging; the same copier code).

The plan file holds the flow name, the config path and the units only -- never secrets: the
executors load the config themselves and resolve `${env:...}` from their own environment.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

from .config import ROOT, Config, FlowConfig
from .errors import MirrorflowError
from .planner import Plan, Unit, make_plan
from .report import RunReport, build_report

JOB_PATH = ROOT / "spark_jobs" / "copy_units.py"
VENV_BIN = Path(sys.executable).parent


# -- the Spark side (runs in the driver of the copy job) -----------------------------------------
def _unit_task(config_path: str | None, flow_name: str) -> Callable[[Any], list[dict]]:
    def task(rows: Any) -> list[dict]:  # runs inside a Spark task: clients are built here
        from mirrorflow import config as config_mod
        from mirrorflow.copier import copy_unit
        from mirrorflow.planner import Unit as U

        cfg = config_mod.load(config_path)
        flow = cfg.flow(flow_name)
        return [copy_unit(cfg, flow, U.from_dict(d)).to_dict() for _, d in rows]
    return task


def run_plan_spark(spark: Any, plan: dict[str, Any]) -> list[dict]:
    """Run the plan's waves one after another, one Spark task per unit."""
    sc = spark.sparkContext
    results: list[dict] = []
    for i, wave in enumerate(plan["waves"]):
        sc.setJobDescription(f"mirrorflow {plan['flow']} wave {i + 1}/{len(plan['waves'])}: {len(wave)} units")
        rdd = sc.parallelize(list(enumerate(wave)), max(1, len(wave)))
        results += rdd.mapPartitions(_unit_task(plan.get("config"), plan["flow"])).collect()
    return results


def run_plan_file(spark: Any, plan_path: str, results_path: str) -> list[dict]:
    """Entry used by spark_jobs/copy_units.py: read the plan file, run it, write the results file."""
    t0 = time.time()
    plan = json.loads(Path(plan_path).read_text())
    results = run_plan_spark(spark, plan)
    out = {"flow": plan["flow"], "results": results, "job_started": t0, "job_finished": time.time()}
    tmp = Path(results_path).with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(results_path)
    return results


def run_plan_direct(cfg: Config, flow: FlowConfig, plan: dict[str, Any]) -> list[dict]:
    """The same units, in threads of this process (no Spark)."""
    from concurrent.futures import ThreadPoolExecutor

    from .copier import copy_unit

    results: list[dict] = []
    for wave in plan["waves"]:
        with ThreadPoolExecutor(max_workers=max(1, len(wave))) as pool:
            results += [f.result().to_dict() for f in
                        [pool.submit(copy_unit, cfg, flow, Unit.from_dict(d)) for d in wave]]
    return results


# -- spark-submit -------------------------------------------------------------------------------
def is_local_master(master: str) -> bool:
    return master.startswith("local")


def build_pyfiles_zip(dest_dir: Path) -> Path:
    """include/mirrorflow as a zip for --py-files (masters other than local[*])."""
    pkg = ROOT / "include" / "mirrorflow"
    dest = dest_dir / "mirrorflow.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for f in pkg.rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".xml"):
                z.write(f, f.relative_to(pkg.parent))
    return dest


def spark_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """spark-submit from the venv: its bin first on PATH, executors on the venv's python."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def spark_conf(cfg: Config) -> dict[str, str]:
    conf = {"spark.ui.enabled": "false", "spark.log.level": "WARN", "spark.speculation": "false",
            "spark.python.worker.reuse": "true"}
    conf.update(cfg.spark.conf)
    return conf


def submit_command(cfg: Config, plan_path: Path, results_path: Path, master: str | None = None,
                   work_dir: Path | None = None) -> list[str]:
    master = master or cfg.spark.master or "local[*]"
    cmd = [str(VENV_BIN / "spark-submit"), "--master", master, "--name", "mirrorflow-copy"]
    for k, v in spark_conf(cfg).items():
        cmd += ["--conf", f"{k}={v}"]
    if not is_local_master(master):
        cmd += ["--py-files", str(build_pyfiles_zip(work_dir or plan_path.parent))]
    return cmd + [str(JOB_PATH), str(plan_path), str(results_path)]


def run_spark_submit(cfg: Config, plan_path: Path, results_path: Path, master: str | None = None,
                     log: Callable[[str], None] = print, timeout: float | None = None) -> list[dict]:
    cmd = submit_command(cfg, plan_path, results_path, master)
    log("running: " + " ".join(cmd))
    # its own process group, so an interrupted or timed-out run takes the whole job down with it
    proc = subprocess.Popen(cmd, env=spark_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    if proc.returncode != 0 or not results_path.exists():
        tail = "\n".join((err or out or "").splitlines()[-30:])
        raise MirrorflowError(f"the Spark copy job failed (exit {proc.returncode}):\n{tail}")
    return json.loads(results_path.read_text())["results"]


def run_in_process(cfg: Config, plan: dict[str, Any], master: str | None = None) -> list[dict]:
    os.environ.update({k: v for k, v in spark_env().items() if k in ("PYSPARK_PYTHON", "PATH")})
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName("mirrorflow-copy").master(master or cfg.spark.master or "local[*]")
    for k, v in spark_conf(cfg).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    try:
        return run_plan_spark(spark, plan)
    finally:
        spark.stop()


# -- orchestration ------------------------------------------------------------------------------
def run_dir(flow: FlowConfig, run_id: str | None = None) -> Path:
    base = Path(os.environ.get("MIRRORFLOW_RUN_DIR") or Path(tempfile.gettempdir()) / "mirrorflow-runs")
    d = base / flow.id / (run_id or time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}")
    d.mkdir(parents=True, exist_ok=True)
    return d


def plan_run(cfg: Config, flow: FlowConfig, directory: Path) -> tuple[Plan, Path]:
    """Ensure the state topics, plan, write the plan file; returns (plan, plan path)."""
    from .state import ensure_state_topics

    ensure_state_topics(cfg, flow)
    plan = make_plan(cfg, flow)
    path = directory / "plan.json"
    path.write_text(json.dumps(plan.to_dict()))
    return plan, path


def source_ends(cfg: Config, flow: FlowConfig, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    from . import clients
    from .planner import list_offsets
    from .state import overrides

    admin = clients.admin_client(cfg.cluster(flow.source), overrides(flow, "admin"))
    return list_offsets(admin, keys, OffsetSpec.latest(), committed=True)


def report_run(cfg: Config, flow: FlowConfig, plan: dict[str, Any], results: list[dict], started: float,
               spark_s: float = 0.0) -> RunReport:
    keys = [(p["topic"], p["partition"]) for p in plan.get("partitions", [])]
    try:
        ends = source_ends(cfg, flow, keys) if keys else {}
    except MirrorflowError:
        ends = {}
    return build_report(flow.name, bool(flow.exactly_once), plan.get("partitions", []), results, ends,
                        time.time() - started, spark_s)


def run_once(cfg: Config, flow: FlowConfig, mode: str = "submit", master: str | None = None,
             log: Callable[[str], None] = lambda s: None, directory: Path | None = None) -> RunReport:
    """Plan, copy, report. mode: submit (spark-submit) | inprocess (SparkSession here) | direct (no Spark)."""
    started = time.time()
    # run files are kept when asked for (a directory, $MIRRORFLOW_RUN_DIR) or when the run failed
    keep = directory is not None or bool(os.environ.get("MIRRORFLOW_RUN_DIR"))
    directory = directory or run_dir(flow)
    plan, plan_path = plan_run(cfg, flow, directory)
    pd = plan.to_dict()
    log(f"planned {len(plan.units)} units in {len(plan.waves)} waves "
        f"({sum(u.records for u in plan.units):,} offsets) for flow {flow.name}")
    t0 = time.time()
    if not plan.units:
        results: list[dict] = []
    elif mode == "submit":
        results = run_spark_submit(cfg, plan_path, directory / "results.json", master, log)
    elif mode == "inprocess":
        results = run_in_process(cfg, pd, master)
    elif mode == "direct":
        results = run_plan_direct(cfg, flow, pd)
    else:
        raise MirrorflowError(f"unknown copy mode {mode!r} (submit, inprocess or direct)")
    spark_s = time.time() - t0 if plan.units else 0.0
    (directory / "results.json").write_text(json.dumps({"flow": flow.name, "results": results}))
    rep = report_run(cfg, flow, pd, results, started, spark_s)
    (directory / "report.json").write_text(json.dumps(rep.to_dict()))
    if rep.ok and not keep:
        cleanup(directory)
    return rep


def cleanup(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
