"""spark-submit command line: local masters use the installed package, others get a --py-files zip."""
from __future__ import annotations

import zipfile

from mirrorflow.config import parse
from mirrorflow.replication.executors.spark import JOB_PATH, spark_env, submit_command


def cfg(master):
    return parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
                  "flows": {"A->B": {}}, "spark": {"master": master, "conf": {"spark.executor.memory": "2g"}}})


def test_local_master_needs_no_zip(tmp_path):
    cmd = submit_command(cfg("local[*]"), tmp_path / "plan.json")
    assert cmd[cmd.index("--master") + 1] == "local[*]"
    assert "--py-files" not in cmd
    assert "spark.executor.memory=2g" in cmd and "spark.speculation=false" in cmd
    # spark-submit ships the plan (a driver on another host finds it too); results go to the target
    assert cmd[-4:] == ["--files", str(tmp_path / "plan.json"), str(JOB_PATH), str(tmp_path / "plan.json")]


def test_cluster_master_ships_the_core_package(tmp_path):
    cmd = submit_command(cfg("spark://master:7077"), tmp_path / "plan.json")
    z = cmd[cmd.index("--py-files") + 1]
    names = zipfile.ZipFile(z).namelist()
    assert "mirrorflow/__init__.py" in names and "mirrorflow/replication/task/copier.py" in names
    assert not any("__pycache__" in n for n in names)


def test_spark_env_uses_the_venv():
    env = spark_env({"PATH": "/usr/bin"})
    assert env["PATH"].split(":")[0].endswith("/bin") and env["PATH"].endswith("/usr/bin")
    assert env["PYSPARK_PYTHON"].endswith("python") or "python" in env["PYSPARK_PYTHON"]
