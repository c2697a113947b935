"""The foundation works on real brokers: topics, records, groups, ACLs, and the dev CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   ConfigResource, ResourcePatternType, ResourceType)

from mirrorflow_dev.processes import free_port
from tests.support import admin, consume_all, create_topic, produce

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_topic_configs_records_and_group_offsets(source, topic_name):
    create_topic(source, topic_name, partitions=2,
                 config={"cleanup.policy": "delete", "retention.ms": "3600000"})
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    a = admin(source)  # keep the client alive until its futures resolve
    configs = a.describe_configs([res])[res].result(10)
    assert configs["cleanup.policy"].value == "delete"
    assert configs["retention.ms"].value == "3600000"

    # recent timestamps: with retention.ms of an hour, older records may be deleted by the broker's
    # next retention check before they are read back
    ts = int(time.time() * 1000) - 60_000
    records = [
        {"partition": 0, "key": b"k0", "value": b"v0", "headers": [("h", b"1"), ("h", b"2")], "timestamp": ts},
        {"partition": 1, "key": b"k1", "value": None, "headers": [("empty", None)], "timestamp": ts + 1},
        {"partition": 1, "key": None, "value": b"x" * 1000, "timestamp": ts + 2},
    ]
    produce(source, topic_name, records)
    got = consume_all(source, topic_name)
    assert [(r.partition, r.offset, r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (0, 0, b"k0", b"v0", (("h", b"1"), ("h", b"2")), ts),
        (1, 0, b"k1", None, (("empty", None),), ts + 1),
        (1, 1, None, b"x" * 1000, (), ts + 2),
    ]

    group = f"g-{topic_name}"
    c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic_name, 1, 2, "meta")], asynchronous=False)
    c.close()
    from confluent_kafka import ConsumerGroupTopicPartitions
    fut = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    offsets = {(tp.topic, tp.partition): (tp.offset, tp.metadata) for tp in fut.result(10).topic_partitions}
    assert offsets == {(topic_name, 1): (2, "meta")}


def test_sasl_cluster_enforces_acls(sasl_cluster, topic_name):
    create_topic(sasl_cluster, topic_name)
    # alice has no ACL: her produce is refused
    p = Producer({**sasl_cluster.client_config("alice"), "message.timeout.ms": 10000})
    errors = []
    p.produce(topic_name, b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert errors and errors[0] is not None and errors[0].name() == "TOPIC_AUTHORIZATION_FAILED"

    # a wrong password is refused at authentication
    bad = {**sasl_cluster.client_config("alice"), "sasl.password": "wrong"}
    from confluent_kafka.admin import AdminClient
    with pytest.raises(KafkaException) as exc:
        AdminClient(bad).list_topics(timeout=5)
    assert "Authentication" in str(exc.value) or "AUTHENTICATION" in str(exc.value) or "_TRANSPORT" in str(exc.value)

    acl = AclBinding(ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.WRITE, AclPermissionType.ALLOW)
    a = admin(sasl_cluster)
    a.create_acls([acl])[acl].result(10)
    flt = AclBindingFilter(ResourceType.TOPIC, topic_name, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    found = a.describe_acls(flt).result(10)
    assert [(b.principal, b.operation, b.permission_type) for b in found] == [
        ("User:alice", AclOperation.WRITE, AclPermissionType.ALLOW)]

    # with the ACL in place alice may write
    p = Producer(sasl_cluster.client_config("alice"))
    errors.clear()
    p.produce(topic_name, b"y", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert errors == [None]


def _cli(args, env):
    return subprocess.run([sys.executable, "-m", "mirrorflow.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def _free_pair() -> int:
    """A free port whose successor is free too: a configured cluster's controller takes port + 1."""
    import socket
    while True:
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue


