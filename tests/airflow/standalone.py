"""Airflow's real scheduler for tests: `airflow standalone` (scheduler, dag-processor, api-server,
triggerer; LocalExecutor on SQLite, or on PostgreSQL given `database=`, e.g. from the
`airflow_postgres` fixture) in its own AIRFLOW_HOME on a free port, reading this repository's
dags/ and plugins/ and a mirrorflow config; helpers that read its database and wait for it. Used by
test_scheduler.py, test_failover_approval.py and test_ui_journeys_browser.py, one at a time (one_at_a_time)."""
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from mirrorflow.process import die_with_parent

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TURN_WAIT_S = 480  # one_at_a_time: how long a test waits for its turn before it goes on beside the other


def query(db: Path | str, sql: str, *args: object) -> list[tuple]:
    """Rows of Airflow's database (read directly: an `airflow` CLI call costs seconds of a loaded
    machine's CPU); none before standalone created its tables. `db`: the SQLite file, or a
    PostgreSQL sql_alchemy_conn (`?` placeholders either way)."""
    if isinstance(db, str):
        return _query_postgres(db, sql, *args)
    if not db.exists():
        return []
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    finally:
        con.close()


def write(db: Path | str, sql: str, *args: object) -> int:
    """Change rows of Airflow's database (`?` placeholders); how many rows changed. SQLite waits for a
    scheduler's write lock up to its timeout."""
    if isinstance(db, str):
        import psycopg2

        con = psycopg2.connect(db.replace("+psycopg2", "", 1))
        try:
            with con, con.cursor() as cur:
                cur.execute(sql.replace("?", "%s"), args)
                return cur.rowcount
        finally:
            con.close()
    con = sqlite3.connect(db, timeout=60)
    try:
        with con:
            return con.execute(sql, args).rowcount
    finally:
        con.close()


def _query_postgres(url: str, sql: str, *args: object) -> list[tuple]:
    import psycopg2

    con = psycopg2.connect(url.replace("+psycopg2", "", 1))
    try:
        with con.cursor() as cur:
            cur.execute(sql.replace("?", "%s"), args)
            return cur.fetchall()
    except psycopg2.errors.UndefinedTable:
        return []
    finally:
        con.close()


def database(env: dict[str, str]) -> Path | str:
    """What `query` reads for an `airflow_env`: its SQLite file or its PostgreSQL URL."""
    url = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    return Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else url


def runs(db: Path | str, dag_id: str) -> list[dict]:
    rows = query(db, "SELECT run_id, state, start_date FROM dag_run WHERE dag_id = ?", dag_id)
    return [{"run_id": r, "state": st, "start": utc(start)} for r, st, start in rows]


def kill_leftovers(airflow_home: str) -> None:
    """Task processes that left standalone's process group (the executor's supervisors) must not
    outlive the test: they would write heartbeats into the next tests' clusters."""
    import psutil

    for p in psutil.process_iter():
        try:
            # a task worker's title overwrites its environment: it still holds the home's database open
            if p.environ().get("AIRFLOW_HOME") == airflow_home or any(
                    f.path.startswith(airflow_home + os.sep) for f in p.open_files()):
                p.kill()
        except (psutil.Error, OSError):
            continue


def utc(value: str | datetime | None) -> datetime | None:
    """A datetime column of Airflow's database (SQLite: text, naive UTC or with an offset)."""
    if value is None:
        return None
    d = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return d if d.tzinfo else d.replace(tzinfo=UTC)


