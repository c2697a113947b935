"""The pure pieces of the `connect` copy mode: spark.remote in the config, the URL, the package
artifact and the session id a run attaches to, the job's input rows, the dev server's command."""
from __future__ import annotations

import json
import zipfile

import pytest

from mirrorflow.config import parse
from mirrorflow.errors import ConfigError, MirrorflowError
from mirrorflow.replication.executors.connect_server import CONNECT_CLASS, server_command
from mirrorflow.replication.executors.spark import local_slots, spark_tasks
from mirrorflow.replication.executors.spark_connect import (
    bump_generation,
    first_line,
    job_tag,
    package_zip,
    read_generation,
    remote_address,
    session_id,
    task_rows,
)
from mirrorflow.replication.plan.run_plan import Plan, Unit
from mirrorflow_dev.cli.dev import dev_spark_port

CLUSTERS = {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}}


def test_spark_remote_is_read_and_checked():
    cfg = parse({"clusters": CLUSTERS, "flows": {"A->B": {}}, "spark": {"remote": "sc://spark.example:15002"}})
    assert cfg.spark.remote == "sc://spark.example:15002" and cfg.spark.master == "local[*]"
    assert parse({"clusters": CLUSTERS, "flows": {"A->B": {}}}).spark.remote is None
    with pytest.raises(ConfigError) as exc:
        parse({"clusters": CLUSTERS, "spark": {"remote": "http://x:1", "remot": 1}})
    assert sorted(exc.value.problems) == [
        ("spark.remot", "unknown key (did you mean 'remote'?)"),
        ("spark.remote", "must be a Spark Connect URL sc://HOST:PORT, got 'http://x:1'"),
    ]


def test_remote_address():
    assert remote_address("sc://127.0.0.1:15099") == ("127.0.0.1", 15099)
    assert remote_address("sc://spark.example") == ("spark.example", 15002)
    assert remote_address("sc://h:1/;token=x") == ("h", 1)
    assert remote_address("sc://[::1]:7") == ("::1", 7)
    with pytest.raises(MirrorflowError, match="sc://HOST:PORT"):
        remote_address("spark://h:7077")
    with pytest.raises(MirrorflowError, match="sc://HOST:PORT"):
        remote_address("sc://h:port")


def test_package_zip_is_named_by_content_and_rebuilt_only_when_it_changes(tmp_path):
    pkg = tmp_path / "src" / "mirrorflow"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("X = 1\n")
    (pkg / "sub" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "notes.txt").write_text("not shipped")
    out = tmp_path / "out"
    out.mkdir()
    first = package_zip(out, pkg)
    assert first.path.name == f"mirrorflow-{first.digest}.zip"
    assert sorted(zipfile.ZipFile(first.path).namelist()) == [
        "mirrorflow/__init__.py", "mirrorflow/__init__.pyc", "mirrorflow/sub/a.py", "mirrorflow/sub/a.pyc"]
    mtime = first.path.stat().st_mtime_ns
    assert package_zip(out, pkg) == first and first.path.stat().st_mtime_ns == mtime  # reused, not rebuilt
    (pkg / "sub" / "a.py").write_text("X = 2\n")
    second = package_zip(out, pkg)
    assert second.digest != first.digest and second.path != first.path
    assert zipfile.ZipFile(second.path).read("mirrorflow/sub/a.py") == b"X = 2\n"


