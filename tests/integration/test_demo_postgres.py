"""`mirrorflow demo postgres up|down` (scripts/demo --postgres): a PostgreSQL the demo's Airflow keeps
across runs, outside the test's process (detached), and its clear refusal of an unreachable home."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mirrorflow_dev.postgres import bin_dir

pytestmark = pytest.mark.skipif(bin_dir() is None, reason="PostgreSQL is not installed (scripts/bootstrap)")


def demo_postgres(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorflow.cli", "demo", "postgres", *args], capture_output=True,
                          text=True, env={**os.environ, "MIRRORFLOW_DEV_HOME": str(home)}, timeout=300)


def test_demo_postgres_keeps_its_database_until_down():
    import psycopg2

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-demo-pg-"))  # /tmp: the `postgres` user reaches it
    home.chmod(0o755)
    try:
        up = demo_postgres(home, "up")
        assert up.returncode == 0, up.stderr
        url = up.stdout.strip().splitlines()[-1]
        assert url.startswith("postgresql+psycopg2://mirrorflow@127.0.0.1:") and url.endswith("/airflow"), url
        with psycopg2.connect(url.replace("+psycopg2", "")) as con, con.cursor() as cur:
            cur.execute("CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)")
        con.close()
        again = demo_postgres(home, "up")  # running: the same server and database, its data kept
        assert again.returncode == 0 and again.stdout.strip().splitlines()[-1] == url, again.stderr
        with psycopg2.connect(url.replace("+psycopg2", "")) as con, con.cursor() as cur:
            cur.execute("SELECT n FROM kept")
            assert cur.fetchall() == [(7,)]
        con.close()
        down = demo_postgres(home, "down", "--remove")
        assert (down.returncode, down.stdout.strip()) == (0, "PostgreSQL stopped"), down.stderr
        with pytest.raises(psycopg2.OperationalError):
            psycopg2.connect(url.replace("+psycopg2", ""), connect_timeout=5)
        assert not (home / "postgres").exists()
        assert demo_postgres(home, "down").stdout.strip() == "PostgreSQL was not running"
    finally:
        demo_postgres(home, "down")
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs PostgreSQL as the `postgres` user")
def test_demo_postgres_refuses_a_home_the_postgres_user_cannot_reach(tmp_path):
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    out = demo_postgres(hidden / "dev", "up")
    assert out.returncode != 0
    assert f"cannot reach {hidden / 'dev' / 'postgres'}: {hidden} is not searchable by others" in out.stderr, out.stderr