def test_dev_cli_up_status_down_twice_without_maven(tmp_path):
    pa, pb = _free_pair(), _free_pair()
    cfg = tmp_path / "mf.yaml"
    cfg.write_text(f"clusters:\n  A: {{bootstrap.servers: '127.0.0.1:{pa}'}}\n  B: {{bootstrap.servers: '127.0.0.1:{pb}'}}\n")
    env = {**os.environ, "MIRRORFLOW_DEV_HOME": str(tmp_path / "dev"), "MIRRORFLOW_CONFIG": str(cfg),
           "PYTHONPATH": os.path.join(ROOT, "include")}
    for round_ in range(2):
        if round_ == 1:  # the jars are cached: a second run must not call Maven (so needs no network)
            trap = tmp_path / "bin"
            trap.mkdir()
            (trap / "mvn").write_text("#!/bin/sh\necho 'mvn must not run' >&2\nexit 3\n")
            (trap / "mvn").chmod(0o755)
            env["PATH"] = f"{trap}:{env['PATH']}"
        up = _cli(["dev", "up", "--sasl", "B"], env)
        assert up.returncode == 0, up.stderr
        assert f"A: 127.0.0.1:{pa}" in up.stdout and f"B: 127.0.0.1:{pb}" in up.stdout
        status = json.loads(_cli(["dev", "status", "--json"], env).stdout)
        assert status["A"]["running"] and status["B"]["running"]
        assert status["B"]["sasl"] and set(status["B"]["users"]) == {"admin", "alice", "bob"}
        pids = [status["A"]["pid"], status["B"]["pid"]]
        down = _cli(["dev", "down"], env)
        assert down.returncode == 0 and "stopped: A, B" in down.stdout
        for pid in pids:
            assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z"


def test_dev_cli_port_in_use_is_one_clear_error(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    cfg = tmp_path / "mf.yaml"
    cfg.write_text(f"clusters:\n  A: {{bootstrap.servers: '127.0.0.1:{port}'}}\n")
    env = {**os.environ, "MIRRORFLOW_DEV_HOME": str(tmp_path / "dev"), "MIRRORFLOW_CONFIG": str(cfg),
           "PYTHONPATH": os.path.join(ROOT, "include")}
    r = _cli(["dev", "up"], env)
    s.close()
    assert r.returncode != 0
    assert r.stderr.strip() == f"mirrorflow: error: port {port} for cluster A is already in use on 127.0.0.1 " \
                               "(another Kafka or program holds it; stop it or pick other ports)"


def _bin(tmp_path, name, **tools):
    """A PATH folder holding only the given tools (name -> target path or script text)."""
    d = tmp_path / name
    d.mkdir()
    for tool, target in tools.items():
        if target.startswith("#!"):
            (d / tool).write_text(target)
            (d / tool).chmod(0o755)
        else:
            (d / tool).symlink_to(target)
    return str(d)


@pytest.mark.parametrize("case", ["no-java", "no-maven", "download-fails"])
def test_dev_cli_missing_tools_are_one_clear_error(tmp_path, case):
    import shutil
    env = {**os.environ, "MIRRORFLOW_DEV_HOME": str(tmp_path / "dev"), "PYTHONPATH": os.path.join(ROOT, "include"),
           "MIRRORFLOW_CACHE": str(tmp_path / "cache")}  # an empty cache: the jars would have to be fetched
    env.pop("JAVA_HOME", None)
    java = shutil.which("java")
    if case == "no-java":
        env["PATH"] = _bin(tmp_path, "bin")
    elif case == "no-maven":
        env["PATH"] = _bin(tmp_path, "bin", java=java)
    else:
        env["PATH"] = _bin(tmp_path, "bin", java=java, mvn="#!/bin/sh\necho '[ERROR] Could not transfer artifact' >&2\nexit 1\n")
    r = _cli(["dev", "up", "--clusters", "A"], env)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    if case == "no-java":
        assert lines == ["mirrorflow: error: Java was not found: install Java 17 or newer and put `java` on PATH (or set JAVA_HOME)"]
    elif case == "no-maven":
        assert lines == ["mirrorflow: error: Maven was not found: install Maven (`mvn`) to fetch Apache Kafka 4.3.1 "
                         f"(needed once; cached in {tmp_path / 'cache' / 'kafka-4.3.1'})"]
    else:
        assert lines[0] == "mirrorflow: error: could not fetch Apache Kafka 4.3.1 from Maven Central (mvn exited 1):"
        assert "Could not transfer artifact" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "cache" / "kafka-4.3.1" / "libs").exists()  # nothing half-fetched is taken for done
