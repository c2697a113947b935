"""The Spark side of a run: one Spark task per unit, through spark-submit or an in-process session.

`spark-submit --files PLAN spark_jobs/mirrorflow_copy.py PLAN` is the default (the master
comes from the config, `local[*]` unless set; other masters get the package as a --py-files zip).
spark-submit ships the plan file itself, so a driver on another host (--deploy-mode cluster) reads
it too; the driver writes the units' results to the target (`replication.executors.handoff`), where the
runner or the DAG's report task reads them by the run's id: no disk is shared. Each task loads the
config itself and copies its unit with the same copier as every other mode, so secrets never
travel in the plan: executors resolve `${env:...}` from their own environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mirrorflow
from mirrorflow.config import Config
from mirrorflow.errors import MirrorflowError
from mirrorflow.process import die_with_parent
from mirrorflow.replication.plan.run_plan import Plan, TaskHead

PACKAGED_JOB = Path(__file__).with_name("spark_job.py")


def job_path(package_dir: Path = Path(mirrorflow.__file__).parent) -> Path:
    """The Spark application to submit: spark_jobs/mirrorflow_copy.py of the checkout mirrorflow
    runs from (include/mirrorflow -> spark_jobs/; an editable install, the Docker image), else the
    package's own replication/executors/spark_job.py, the same main() as a script: a wheel installed without
    the repository carries no spark_jobs/ (shipping it as a top-level package would put a generic
    `spark_jobs` name into site-packages), and needs none."""
    if package_dir.parent.name == "include":
        app = package_dir.parent.parent / "spark_jobs" / "mirrorflow_copy.py"
        if app.is_file():
            return app
    return PACKAGED_JOB


JOB_PATH = job_path()
VENV_BIN = Path(sys.executable).parent


def spark_attempt() -> int:
    """This Spark task's attempt number (0: the first; a retry of a failed task counts up)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return int(ctx.attemptNumber()) if ctx is not None else 0


def _copy_task(config_path: str | None, head: TaskHead) -> Callable[[Any], list[dict]]:
    def task(rows: Any) -> list[dict]:  # runs inside a Spark task, (index, units) rows: clients are built here
        from mirrorflow import config as config_mod
        from mirrorflow.clients import FlowClients
        from mirrorflow.replication.task.faults import from_env as faults_from_env
        from mirrorflow.replication.task.task_copier import copy_together

        faults = faults_from_env()  # test crash points: read once per task, never on the copy path
        cfg = config_mod.load(config_path)
        attempt = spark_attempt()
        with FlowClients(cfg, cfg.flow(head.flow)) as clients:
            return copy_together(clients, head, list(rows), faults, attempt)

    return task


