"""The `connect` copy mode: the copy job runs on an already running Spark Connect server.

spark-submit starts a Spark application per run (~6-12 s of a run's fixed cost); a Spark Connect
server (`spark.remote: sc://host:port`) is started once and reused. A run sends its tasks as a
DataFrame (one partition per planned task, its units as a JSON column) and copies them in the
server's executors with `mapInArrow` (RDD APIs do not exist over Connect), with the same copier
as every other mode.

What reaches the server: the mirrorflow package as a zip artifact (`addArtifacts(pyfile=True)`)
and the plan's units, flow name and config path -- never secrets: executors load the config file
themselves and resolve `${env:...}` from the server's environment.

Reuse, not only of the server: a run attaches to a session whose id is derived from the package's
content hash, so the artifact is uploaded and the Python workers start once per package version;
later runs find the workers up (a job of a few units: ~0.3 s instead of ~2 s).

A server that goes away during a job (killed, restarted) fails the run within UNAVAILABLE_RETRIES'
~25 s with an error naming it -- PySpark alone retries an unavailable server for over 10 minutes,
the flow's lease held all along. Units end only through their own transactions, so what the job
had not committed stays uncopied and the next run continues exactly; a job this client gives up on
(interrupted, the Airflow task killed) is interrupted on the server by its tag, so it does not copy
on unseen. A client killed outright (SIGKILL) interrupts nothing: the next run of the flow, which
holds the flow's lease, interrupts the flow's jobs still running (`flow_tag`) before starting its
own, and its tasks fence whatever those had started.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import py_compile
import re
import socket
import tempfile
import time
import uuid
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mirrorflow
from mirrorflow.config import Config, config_path
from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.executors.spark import _copy_task, lease_kept, spark_env, spark_tasks
from mirrorflow.replication.plan.run_plan import Plan, TaskHead

SESSION_NS = uuid.UUID("6f2f3b4e-93a4-4a63-9d0c-5b3f1c8e0a11")  # namespace of mirrorflow's session ids
RESULT_SCHEMA = "result string"
PROBE_TIMEOUT_S = 5.0
# PySpark's DefaultPolicy, bounded: waits of 0.25, 0.5, 1, 2, 4, then 5 s (~25 s in all) while the
# server does not answer (UNAVAILABLE), then the run fails naming the server
UNAVAILABLE_RETRIES = {"max_retries": 8, "initial_backoff": 250, "backoff_multiplier": 2.0, "max_backoff": 5000}


@dataclass(frozen=True)
class PackageZip:
    """The mirrorflow package as a zip artifact, named by its content hash."""

    path: Path
    digest: str


def cache_dir() -> Path:
    """A directory private to this user (zips and session generations), like the run directory."""
    d = Path(tempfile.gettempdir()) / f"mirrorflow-connect-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    st = d.lstat()
    if d.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise MirrorflowError(f"the Spark Connect cache directory {d} is not private to this user: remove it")
    return d


def package_files(pkg: Path | None = None) -> list[Path]:
    """The files of the package that executors need (sources and resources), in a stable order."""
    pkg = pkg or Path(mirrorflow.__file__).parent
    files = [f for f in pkg.rglob("*") if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".xml")]
    return sorted(files)


def package_zip(dest_dir: Path | None = None, pkg: Path | None = None) -> PackageZip:
    """Zip the package once per content: `mirrorflow-<hash>.zip` (an edited package is a new zip,
    hence a new artifact name and a new session: a server never mixes two versions).

    Each module goes in with its bytecode beside it (`x.pyc`, unchecked-hash: the zip is named by
    its sources), which zipimport loads instead of compiling the source: a Python worker that
    imports the package from the artifact cannot write a bytecode cache, and compiling it took a
    fifth of the workers' samples in a copy of 100 MB (bench/bench_vs_raw.py --profile). Bytecode
    of another Python version is skipped by zipimport, which then compiles the source as before;
    the hash covers this Python's bytecode version, so two versions never share a zip's name."""
    pkg = pkg or Path(mirrorflow.__file__).parent
    files = package_files(pkg)
    h = hashlib.sha256(b"pyc:" + importlib.util.MAGIC_NUMBER + b"\0")
    for f in files:
        h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes() + b"\0")
    digest = h.hexdigest()[:16]
    dest = (dest_dir or cache_dir()) / f"mirrorflow-{digest}.zip"
    if not dest.exists():
        tmp = dest.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for f in files:
                name = f.relative_to(pkg.parent)
                z.write(f, name)
                if f.suffix == ".py":
                    z.writestr(str(name.with_suffix(".pyc")), bytecode(f, str(name)))
        tmp.replace(dest)
    return PackageZip(dest, digest)


def bytecode(source: Path, name: str) -> bytes:
    """A module's .pyc as zipimport reads it (unchecked hash: valid whatever the file times)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "m.pyc"
        py_compile.compile(
            str(source),
            cfile=str(out),
            dfile=name,
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        return out.read_bytes()


def session_id(remote: str, digest: str, generation: int) -> str:
    """The session a run attaches to: one per server URL, package version and generation."""
    return str(uuid.uuid5(SESSION_NS, f"{remote}|{digest}|{generation}"))


def _generation_file(remote: str, directory: Path) -> Path:
    return directory / f"session-{hashlib.sha256(remote.encode()).hexdigest()[:12]}.gen"


def read_generation(remote: str, directory: Path) -> int:
    try:
        return int(_generation_file(remote, directory).read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def bump_generation(remote: str, directory: Path, seen: int) -> int:
    """A server closed our session (idle timeout, restart with a tombstone): use the next one."""
    nxt = max(seen, read_generation(remote, directory)) + 1
    _generation_file(remote, directory).write_text(str(nxt))
    return nxt


def task_rows(plan: Plan) -> list[str]:
    """One JSON string per planned task (its units in order): the job's input column."""
    return [json.dumps([u.to_dict() for u in t]) for t in plan.tasks]


def _arrow_task(config_file: str, head: TaskHead) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """mapInArrow function: the (task, units) rows of a partition -> one result row per unit
    (`head`: what every task of the plan needs besides its units)."""
    copy = _copy_task(config_file, head)

    def run(batches: Iterator[Any]) -> Iterator[Any]:  # runs in an executor's Python worker
        import pyarrow as pa  # type: ignore[import-untyped]

        from mirrorflow.replication.plan.run_plan import Unit

        rows = [
            (r["task"], [Unit.from_dict(u) for u in json.loads(r["units"])]) for b in batches for r in b.to_pylist()
        ]
        results = copy(rows) if rows else []
        yield pa.RecordBatch.from_pydict({"result": [json.dumps(r) for r in results]})

    return run


def remote_address(remote: str) -> tuple[str, int]:
    """(host, port) of sc://HOST[:PORT][/;params] (Spark Connect's default port is 15002)."""
    if not remote.startswith("sc://"):
        raise MirrorflowError(f"spark.remote must be a Spark Connect URL sc://HOST:PORT, got {remote!r}")
    hostport = remote[len("sc://") :].split("/", 1)[0]
    host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "15002")
    if not host or not port.isdigit():
        raise MirrorflowError(f"spark.remote must be a Spark Connect URL sc://HOST:PORT, got {remote!r}")
    return host.strip("[]"), int(port)


def probe(remote: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Fail fast when nothing listens at `remote`: the Connect client itself retries for minutes."""
    host, port = remote_address(remote)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise MirrorflowError(
            f"cannot reach the Spark Connect server {remote} (spark.remote): {exc.strerror or exc}; "
            "start it (`mirrorflow dev spark up` locally) or unset spark.remote to use spark-submit"
        ) from None


def is_closed_session(exc: BaseException) -> bool:
    text = str(exc)
    return "SESSION_CLOSED" in text or "SESSION_NOT_FOUND" in text or "SESSION_CHANGED" in text


def reachable(remote: str) -> bool:
    try:
        probe(remote, timeout=2.0)
        return True
    except MirrorflowError:
        return False


def _tag(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)


def job_tag(plan: Plan) -> str:
    """The tag of a run's operations on the server (its session is shared with other flows' runs, so
    an abandoned job is interrupted by this tag, never by interrupting the whole session)."""
    return "mirrorflow-" + _tag(plan.run or str(uuid.uuid4()))


def flow_tag(plan: Plan, cfg: Config | None = None) -> str:
    """The tag every copy job of the plan's flow carries. The run that holds the flow's lease
    interrupts what still runs under it before its own job starts: the job of a run that was
    killed (SIGKILL of the CLI, of an Airflow worker) and could not interrupt it itself."""
    flow = cfg.flow(plan.flow).client_name if cfg is not None else plan.flow
    return "mirrorflow-flow-" + _tag(flow)


@dataclass
class ConnectCopy:
    """One run's job on a Spark Connect server at `remote` (sc://host:port)."""

    remote: str
    log: Callable[[str], None] = lambda s: None

    def session(self, sid: str) -> Any:
        os.environ.setdefault("PYSPARK_PYTHON", spark_env()["PYSPARK_PYTHON"])
        from pyspark.sql import SparkSession

        url = f"{self.remote.rstrip('/')}/;session_id={sid}"
        try:
            spark = SparkSession.builder.remote(url).create()
        except Exception as exc:  # noqa: BLE001 - grpc/pyspark raise many kinds: one clear error
            raise MirrorflowError(f"cannot reach the Spark Connect server {self.remote} (spark.remote): {exc}") from exc
        spark.release_session_on_close = False  # keep the session (and its Python workers) for the next run
        from pyspark.sql.connect.client.retries import DefaultPolicy

        spark.client.set_retry_policies([DefaultPolicy(**UNAVAILABLE_RETRIES)])
        return spark

    def run(self, plan: Plan, config_file: str, cfg: Config | None = None) -> list[dict]:
        probe(self.remote)
        # PySpark warns when its retries run out; the error below says it once, naming the server
        warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
        directory = cache_dir()
        pkg = package_zip(directory)
        gen = read_generation(self.remote, directory)
        for attempt in range(2):
            spark = self.session(session_id(self.remote, pkg.digest, gen))
            tag = job_tag(plan)
            try:
                self._stop_abandoned(spark, flow_tag(plan, cfg), plan.flow)
                spark.addTag(flow_tag(plan, cfg))
                return self._job(spark, plan, config_file, pkg, tag)
            except Exception as exc:  # noqa: BLE001
                if attempt == 0 and is_closed_session(exc):
                    gen = bump_generation(self.remote, directory, gen)
                    self.log(f"the Spark Connect session was closed by the server; a new one (generation {gen})")
                    continue
                if isinstance(exc, MirrorflowError):
                    raise
                if not reachable(self.remote):
                    raise MirrorflowError(
                        f"the Spark Connect server {self.remote} (spark.remote) went away during the copy job "
                        f"({first_line(exc)}): the units it had not committed are not marked done; the next run "
                        "continues from the progress on the target once the server is back"
                    ) from None
                self._interrupt(spark, tag)
                tail = "\n".join(str(exc).splitlines()[-30:])
                raise MirrorflowError(f"the Spark Connect copy job on {self.remote} failed:\n{tail}") from exc
            except BaseException:  # interrupted (Ctrl-C, the Airflow task killed): stop the job on the server too
                self._interrupt(spark, tag)
                raise
            finally:
                spark.stop()
        raise AssertionError("unreachable")

    def _stop_abandoned(self, spark: Any, tag: str, flow: str) -> None:
        """Interrupt the flow's jobs still running on the server (this run holds the flow's lease,
        so they belong to runs that are gone); their tasks commit nothing more once interrupted,
        and were fenced anyway by this run's tasks."""
        gone = spark.interruptTag(tag)
        if gone:
            self.log(f"interrupted {len(gone)} copy job operation(s) of flow {flow} left by a run that is gone")

    @staticmethod
    def _interrupt(spark: Any, tag: str) -> None:
        with contextlib.suppress(Exception):  # best effort: the server may be gone
            spark.interruptTag(tag)

    def _job(self, spark: Any, plan: Plan, config_file: str, pkg: PackageZip, tag: str) -> list[dict]:
        from pyspark.sql import functions as F

        t0 = time.time()
        spark.addTag(tag)
        spark.addArtifacts(str(pkg.path), pyfile=True)  # the same name and content again is a no-op
        rows = task_rows(plan)
        n = len(rows)
        units = F.array(*[F.lit(r) for r in rows])
        parts = spark_tasks(n, server_slots(spark))
        df = spark.range(0, n, 1, parts).select(
            F.col("id").cast("int").alias("task"), F.element_at(units, (F.col("id") + 1).cast("int")).alias("units")
        )
        task = _arrow_task(config_file, plan.head())
        out = df.mapInArrow(task, RESULT_SCHEMA).collect()
        results = [json.loads(r["result"]) for r in out]
        self.log(
            f"Spark Connect job: {len(results)} unit results from {n} tasks ({parts} Spark tasks) "
            f"in {time.time() - t0:.2f} s"
        )
        return results


def server_slots(spark: Any) -> int | None:
    """The server's task slots as it states them (spark.default.parallelism: the product's server
    sets it, connect_server.server_command); None when it does not say (one Spark task per task)."""
    try:
        value = spark.conf.get("spark.default.parallelism", None)
        return int(value) if value else None
    except Exception:  # noqa: BLE001 - not a number, or a server that refuses the question
        return None


def first_line(exc: BaseException) -> str:
    """What went wrong in one line: a gRPC error's details (its first line is only `<_MultiThreaded
    Rendezvous of RPC that terminated with:`), else the error's first line."""
    text = str(exc)
    details = re.search(r'details = "([^"]*)"', text)
    if details:
        return details.group(1)[:300]
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return lines[0][:300] if lines else type(exc).__name__


def resolved_config(plan: Plan) -> str:
    """The plan's config file as an absolute path: the server's executors do not share our cwd or
    environment ($MIRRORFLOW_CONFIG), so they get the file the planner read."""
    return str(config_path(plan.config_path).resolve())


def copy_with_connect(
    cfg: Config,
    plan: Plan,
    remote: str | None = None,
    log: Callable[[str], None] = lambda s: None,
    keep_lease: bool = True,
) -> list[dict]:
    """Copy a plan's tasks on the Spark Connect server `remote` (default: spark.remote of the
    config). keep_lease: renew the plan's lease during the job (the runner renews its own)."""
    remote = remote or cfg.spark.remote
    if not remote:
        raise MirrorflowError("the connect copy mode needs spark.remote: sc://HOST:PORT in the config (or --remote)")
    if not plan.tasks:
        return []
    job = ConnectCopy(remote, log)
    if not keep_lease:
        return job.run(plan, resolved_config(plan), cfg)
    with lease_kept(plan):
        return job.run(plan, resolved_config(plan), cfg)
