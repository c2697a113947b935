"""The Kafka releases the local clusters run (3.9 to 4.4): the version argument, what each release's
broker is given, its Java floor. Pure, no broker: the clusters themselves are started by
tests/integration/test_kafka_versions.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirrorflow_dev import kafka_dist
from mirrorflow_dev.broker_config import server_properties
from mirrorflow_dev.cluster import DevClusters, kafka_versions
from mirrorflow_dev.dev_cluster import DevCluster
from mirrorflow_dev.errors import DevClusterError
from mirrorflow_dev.kafka_release import DEFAULT_VERSION, MATRIX_VERSIONS, KafkaRelease


def test_a_release_is_parsed_and_its_range_checked():
    assert str(KafkaRelease.parse(" 3.9.2 ")) == "3.9.2"
    assert KafkaRelease.parse("3.9.0") < KafkaRelease.parse("4.3.1") < KafkaRelease.parse("4.4.0")
    assert [str(KafkaRelease.parse(v)) for v in MATRIX_VERSIONS] == ["3.9.2", "4.4.0"] and DEFAULT_VERSION == "4.3.1"
    with pytest.raises(DevClusterError) as exc:
        KafkaRelease.parse("3.8.1")
    assert str(exc.value) == ("Kafka 3.8.1 is outside the range the local clusters run: 3.9.0 to 4.4.x (3.9 is the "
                              "first release that formats a single-node KRaft quorum with --standalone)")
    with pytest.raises(DevClusterError, match=r"^Kafka 4\.5\.0 is outside the range the local clusters run: 3\.9\.0 to 4\.4\.x"):
        KafkaRelease.parse("4.5.0")
    for bad in ("4.4", "latest", "4.4.0-rc1", ""):
        with pytest.raises(DevClusterError) as exc:
            KafkaRelease.parse(bad)
        assert str(exc.value) == f"Kafka version {bad!r} is not a release number like 4.3.1"


def test_the_kafka_version_argument_names_one_release_for_all_or_one_per_alias():
    aliases = ["A", "B", "C"]
    assert kafka_versions(aliases, "") == {"A": "4.3.1", "B": "4.3.1", "C": "4.3.1"}
    assert kafka_versions(aliases, "4.4.0") == {"A": "4.4.0", "B": "4.4.0", "C": "4.4.0"}
    assert kafka_versions(aliases, "A=3.9.2, B=4.4.0") == {"A": "3.9.2", "B": "4.4.0", "C": "4.3.1"}
    assert kafka_versions(aliases, "4.4.0,A=3.9.2") == {"A": "3.9.2", "B": "4.4.0", "C": "4.4.0"}
    with pytest.raises(DevClusterError) as exc:
        kafka_versions(aliases, "D=4.4.0")
    assert str(exc.value) == "--kafka-version names D, which is not in --clusters A,B,C"
    with pytest.raises(DevClusterError, match=r"^Kafka 3\.7\.0 is outside the range"):
        kafka_versions(aliases, "B=3.7.0")


def test_up_refuses_a_bad_release_before_starting_anything(tmp_path):
    dev = DevClusters(tmp_path)
    with pytest.raises(DevClusterError) as exc:
        dev.up(["A"], kafka_versions={"Z": "4.4.0"})
    assert str(exc.value) == "Kafka versions given for Z, which is not among A"
    with pytest.raises(DevClusterError, match=r"^Kafka 3\.6\.2 is outside the range"):
        dev.up(["A"], kafka_versions={"A": "3.6.2"})
    assert not (tmp_path / "A").exists() and not (tmp_path / "state.json").exists()


def _props(version: str) -> dict[str, str]:
    c = DevCluster("A", 9092, 9093, kafka_version=version)
    return dict(line.split("=", 1) for line in server_properties(c, Path("/data")).splitlines())


def test_each_release_gets_the_settings_it_knows():
    old, new = _props("3.9.2"), _props("4.4.0")
    share = {k: v for k, v in new.items() if k.startswith("share.coordinator.")}
    # share groups (4.0+): their coordinator's topic sized for one broker; 3.9 has no such settings
    assert share == {"share.coordinator.state.topic.replication.factor": "1",
                     "share.coordinator.state.topic.min.isr": "1",
                     "share.coordinator.state.topic.num.partitions": "1"}
    assert set(new) - set(old) == set(share) and set(old) <= set(new)
    # every release: one combined node, a single-node dynamic quorum (formatted with --standalone)
    for props in (old, new):
        assert props["process.roles"] == "broker,controller" and "controller.quorum.voters" not in props
        assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:9093"
        assert props["transaction.state.log.replication.factor"] == props["transaction.state.log.min.isr"] == "1"


def test_a_state_file_written_before_versions_reads_as_the_default_release(tmp_path):
    (tmp_path / "state.json").write_text(json.dumps({"clusters": {"A": {
        "alias": "A", "port": 1, "controller_port": 2, "pid": None, "security": "plaintext", "folder": ""}}}))
    [c] = DevClusters(tmp_path).clusters().values()
    assert c.kafka_version == "4.3.1" and c.status()["kafka.version"] == "4.3.1"


@pytest.mark.parametrize("version,ok", [("3.9.2", True), ("4.4.0", False)])
def test_the_java_floor_is_the_releases(tmp_path, monkeypatch, version, ok):
    """3.9 brokers run on Java 11, 4.x brokers need 17 (a JAVA_HOME whose java says it is 11)."""
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text('#!/bin/sh\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    release = KafkaRelease.parse(version)
    if ok:
        assert kafka_dist.java_binary(release) == str(java)
    else:
        with pytest.raises(DevClusterError) as exc:
            kafka_dist.java_binary(release)
        assert str(exc.value) == f"Kafka 4.4.0 needs Java 17 or newer; {java} is Java 11"