def local_slots(master: str) -> int | None:
    """The task slots of a local master (local, local[N], local[*], local[N,F]); None for a cluster
    master, whose deployment states its parallelism (spark.default.parallelism) itself."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if m is None:
        return None
    n = m.group(1) or "1"
    return (os.cpu_count() or 1) if n == "*" else int(n)


def spark_tasks(planned: int, slots: int | None) -> int:
    """How many Spark tasks copy a plan's `planned` tasks: one each, or one per task slot of the job
    (`slots`: spark.default.parallelism) when it has fewer, each copying its share of the planned
    tasks at once (task_copier.copy_together). In waves, a slot's next task waited for the one
    before it, which mostly waits on the brokers (its epoch, its commits): 8 tasks over many quiet
    partitions on a 2-core server took four waves of ~0.5 s each."""
    return max(1, min(planned, slots or planned))


@contextmanager
def plan_clients(plan: Plan) -> Iterator[Any]:
    """FlowClients of the plan's flow, built from the plan's config file (the driver's own)."""
    from mirrorflow import config as config_mod
    from mirrorflow.clients import FlowClients

    cfg = config_mod.load(plan.config_path)
    with FlowClients(cfg, cfg.flow(plan.flow)) as clients:
        yield clients


@contextmanager
def lease_kept(plan: Plan, clients: Any = None) -> Iterator[None]:
    """Keep the run's lease (taken by whoever planned the run, see state.lease) renewed while the
    job copies. When another run holds it now, stop before copying anything (LeaseError)."""
    lease = plan.lease
    if not lease:
        yield
        return
    from mirrorflow.state.lease import FlowLease

    with contextlib.ExitStack() as stack:
        clients = clients or stack.enter_context(plan_clients(plan))
        with FlowLease(clients, lease["owner"], lease["who"]).acquire().renewed():
            yield


def copy_in_spark(spark: Any, plan: Plan, clients: Any = None) -> list[dict]:
    """One Spark job, one Spark task per planned task or per task slot (`spark_tasks`)."""
    sc = spark.sparkContext
    tasks = plan.tasks
    sc.setJobDescription(f"mirrorflow {plan.flow}: {len(plan.units)} units in {len(tasks)} tasks")
    # packed only on a local master: a cluster's default parallelism counts the executors registered
    # so far (dynamic allocation: maybe none yet), not what the job may get
    rdd = sc.parallelize(list(enumerate(tasks)), spark_tasks(len(tasks), local_slots(sc.master)))
    with lease_kept(plan, clients):
        return list(rdd.mapPartitions(_copy_task(plan.config_path, plan.head())).collect())


def shipped_file(path: str) -> Path:
    """The plan file as this driver sees it: the path itself (client mode), else the copy that
    spark-submit's --files shipped (cluster mode: the driver's working or SparkFiles directory)."""
    if Path(path).exists():
        return Path(path)
    name = Path(path).name
    if Path(name).exists():
        return Path(name)
    from pyspark import SparkFiles

    return Path(SparkFiles.get(name))


def copy_from_plan_file(spark: Any, plan_path: str) -> list[dict]:
    """Entry used by spark_job.py: read the plan file, run it, hand the results to the report
    through the target (replication.executors.handoff): the driver may share no disk with it."""
    from mirrorflow.replication.executors.handoff import publish_results

    t0 = time.time()
    plan = Plan.from_dict(json.loads(shipped_file(plan_path).read_text()))
    with plan_clients(plan) as clients:
        results = copy_in_spark(spark, plan, clients)
        publish_results(clients, plan, results, job_started=t0, job_finished=time.time())
    return results


# -- spark-submit -------------------------------------------------------------------------------
def is_local_master(master: str) -> bool:
    return master.startswith("local")


def build_pyfiles_zip(dest_dir: Path) -> Path:
    """include/mirrorflow as a zip for --py-files (masters other than local[*])."""
    pkg = Path(mirrorflow.__file__).parent
    dest = dest_dir / "mirrorflow.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for f in pkg.rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".xml"):
                z.write(f, f.relative_to(pkg.parent))
    return dest


# PySpark marks its process as a Spark Connect client in these (SparkSession.builder.remote); a
# spark-submit started later by the same process (a worker that ran a connect copy, a test session)
# must not inherit them, or its driver looks for a Connect server and exits 1 without a word
CONNECT_CLIENT_VARS = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


def spark_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """spark-submit from the venv: its bin first on PATH, executors on the venv's python, no
    Spark Connect client marks."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in CONNECT_CLIENT_VARS}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def spark_conf(cfg: Config) -> dict[str, str]:
    conf = {
        "spark.ui.enabled": "false",
        "spark.log.level": "WARN",
        "spark.speculation": "false",
        "spark.python.worker.reuse": "true",
    }
    conf.update(cfg.spark.conf)
    return conf


@dataclass(frozen=True)
class SubmitSpec:
    """One spark-submit of the copy job, assembled once: the CLI runs it as a command line
    (`command`), the Airflow operator hands it to the Spark provider field by field."""

    master: str
    name: str
    conf: dict[str, str]
    plan_path: Path  # shipped with --files, so a driver on any host gets it; the job's argument
    py_files: str | None = None  # the package as a zip, for masters other than local[*]

    @property
    def application(self) -> str:
        return str(JOB_PATH)

    @property
    def files(self) -> str:
        return str(self.plan_path)

    @property
    def args(self) -> list[str]:
        return [str(self.plan_path)]

    def command(self) -> list[str]:
        cmd = [str(VENV_BIN / "spark-submit"), "--master", self.master, "--name", self.name]
        for k, v in self.conf.items():
            cmd += ["--conf", f"{k}={v}"]
        if self.py_files:
            cmd += ["--py-files", self.py_files]
        return cmd + ["--files", self.files, self.application, *self.args]


def submit_spec(
    cfg: Config, plan_path: Path, master: str | None = None, work_dir: Path | None = None, name: str = "mirrorflow-copy"
) -> SubmitSpec:
    """The copy job's spark-submit on the plan file `plan_path` (its zip of the package, when the
    master needs one, in `work_dir`, else beside the plan)."""
    master = master or cfg.spark.master or "local[*]"
    py_files = None if is_local_master(master) else str(build_pyfiles_zip(work_dir or plan_path.parent))
    return SubmitSpec(master, name, spark_conf(cfg), plan_path, py_files)


def submit_command(cfg: Config, plan_path: Path, master: str | None = None, work_dir: Path | None = None) -> list[str]:
    """spark-submit of the copy job as a command line; --files ships the plan to a driver on any host."""
    return submit_spec(cfg, plan_path, master, work_dir).command()


def job_output_tail(out: str | None, err: str | None, lines: int = 30) -> str:
    """The end of a failed job's output: stderr's last lines, and stdout's when it has the Python
    traceback (Spark's own log lines can fill stderr while the driver's error went to stdout)."""
    text = "\n".join((err or "").splitlines()[-lines:])
    tail_out = (out or "").splitlines()[-lines:]
    if tail_out and (not text or any("Traceback" in x or "Error" in x for x in tail_out)):
        text += ("\n--- stdout ---\n" if text else "") + "\n".join(tail_out)
    return text


def copy_with_spark_submit(
    clients: Any,
    plan: Plan,
    plan_path: Path,
    master: str | None = None,
    log: Callable[[str], None] = print,
    timeout: float | None = None,
) -> list[dict]:
    """Run the copy job on `plan_path` (the plan `plan`, written there); its results, as the driver
    wrote them to the target (a planned unit without one: MirrorflowError naming it)."""
    from mirrorflow.replication.executors.handoff import collect_results

    cmd = submit_command(clients.cfg, plan_path, master)
    log("running: " + " ".join(cmd))
    # its own process group, so an interrupted or timed-out run takes the whole job down with it,
    # and a SIGTERM when this process dies (SIGKILLed: no orphaned job copying on, holding the lease)
    proc = subprocess.Popen(
        cmd, env=spark_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    if proc.returncode != 0:
        raise MirrorflowError(f"the Spark copy job failed (exit {proc.returncode}):\n{job_output_tail(out, err)}")
    return collect_results(clients, plan)


def copy_in_process_spark(cfg: Config, plan: Plan, master: str | None = None) -> list[dict]:
    os.environ.update({k: v for k, v in spark_env().items() if k in ("PYSPARK_PYTHON", "PATH")})
    for k in CONNECT_CLIENT_VARS:  # a process that ran a Connect copy before builds a classic session now
        os.environ.pop(k, None)
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName("mirrorflow-copy").master(master or cfg.spark.master or "local[*]")
    for k, v in spark_conf(cfg).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    try:
        return copy_in_spark(spark, plan)
    finally:
        spark.stop()
