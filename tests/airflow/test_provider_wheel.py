"""mirrorflow as a provider users install (issue 38 item 6), tested from the built wheel, not the checkout.

The wheel is built from a copy of pyproject.toml and include/ (nothing else of the repository), installed
with its `airflow` extra into a fresh virtualenv, with requirements.txt as constraints (the role of
Airflow's published constraints file, which cannot be fetched here: it is the pinned set this project is
tested with, Airflow 3.3.2 and its providers), by uv from its cache (seconds once warm). In that
virtualenv, run from a directory outside the checkout with no PYTHONPATH: `airflow providers list` shows
the provider; Airflow sees its hook and connection type, its plugins load (no duplicate), the per-flow
DAGs come from one call of a user's DAG file, and a user's DAG (tests/airflow/user_dags/orders_pipeline.py:
sync the topics, replicate, checkpoint, then the user's job) runs under dag.test() on the session's real
brokers; the records and the checkpoints are then read back from the target cluster. A second user DAG
(dr_checks.py) verifies the copy and rehearses the failover as a dry run in a task group: planned, the
approval and the commit skipped.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import CheckpointStore
from tests.integration.replicate_helpers import target_offset_of
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
UV = Path(sys.executable).parent / "uv"


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of the fresh virtualenv's processes: none of the checkout's paths or Airflow settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHON", "MIRRORFLOW", "VIRTUAL_ENV"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        **extra,
    })
    return env


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """A fresh virtualenv holding the built wheel with its `airflow` extra, and nothing of the checkout."""
    if not UV.exists():
        pytest.fail(f"{UV} is missing: scripts/bootstrap installs uv (requirements.txt)")
    tmp = tmp_path_factory.mktemp("provider-wheel")
    src = tmp / "src"
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copytree(ROOT / "include", src / "include", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    env = {**os.environ, "SSL_CERT_FILE": os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")}
    run = dict(check=True, capture_output=True, text=True, env=env, timeout=600)
    subprocess.run([str(UV), "build", "--wheel", "--out-dir", str(tmp / "dist"), str(src)], **run)
    wheel = next((tmp / "dist").glob("mirrorflow-*-py3-none-any.whl"))
    venv = tmp / "venv"
    subprocess.run([str(UV), "venv", "-q", str(venv), "--python", sys.executable], **run)
    subprocess.run(
        [str(UV), "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
         "-c", str(ROOT / "requirements.txt"), f"mirrorflow[airflow] @ {wheel.as_uri()}"],
        **run,
    )
    return venv


def test_airflow_lists_the_installed_provider(wheel_venv, tmp_path):
    out = subprocess.run(
        [str(wheel_venv / "bin" / "airflow"), "providers", "list", "--output", "json"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=_clean_env(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    providers = {p["package_name"]: p for p in json.loads(out.stdout)}
    assert providers["mirrorflow"]["version"] == _version()


def _version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_users_dag_replicates_and_checkpoints_from_the_wheel(wheel_venv, tmp_path, source, target, unique):
    prefix = unique("wheel")
    topic = f"{prefix}.orders"
    cfg = write_config(tmp_path / "mirrorflow.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": f"{prefix}\\..*", "groups": f"g-{prefix}.*",
                                 "sync.group.offsets.enabled": True, "state.topic.partitions": 1,
                                 # other tests' heartbeats on A are not this DAG's business
                                 "heartbeats.replication.enabled": False}})
    create_topic(source, topic, partitions=2)
    produce(source, topic, [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode()}
                            for i in range(40)])
    group = f"g-{prefix}"
    c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 12)], asynchronous=False)
    c.close()

    home = tmp_path / "airflow"
    home.mkdir()
    conn = json.dumps({"conn_type": "mirrorflow", "extra": {"config": str(cfg.path)}})
    env = _clean_env(home, AIRFLOW_CONN_MIRRORFLOW_DEFAULT=conn, MY_FLOW="A->B", MY_MIRRORFLOW_CONFIG=str(cfg.path),
                     AIRFLOW__CORE__DAGS_FOLDER=str(HERE / "user_dags"))  # the user's DAG folder
    done = subprocess.run(
        [str(wheel_venv / "bin" / "python"), str(HERE / "provider_wheel_run.py"),
         str(HERE / "user_dags"), str(HERE / "user_dags" / "mirrorflow_dags.py"), "orders_pipeline", "dr_checks"],
        capture_output=True, text=True, timeout=600, cwd=home, env=env,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])

    # the code that ran is the wheel's, not this checkout's
    assert all(str(wheel_venv) in m for m in out["modules"]), out["modules"]
    assert out["provider"] == _version()
    assert out["hook"] == "mirrorflow_airflow.hooks.mirrorflow.MirrorflowHook"
    assert {"mirrorflow_status", "mirrorflow_metrics", "mirrorflow_notes"} <= set(out["plugins"])
    assert not out["plugin_errors"] and not out["import_errors"], (out["plugin_errors"], out["import_errors"])
    assert {"mirrorflow_replicate__A-B", "mirrorflow_checkpoint__A-B", "mirrorflow_failover__A-B"} <= set(
        out["generated"])

    pipeline = out["runs"]["orders_pipeline"]
    assert pipeline["state"] == "success", done.stderr[-5000:]
    assert pipeline["tasks"] == {"sync_topics": "success", "replicate": "success", "checkpoint": "success",
                                 "my_job": "success"}
    assert pipeline["xcom"]["my_job"] == {"records": 40, "topics": [f"A.{topic}"]}
    # verify passes over what was copied; the failover's dry run plans inside a task group, then ends
    checks = out["runs"]["dr_checks"]
    assert checks["tasks"] == {"verify": "success", "failover.failover_preflight": "success",
                               "failover.approve_failover": "skipped", "failover.failover_commit": "skipped"}
    assert checks["xcom"]["verify"]["ok"] is True
    plan = checks["xcom"]["failover.failover_preflight"]
    assert plan["dry_run"] is True and plan["plan_id"] and plan["not_replicated"] == 0

    # on the target: every record, and the group's exact checkpoints and committed offsets
    copied = consume_all(target, f"A.{topic}", partitions=[0, 1])
    assert sorted(r.value for r in copied) == sorted(f"v{i}".encode() for i in range(40))
    with FlowClients(cfg, cfg.flow("A->B")) as clients:
        store = CheckpointStore.load(clients)
    cps = store.for_group(group)
    for partition, offset in ((0, 7), (1, 12)):
        want = target_offset_of(source, target, topic, f"A.{topic}", partition, offset)
        assert cps[(f"A.{topic}", partition)].downstream_offset == want
    t = Consumer({**target.client_config(), "group.id": group, "enable.auto.commit": False})
    committed = t.committed([TopicPartition(f"A.{topic}", 0), TopicPartition(f"A.{topic}", 1)], timeout=10)
    t.close()
    assert [tp.offset for tp in committed] == [
        target_offset_of(source, target, topic, f"A.{topic}", p, o) for p, o in ((0, 7), (1, 12))]