def test_workers_import_the_package_zip_from_its_bytecode_without_compiling(tmp_path, monkeypatch):
    """A Python worker imports the artifact through zipimport, which cannot cache what it compiles:
    the zip carries each module's bytecode, used whatever the files' times."""
    import zipimport

    z = package_zip(tmp_path)
    compiled: list[str] = []
    real = zipimport._compile_source
    monkeypatch.setattr(zipimport, "_compile_source", lambda path, src: compiled.append(path) or real(path, src))
    importer = zipimport.zipimporter(f"{z.path}/mirrorflow/replication/task/")  # as the package's __path__ holds it
    code = importer.get_code("mirrorflow.replication.task.copier")
    assert compiled == [] and "PartitionCopy" in code.co_names
    assert code.co_filename == "mirrorflow/replication/task/copier.py"  # tracebacks name the source
    assert "class PartitionCopy" in importer.get_source("mirrorflow.replication.task.copier")  # and show its lines
    # bytecode of another Python version is skipped: the source is compiled as before
    bad = tmp_path / "other.zip"
    with zipfile.ZipFile(z.path) as src, zipfile.ZipFile(bad, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            dst.writestr(name, b"\0\0\r\n" + data[4:] if name.endswith(".pyc") else data)
    assert zipimport.zipimporter(f"{bad}/mirrorflow/").get_code("mirrorflow.errors").co_filename.endswith(
        "mirrorflow/errors.py")
    assert compiled and compiled[-1].endswith("mirrorflow/errors.py")


def test_the_real_package_zip_holds_the_copier(tmp_path):
    z = package_zip(tmp_path)
    names = zipfile.ZipFile(z.path).namelist()
    assert "mirrorflow/replication/task/copier.py" in names and "mirrorflow/replication/executors/spark_connect.py" in names


def test_session_id_is_stable_per_server_package_and_generation(tmp_path):
    sid = session_id("sc://h:1", "abc", 0)
    assert sid == session_id("sc://h:1", "abc", 0)
    assert len({sid, session_id("sc://h:2", "abc", 0), session_id("sc://h:1", "abd", 0),
                session_id("sc://h:1", "abc", 1)}) == 4
    assert read_generation("sc://h:1", tmp_path) == 0
    assert bump_generation("sc://h:1", tmp_path, 0) == 1
    assert bump_generation("sc://h:1", tmp_path, 0) == 2  # another run bumped it meanwhile: past both
    assert read_generation("sc://h:1", tmp_path) == 2 and read_generation("sc://h:2", tmp_path) == 0


def test_task_rows_are_the_plans_tasks_in_order_without_secrets():
    units = [[Unit("t", 0, "A.t", 0, 5)], [Unit("t", 1, "A.t", 3, 4)]]
    plan = Plan("A->B", "/c.yaml", units, lease={"owner": "o", "who": "w"})
    rows = task_rows(plan)
    assert [[Unit.from_dict(u) for u in json.loads(r)] for r in rows] == units
    assert all(set(u) == set(Unit.__dataclass_fields__) for r in rows for u in json.loads(r))


def test_dev_server_command_binds_to_loopback():
    cmd = server_command(15099, "local[2]")
    assert cmd[cmd.index("--class") + 1] == CONNECT_CLASS and cmd[cmd.index("--master") + 1] == "local[2]"
    confs = dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--conf")
    assert confs["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert confs["spark.connect.grpc.binding.port"] == "15099"
    assert confs["spark.driver.bindAddress"] == "127.0.0.1" and confs["spark.ui.enabled"] == "false"
    assert cmd[-1] == "spark-internal"


def test_dev_server_can_listen_beyond_loopback_when_told():
    cmd = server_command(15002, "spark://m:7077", bind="0.0.0.0", driver_host="spark-connect")
    confs = dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--conf")
    assert confs["spark.connect.grpc.binding.address"] == "0.0.0.0" == confs["spark.driver.bindAddress"]
    assert confs["spark.driver.host"] == "spark-connect"


def test_dev_spark_up_takes_the_port_of_the_configs_local_remote():
    def cfg(spark):
        return parse({"clusters": CLUSTERS, "flows": {"A->B": {}}, "spark": spark})

    assert dev_spark_port(cfg({"remote": "sc://127.0.0.1:15099"})) == 15099
    assert dev_spark_port(cfg({"remote": "sc://localhost"})) == 15002
    assert dev_spark_port(cfg({"remote": "sc://spark-connect:15002"})) is None  # not this machine's to start
    assert dev_spark_port(cfg({})) is None and dev_spark_port(None) is None


def test_the_embedded_default_runs_on_a_local_connect_server():
    from mirrorflow import config as config_mod

    cfg = config_mod.load(config_mod.default_config_path())
    assert cfg.spark.remote == "sc://127.0.0.1:15002" and dev_spark_port(cfg) == 15002


def test_job_tag_is_the_runs_and_a_valid_spark_tag():
    assert job_tag(Plan("A->B", None, [], run="cli-20261126T2231-ab12")) == "mirrorflow-cli-20261126T2231-ab12"
    tag = job_tag(Plan("A->B", None, [], run="airflow:scheduled__2026-11-26T22:30:00+00:00,x"))
    assert tag.startswith("mirrorflow-airflow_scheduled__2026-11-26T22_30_00_00_00_x") and "," not in tag
    assert job_tag(Plan("A->B", None, [])) != job_tag(Plan("A->B", None, []))  # no run id: a tag of its own


def test_first_line_of_a_grpc_error_is_its_details():
    grpc_text = (
        "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n"
        '\tdetails = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:4: Connection refused"\n'
        '\tdebug_error_string = "UNKNOWN:Error received from peer"\n>'
    )
    assert first_line(RuntimeError(grpc_text)) == (
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:4: Connection refused"
    )
    assert first_line(RuntimeError("\n  first\nsecond")) == "first" and first_line(KeyError()) == "KeyError"


def test_a_local_server_states_its_task_slots_and_the_job_packs_its_tasks_into_them(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert [local_slots(m) for m in ("local", "local[3]", "local[*]", "local[4,2]", "spark://m:7077", "yarn")] == [
        1, 3, 2, 4, None, None
    ]
    assert "spark.default.parallelism=3" in server_command(15099, "local[3]")
    assert not any("default.parallelism" in a for a in server_command(15002, "spark://m:7077"))
    # what a deployment states itself wins
    cmd = server_command(15099, "local[3]", extra_conf={"spark.default.parallelism": "12"})
    assert "spark.default.parallelism=12" in cmd and "spark.default.parallelism=3" not in cmd
    # 8 planned tasks: on 2 slots 2 Spark tasks (4 tasks each at once), on 16 slots or unknown 8, none: 1
    assert [spark_tasks(8, 2), spark_tasks(8, 16), spark_tasks(8, None), spark_tasks(0, 2)] == [2, 8, 8, 1]
