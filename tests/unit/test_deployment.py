"""docker-compose.yaml stays a real deployment: its services, config and connections line up."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from mirrorflow import config

ROOT = Path(__file__).resolve().parents[2]


def test_compose_services_and_config_line_up():
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    services = compose["services"]
    assert {"kafka-a", "kafka-b", "postgres", "airflow-init", "airflow-apiserver", "airflow-scheduler",
            "airflow-dag-processor", "airflow-triggerer", "spark-master", "spark-worker", "spark-connect"} <= set(services)
    env = services["airflow-scheduler"]["environment"]
    # MIRRORFLOW_CONFIG is ${MIRRORFLOW_CONFIG:-default}: the secure profile sets it (README "Security")
    cfg_path = re.sub(r"^\$\{MIRRORFLOW_CONFIG:-(.*)\}$", r"\1", env["MIRRORFLOW_CONFIG"]).replace("/opt/mirrorflow/", "")
    cfg = config.load(ROOT / cfg_path)
    # the config's clusters are the compose Kafka services, on their advertised listeners
    for alias, service in (("A", "kafka-a"), ("B", "kafka-b")):
        advertised = services[service]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
        assert advertised == f"PLAINTEXT://{cfg.cluster(alias).bootstrap_servers}"
    # Spark: the config's master is the compose master, and spark_default points at it
    assert cfg.spark.master == "spark://spark-master:7077"
    assert '"host": "spark://spark-master", "port": 7077' in env["AIRFLOW_CONN_SPARK_DEFAULT"]
    # the copy jobs run on the spark-connect service (the default path): its server listens where the
    # config's spark.remote points, on the compose master, with the settings `dev spark up` uses
    from mirrorflow.replication.executors.connect_server import serve_args, server_command
    from mirrorflow.replication.executors.spark_connect import remote_address

    connect = services["spark-connect"]
    assert connect["command"][:3] == ["python", "-m", "mirrorflow.replication.executors.connect_server"]
    served = serve_args(connect["command"][3:])
    assert remote_address(cfg.spark.remote) == (connect["hostname"], served.port) == ("spark-connect", 15002)
    assert (served.master, served.bind, served.driver_host) == (cfg.spark.master, "0.0.0.0", "spark-connect")
    assert "spark.connect.grpc.binding.address=0.0.0.0" in server_command(served.port, served.master, bind=served.bind)
    assert "./include:/opt/mirrorflow/include" in connect["volumes"]  # the package its `python -m` runs
    # the image holds the product only: the secure profile's throw-away CA is made by the development
    # harness's certs module, mounted read-only into that one service (it imports only `cryptography`)
    certs = services["kafka-certs"]
    assert certs["command"][:3] == ["python", "-m", "mirrorflow_dev.certs"]
    assert certs["working_dir"] == "/opt/mirrorflow/devtools" and "./devtools:/opt/mirrorflow/devtools:ro" in certs["volumes"]
    assert [n for n, svc in services.items() if any("devtools" in str(v) for v in svc.get("volumes", []))] == ["kafka-certs"]
    assert "devtools" not in (ROOT / "Dockerfile").read_text()
    # the mounted code is what the image installs (editable) and the DAGs import
    assert "./include:/opt/mirrorflow/include" in services["airflow-scheduler"]["volumes"]
    assert "pip install --no-cache-dir --no-deps -e /opt/mirrorflow" in (ROOT / "Dockerfile").read_text()


def compose_command() -> list[str] | None:
    """`docker compose` (v2) or `docker-compose` (v1.28+, profiles), whichever is installed."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def compose_config(*args: str, env: dict[str, str] | None = None) -> dict:
    cmd = compose_command()
    if cmd is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    out = subprocess.run([*cmd, "-f", str(ROOT / "docker-compose.yaml"), *args, "config"], cwd=ROOT,
                         env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def test_docker_compose_config_validates_with_and_without_the_secure_profile():
    plain = compose_config(env={"MIRRORFLOW_CONFIG": "", "MIRRORFLOW_SECURE_PASSWORD": ""})
    # without the profile its services do not start (compose v2 leaves them out, v1 lists them with it)
    for name in ("kafka-b-secure", "kafka-certs"):
        assert plain["services"].get(name, {"profiles": ["secure"]})["profiles"] == ["secure"]
    assert [n for n, svc in plain["services"].items() if not svc.get("profiles")] == [
        n for n in plain["services"] if n not in ("kafka-b-secure", "kafka-certs")]
    assert plain["services"]["airflow-scheduler"]["environment"]["MIRRORFLOW_CONFIG"] == (
        "/opt/mirrorflow/include/config/mirrorflow.compose.yaml")

    secure_cfg = "/opt/mirrorflow/include/config/mirrorflow.compose-secure.yaml"
    secure = compose_config("--profile", "secure",
                            env={"MIRRORFLOW_CONFIG": secure_cfg, "MIRRORFLOW_SECURE_PASSWORD": "pw-from-env"})
    services = secure["services"]
    assert {"kafka-certs", "kafka-b-secure", "kafka-a", "kafka-b"} <= set(services)
    assert services["airflow-scheduler"]["environment"]["MIRRORFLOW_CONFIG"] == secure_cfg
    cfg = config.load(ROOT / secure_cfg.replace("/opt/mirrorflow/", ""))
    b = cfg.cluster("B")
    assert cfg.spark.remote == "sc://spark-connect:15002"  # the secure flow copies on the Connect server too
    broker = "".join(services["kafka-b-secure"]["command"])
    # the config's B is the secure broker's advertised SASL_SSL listener, trusting the CA kafka-certs writes
    assert f"advertised.listeners=BROKER://{b.bootstrap_servers}" in broker
    assert "listener.security.protocol.map=BROKER:SASL_SSL" in broker and "sasl.enabled.mechanisms=SCRAM-SHA-512" in broker
    assert b.client["security.protocol"] == "SASL_SSL" and b.client["sasl.mechanism"] == "SCRAM-SHA-512"
    assert b.client["ssl.ca.location"] == "/certs/ca.pem" and "/certs" in services["kafka-certs"]["command"]
    assert b.client["sasl.password"] == "${env:MIRRORFLOW_SECURE_PASSWORD}"  # never the password itself
    for name in ("airflow-scheduler", "spark-worker"):  # the tasks and the executors build clients
        svc = services[name]
        assert svc["environment"]["MIRRORFLOW_SECURE_PASSWORD"] == "pw-from-env"
        assert any(str(v).endswith(":/certs:ro") or (isinstance(v, dict) and v.get("target") == "/certs")
                   for v in svc["volumes"])
