"""docker-compose.yaml stays a real deployment: its services, config and connections line up."""
from __future__ import annotations

from pathlib import Path

import yaml

from mirrorflow import config

ROOT = Path(__file__).resolve().parents[2]


def test_compose_services_and_config_line_up():
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    services = compose["services"]
    assert {"kafka-a", "kafka-b", "postgres", "airflow-init", "airflow-apiserver", "airflow-scheduler",
            "airflow-dag-processor", "airflow-triggerer", "spark-master", "spark-worker"} <= set(services)
    env = services["airflow-scheduler"]["environment"]
    cfg_path = env["MIRRORFLOW_CONFIG"].replace("/opt/mirrorflow/", "")
    cfg = config.load(ROOT / cfg_path)
    # the config's clusters are the compose Kafka services, on their advertised listeners
    for alias, service in (("A", "kafka-a"), ("B", "kafka-b")):
        advertised = services[service]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
        assert advertised == f"PLAINTEXT://{cfg.cluster(alias).bootstrap_servers}"
    # Spark: the config's master is the compose master, and spark_default points at it
    assert cfg.spark.master == "spark://spark-master:7077"
    assert '"host": "spark://spark-master", "port": 7077' in env["AIRFLOW_CONN_SPARK_DEFAULT"]
    # the mounted code is what the image installs (editable) and the DAGs import
    assert "./include:/opt/mirrorflow/include" in services["airflow-scheduler"]["volumes"]
    assert "pip install --no-cache-dir --no-deps -e /opt/mirrorflow" in (ROOT / "Dockerfile").read_text()
