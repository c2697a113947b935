"""spark_jobs/ holds the Spark application the DAGs and the CLI submit; a wheel installed without
the repository submits the package's own module (mirrorflow.replication.executors.spark.job_path)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from mirrorflow.replication.executors import spark
from mirrorflow.replication.executors.spark import PACKAGED_JOB, job_path

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "spark_jobs" / "mirrorflow_copy.py"


def test_a_checkout_submits_spark_jobs_a_wheel_the_packaged_module(tmp_path):
    assert spark.JOB_PATH == APP and APP.is_file()
    # pip-installed without the repository: site-packages/mirrorflow has no include/../spark_jobs
    wheel = tmp_path / "lib" / "python3.11" / "site-packages" / "mirrorflow"
    wheel.mkdir(parents=True)
    (tmp_path / "lib" / "python3.11" / "spark_jobs").mkdir()  # a stray folder of that name is not ours
    (tmp_path / "lib" / "python3.11" / "spark_jobs" / "mirrorflow_copy.py").write_text("")
    assert job_path(wheel) == PACKAGED_JOB
    # a checkout whose spark_jobs/ is missing (an image that copied include/ only) falls back too
    bare = tmp_path / "repo" / "include" / "mirrorflow"
    bare.mkdir(parents=True)
    assert job_path(bare) == PACKAGED_JOB


def test_both_applications_run_as_scripts():
    # run as spark-submit runs them (a script, its folder first on sys.path): the same main()
    for app in (APP, PACKAGED_JOB):
        out = subprocess.run([sys.executable, str(app)], capture_output=True, text=True, timeout=60)
        assert (out.returncode, out.stderr.strip()) == (2, f"usage: {app.name} PLAN_JSON"), out


def test_the_image_and_compose_carry_spark_jobs():
    assert "COPY --chown=airflow:root spark_jobs /opt/mirrorflow/spark_jobs" in (ROOT / "Dockerfile").read_text()
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    for service in ("airflow-scheduler", "airflow-apiserver"):
        assert "./spark_jobs:/opt/mirrorflow/spark_jobs" in compose["services"][service]["volumes"]