def airflow(env: dict[str, str], *args: str) -> str:
    out = subprocess.run([str(BIN / "airflow"), *args], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, (args, out.stderr[-3000:])
    return out.stdout


def scheduler_alive(log: Path) -> None:
    """`airflow standalone` does not restart a scheduler that died: fail at once, with its error,
    instead of waiting out the test's deadline for runs that will never come."""
    text = log.read_text(errors="replace")
    if "Exited execute loop" in text:
        tail = text[text.index("Exited execute loop"):]
        error = next((line for line in tail.splitlines() if "Error: " in line), "")
        raise AssertionError(f"the Airflow scheduler died: {error.strip() or tail[:3000]}")


def scheduler_saw_pause(log: Path, task_id: str, run_id: str) -> bool:
    """Whether the scheduler handled the executor's event of the workload that paused `task_id` for a
    human's answer (Required Actions). Airflow 3.3 race: an answer given before that (within about a
    second of the pause) has the task marked failed ("finished with state success, but the task
    instance's state attribute is queued"); a person is slower, a test must wait for it."""
    paused = f"task_id='{task_id}', run_id='{run_id}'"
    return any("Received executor event" in line and paused in line
               for line in log.read_text(errors="replace").splitlines())


def unpause_when_ready(proc: subprocess.Popen, log: Path, db: Path | str, port: int, dag_ids: list[str]) -> None:
    """Unpause the flows' DAGs once they are parsed and the api-server (which also serves the tasks'
    execution API) answers: on a loaded machine it starts a minute after the scheduler, and tasks
    started before that fail on "connection refused" until their retries run out."""
    import urllib.request

    deadline = time.monotonic() + 600
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "Airflow did not come up: " + log.read_text()[-3000:]
        parsed = {r[0] for r in query(db, "SELECT dag_id FROM serialized_dag")}
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=10) as r:
                up = r.status == 200
        except OSError:
            up = False
        if up and parsed >= set(dag_ids):
            break
        time.sleep(5)
    # what `airflow dags unpause` does (DagModel.is_paused), without its CLI's start: seconds of a loaded CPU
    marks = ", ".join("?" for _ in dag_ids)
    changed = write(db, f"UPDATE dag SET is_paused = ? WHERE dag_id IN ({marks})", False, *dag_ids)
    assert changed == len(dag_ids), (changed, dag_ids)


def airflow_env(home: Path, port: int, config: Path, run_dir: Path, database: str | None = None,
                **extra: str) -> dict[str, str]:
    """The environment of a test's Airflow: its home, database (SQLite in the home unless `database`
    gives a sql_alchemy_conn), port, DAGs, plugins and config."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__OPENLINEAGE__")},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database or f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # unpaused once the api-server answers
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        # a loaded machine's api-server answers a task's start in more than the default 5 s
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
        # and a task's parse of its DAG file took more than the default 30 s on a starved machine: "DagBag import
        # timeout ... after 30.0s", then "Dag not found during start up", and the task failed (a full run, 2026-12-02,
        # load 26 on two cores); the file processor's own bound stays above it
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "150",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",  # no login for the health check
        "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[2]"}',
        "MIRRORFLOW_CONFIG": str(config),
        "MIRRORFLOW_RUN_DIR": str(run_dir),
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        **extra,
    }


@contextlib.contextmanager
def one_at_a_time() -> Iterator[None]:
    """One test with an `airflow standalone` at a time across the run's workers (a lock file per pytest run;
    the `standalone_turn` fixture, taken before the test computes any time). Each is a scheduler, a
    dag-processor, an api-server and a triggerer starting at once; the three tests that use one come first in
    the run (the longest), and started together on a loaded 2-core machine, the real-scheduler tests missed their
    bounds (both of them in both full runs of 2026-12-02). Under scripts/test one worker runs the three one after
    another (tests/conftest.py, STANDALONE_FILES), so none waits; the lock holds the turns in any other mode. A test
    waits at most TURN_WAIT_S (the wait counts toward its hang bound), then goes on."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))
    with open(Path(tempfile.gettempdir()) / f"mirrorflow-standalone-{run}.lock", "w") as lock:
        began = time.monotonic()
        while time.monotonic() - began < TURN_WAIT_S:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the file closes, or the worker dies
                break
            except BlockingIOError:
                time.sleep(1)
        waited = time.monotonic() - began
        if waited > 1:
            print(f"waited {waited:.0f} s for another test's airflow standalone to end", file=sys.stderr)
        yield


@contextlib.contextmanager
def standalone(env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen]:
    """`airflow standalone` for the duration of the block; it and every process it left are gone after."""
    log = open(log_path, "w")  # noqa: SIM115 - the child writes it
    # a session of its own (killpg below), and SIGTERM from the kernel should pytest die: a killed
    # test run must not leave a scheduler and its workers running
    proc = subprocess.Popen([str(BIN / "airflow"), "standalone"], stdout=log, stderr=subprocess.STDOUT, env=env,
                            preexec_fn=die_with_parent)
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        # children still in its group once standalone exited (the api-server outlived a SIGTERM once;
        # its title replaces its environment, so kill_leftovers cannot tell it is ours)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        kill_leftovers(env["AIRFLOW_HOME"])
