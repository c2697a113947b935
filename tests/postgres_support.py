"""A real PostgreSQL for the tests that run Airflow's scheduler (registered in tests/conftest.py).

One server per pytest session (mirrorflow_dev.postgres: Debian's PostgreSQL, its own data directory
under /tmp, a free port on 127.0.0.1 (another if a sibling worker's broker takes it first), as the `postgres` OS user when we are root), tied to the pytest
process, so it stops even when pytest is killed; each test gets a database of its own from
`airflow_postgres`. Skipped, saying why, where PostgreSQL is not installed."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from mirrorflow_dev.postgres import DevPostgresServer, bin_dir

PREFIX = "mirrorflow-postgres-"


def _remove_left_behind() -> None:
    """Data directories of sessions that were killed (their server died with them; the files stay)."""
    for base in Path(tempfile.gettempdir()).glob(PREFIX + "*"):
        with contextlib.suppress(OSError, ValueError):
            pid = int((base / "owner.pid").read_text())
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    """The session's PostgreSQL (a DevPostgresServer, started)."""
    if bin_dir() is None:
        pytest.skip("PostgreSQL is not installed (/usr/lib/postgresql/*/bin): scripts/bootstrap installs it")
    _remove_left_behind()
    base = Path(tempfile.mkdtemp(prefix=PREFIX))
    base.chmod(0o755)  # the `postgres` user must reach its data directory inside
    (base / "owner.pid").write_text(str(os.getpid()))
    server = DevPostgresServer(base)
    server.up(port=0, attached=True)  # a free port, another if a sibling worker takes it first
    try:
        yield server
    finally:
        server.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def airflow_postgres(postgres_server) -> Callable[[], str]:
    """airflow_postgres() -> the sql_alchemy_conn of a new, empty database of the session's server."""
    return lambda: postgres_server.create_database(f"airflow_{uuid.uuid4().hex[:10]}")
