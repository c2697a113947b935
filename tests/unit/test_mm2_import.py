"""`mirrorflow config import`: mm2.properties and Strimzi KafkaMirrorMaker2 resources become mirrorflow YAML
that loads as the same configuration, with secrets turned into ${env:...} references."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mirrorflow.config import parse
from mirrorflow.errors import ConfigError
from mirrorflow.config.mm2_import import convert, import_file
from mirrorflow.config.mm2_import.properties_file import parse_properties

ROOT = Path(__file__).resolve().parents[2]

MM2_PROPERTIES = r"""
# a dedicated-mode MM2 configuration
clusters = primary, backup
primary.bootstrap.servers = p1:9092,p2:9092
backup.bootstrap.servers = b1:9092

primary.security.protocol = SASL_SSL
primary.sasl.mechanism = SCRAM-SHA-512
primary.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="mm2" password="s3cr3t!";
primary.ssl.truststore.location = /etc/kafka/truststore.jks
primary.ssl.truststore.password = changeit
backup.producer.compression.type = zstd

primary->backup.enabled = true
primary->backup.topics = orders.*, payments
primary->backup.topics.blacklist = .*\\.tmp
primary->backup.groups = .*
primary->backup.sync.group.offsets.enabled = true
primary->backup.emit.checkpoints.interval.seconds = 30
backup->primary.enabled = false

replication.factor = 3
tasks.max = 8
sync.topic.acls.enabled = false
replication.policy.separator = _
checkpoints.topic.replication.factor = 3
key.converter = org.apache.kafka.connect.converters.ByteArrayConverter
"""


def test_mm2_properties_convert_to_the_expected_yaml():
    imp = convert(MM2_PROPERTIES, "mm2.properties")
    assert imp.document() == {
        "clusters": {
            "primary": {"bootstrap.servers": "p1:9092,p2:9092", "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mm2",
                        "sasl.password": "${env:MM2_PRIMARY_SASL_PASSWORD}"},
            "backup": {"bootstrap.servers": "b1:9092"},
        },
        "defaults": {"replication.factor": 3, "tasks.max": 8, "sync.topic.acls.enabled": False,
                     "replication.policy.separator": "_", "checkpoints.topic.replication.factor": 3},
        "flows": {
            "primary->backup": {"enabled": True, "topics": "orders.*, payments", "topics.exclude": r".*\.tmp",
                                "groups": ".*", "sync.group.offsets.enabled": True,
                                "emit.checkpoints.interval.seconds": 30, "producer.compression.type": "zstd"},
            "backup->primary": {"enabled": False},
        },
    }
    assert imp.env_vars == {"MM2_PRIMARY_SASL_PASSWORD": "the SASL password of 'mm2' (primary.sasl.jaas.config)"}
    assert imp.notes == [
        "primary.ssl.truststore.location: Java key stores are not supported by librdkafka; convert "
        "/etc/kafka/truststore.jks to PEM and set ssl.ca.location (CA certificate) (not imported)",
        "key.converter: not imported (records are copied as bytes)",
        "primary->backup.topics.blacklist: deprecated MM2 name, imported as topics.exclude",
    ]


def test_imported_yaml_loads_as_the_same_configuration_and_never_holds_the_password(tmp_path, monkeypatch):
    src = tmp_path / "mm2.properties"
    src.write_text(MM2_PROPERTIES)
    text = import_file(src)
    assert "s3cr3t!" not in text and "changeit" not in text
    assert text.startswith("# mirrorflow configuration imported from mm2.properties by `mirrorflow config import`.\n"
                           "# Secrets are not copied: export these variables where mirrorflow runs:\n"
                           "#   MM2_PRIMARY_SASL_PASSWORD: the SASL password of 'mm2' (primary.sasl.jaas.config)\n")
    cfg = parse(yaml.safe_load(text))
    flow = cfg.flow("primary->backup")
    assert flow["topics"] == ["orders.*", "payments"] and flow["topics.exclude"] == [r".*\.tmp"]
    assert flow.replication_factor == 3 and flow.parallelism == 8 and flow["sync.topic.acls.enabled"] is False
    assert flow["replication.policy.separator"] == "_" and flow["emit.checkpoints.interval.seconds"] == 30
    assert flow.client_overrides("target", "producer") == {"compression.type": "zstd"}
    assert cfg.flow("backup->primary").enabled is False
    monkeypatch.setenv("MM2_PRIMARY_SASL_PASSWORD", "s3cr3t!")
    assert cfg.clusters["primary"].client_config()["sasl.password"] == "s3cr3t!"


def test_properties_syntax():
    props = parse_properties("a=1\nb : 2\nc 3\n! comment\n  # comment\nd = x \\\n   y\\\\\ne=\nf.g = h=i\n"
                             "k\\:ey = v\\tw\n")
    assert props == {"a": "1", "b": "2", "c": "3", "d": "x y\\", "e": "", "f.g": "h=i", "k:ey": "v\tw"}


def test_top_level_client_settings_apply_to_every_cluster_and_plain_login():
    imp = convert("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
                  "security.protocol = SASL_PLAINTEXT\nsasl.mechanism = PLAIN\n"
                  "sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
                  "username='svc' password='pw';\nB.sasl.jaas.config = "
                  "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"b\" password=\"bpw\";\n"
                  "A->B.enabled = true\n")
    assert imp.clusters == {
        "A": {"bootstrap.servers": "a:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.username": "svc", "sasl.password": "${env:MM2_A_SASL_PASSWORD}"},
        "B": {"bootstrap.servers": "b:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.username": "b", "sasl.password": "${env:MM2_B_SASL_PASSWORD}"},
    }
    assert imp.flows == {"A->B": {"enabled": True}} and imp.defaults == {}


def test_key_stores_pkcs12_is_kept_jks_is_not():
    imp = convert("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
                  "A.security.protocol = SSL\nA.ssl.keystore.type = PKCS12\nA.ssl.keystore.location = /k.p12\n"
                  "A.ssl.keystore.password = kspw\nA.ssl.key.password = kpw\n"
                  "B.ssl.keystore.location = /k.jks\nB.ssl.keystore.password = x\nA->B.enabled = true\n")
    assert imp.clusters["A"] == {"bootstrap.servers": "a:1", "security.protocol": "SSL",
                                 "ssl.keystore.location": "/k.p12",
                                 "ssl.keystore.password": "${env:MM2_A_SSL_KEYSTORE_PASSWORD}",
                                 "ssl.key.password": "${env:MM2_A_SSL_KEY_PASSWORD}"}
    assert imp.clusters["B"] == {"bootstrap.servers": "b:1"}
    assert imp.notes == ["B.ssl.keystore.location: Java key stores are not supported by librdkafka; convert /k.jks "
                         "to PEM and set ssl.certificate.location and ssl.key.location (not imported)"]
    assert set(imp.env_vars) == {"MM2_A_SSL_KEYSTORE_PASSWORD", "MM2_A_SSL_KEY_PASSWORD"}


def test_identity_policy_class_and_unknown_properties():
    imp = convert("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
                  "A->B.enabled = true\n"
                  "A->B.replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
                  "A->B.frobnicate = yes\n")
    assert imp.flows["A->B"] == {"enabled": True, "replication.policy.class": "IdentityReplicationPolicy"}
    assert imp.notes == ["A->B.frobnicate: not imported (not an MM2 flow property mirrorflow knows)"]


def test_no_enabled_pair_is_pointed_out():
    imp = convert("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.topics = x\n")
    assert imp.flows == {"A->B": {"enabled": False, "topics": "x"}}
    assert imp.notes == ["no `A->B.enabled = true` line: no flow is enabled (MM2 dedicated mode runs none either)"]


def test_properties_without_clusters_is_a_clear_error():
    with pytest.raises(ConfigError) as exc:
        convert("A.bootstrap.servers = a:1\n", "mm2.properties")
    assert str(exc.value) == "mm2.properties: clusters: missing: an mm2.properties lists its cluster aliases in `clusters`"


STRIMZI = """
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: my-mirror-maker-2
spec:
  version: 4.0.0
  replicas: 1
  connectCluster: "cluster-b"
  clusters:
  - alias: "cluster-a"
    bootstrapServers: cluster-a-kafka-bootstrap:9093
    tls:
      trustedCertificates:
        - secretName: cluster-a-cluster-ca-cert
          certificate: ca.crt
    authentication:
      type: scram-sha-512
      username: mm2-user
      passwordSecret:
        secretName: mm2-user
        password: password
  - alias: "cluster-b"
    bootstrapServers: cluster-b-kafka-bootstrap:9092
    config:
      config.storage.replication.factor: -1
  mirrors:
  - sourceCluster: "cluster-a"
    targetCluster: "cluster-b"
    sourceConnector:
      tasksMax: 3
      config:
        replication.factor: -1
        offset-syncs.topic.replication.factor: -1
        sync.topic.acls.enabled: "false"
        refresh.topics.interval.seconds: 300
    checkpointConnector:
      config:
        checkpoints.topic.replication.factor: -1
        sync.group.offsets.enabled: true
    topicsPattern: "orders.*|payments"
    topicsExcludePattern: ".*-tmp"
    groupsPattern: "group1|group2"
"""


def test_strimzi_resource_converts_to_the_expected_yaml():
    imp = convert(STRIMZI, "kmm2.yaml")
    assert imp.document() == {
        "clusters": {
            "cluster-a": {"bootstrap.servers": "cluster-a-kafka-bootstrap:9093", "security.protocol": "SASL_SSL",
                          "ssl.ca.location": "/etc/mirrorflow/certs/cluster-a-cluster-ca-cert/ca.crt",
                          "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mm2-user",
                          "sasl.password": "${env:MM2_CLUSTER_A_SASL_PASSWORD}"},
            "cluster-b": {"bootstrap.servers": "cluster-b-kafka-bootstrap:9092"},
        },
        "flows": {"cluster-a->cluster-b": {
            "enabled": True, "replication.factor": -1, "state.topic.replication.factor": -1,
            "sync.topic.acls.enabled": False, "refresh.topics.interval.seconds": 300, "tasks.max": 3,
            "checkpoints.topic.replication.factor": -1, "sync.group.offsets.enabled": True,
            "topics": "orders.*|payments", "topics.exclude": ".*-tmp", "groups": "group1|group2"}},
    }
    assert imp.notes[1:] == [
        "clusters.cluster-b.config.config.storage.replication.factor: not imported (a Kafka Connect worker setting)",
        "spec.mirrors[0].sourceConnector.config.offset-syncs.topic.replication.factor: imported as "
        "state.topic.replication.factor (mirrorflow's exact offset map, kept in the flow's state topics, "
        "replaces offset syncs)",
    ]
    assert imp.env_vars == {"MM2_CLUSTER_A_SASL_PASSWORD": "key 'password' of Secret 'mm2-user'"}
    cfg = parse(yaml.safe_load(imp.to_yaml("kmm2.yaml")))
    flow = cfg.flow("cluster-a->cluster-b")
    assert flow["groups"] == ["group1|group2"] and flow.replication_factor == -1 and flow.parallelism == 3


def test_strimzi_v1_target_and_source_layout_with_tls_client_auth():
    imp = convert("""
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata: {name: mm2}
spec:
  target:
    alias: dr
    bootstrapServers: dr:9093
    tls: {trustedCertificates: [{secretName: dr-ca, pattern: "*.crt"}]}
    authentication:
      type: tls
      certificateAndKey: {secretName: mm2-user, certificate: user.crt, key: user.key}
  mirrors:
  - source: {alias: prod, bootstrapServers: prod:9092}
    sourceConnector:
      config: {replication.policy.class: io.strimzi.kafka.connect.mirror.IdentityReplicationPolicy}
    topicsPattern: ".*"
""")
    assert imp.clusters == {
        "dr": {"bootstrap.servers": "dr:9093", "security.protocol": "SSL",
               "ssl.ca.location": "/etc/mirrorflow/certs/dr-ca",
               "ssl.certificate.location": "/etc/mirrorflow/certs/mm2-user/user.crt",
               "ssl.key.location": "/etc/mirrorflow/certs/mm2-user/user.key"},
        "prod": {"bootstrap.servers": "prod:9092"},
    }
    assert imp.flows == {"prod->dr": {"enabled": True, "replication.policy.class": "IdentityReplicationPolicy",
                                      "topics": ".*"}}


def test_strimzi_connector_states_become_the_flow_state():
    imp = convert("""
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata: {name: mm2}
spec:
  target: {alias: dr, bootstrapServers: dr:9092}
  mirrors:
  - source: {alias: a, bootstrapServers: a:9092}
    sourceConnector: {state: paused}
    checkpointConnector: {state: stopped}
  - source: {alias: b, bootstrapServers: b:9092}
    sourceConnector: {pause: true}
  - source: {alias: c, bootstrapServers: c:9092}
    sourceConnector: {state: stopped}
""")
    assert {k: v.get("state") for k, v in imp.flows.items()} == {"a->dr": "paused", "b->dr": "paused",
                                                                  "c->dr": "stopped"}
    assert any("checkpointConnector.state: stopped is not imported" in n for n in imp.notes), imp.notes
    with pytest.raises(ConfigError, match=r"spec.mirrors\[0\].sourceConnector.state: expected running, paused"):
        convert("""
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata: {name: mm2}
spec:
  target: {alias: dr, bootstrapServers: dr:9092}
  mirrors:
  - source: {alias: a, bootstrapServers: a:9092}
    sourceConnector: {state: sleeping}
""")


def test_config_import_cli_prints_or_writes(tmp_path):
    src = tmp_path / "kmm2.yaml"
    src.write_text(STRIMZI)
    code = "import sys; from mirrorflow.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "include")}
    r = subprocess.run([sys.executable, "-c", code, "config", "import", str(src)], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout) == convert(STRIMZI).document()
    out = tmp_path / "mirrorflow.yaml"
    r = subprocess.run([sys.executable, "-c", code, "config", "import", str(src), "-o", str(out)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert (r.returncode, r.stdout) == (0, f"wrote {out}\n")
    assert out.read_text() == convert(STRIMZI).to_yaml("kmm2.yaml")
    r = subprocess.run([sys.executable, "-c", code, "config", "import", str(tmp_path / "nope.properties")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2
    assert r.stderr == (f"mirrorflow: error: {tmp_path / 'nope.properties'}: cannot read "
                        f"{tmp_path / 'nope.properties'}: No such file or directory\n")


# The connector configs of the disaster-recovery guide and Strimzi's reference
# (/work/shared/source-docs/002_… and 003_…), with every MM2 property they set.
SOURCE_DOC_STRIMZI = """
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata: {name: my-mirror-maker2}
spec:
  clusters:
  - {alias: my-cluster-source, bootstrapServers: my-cluster-source-kafka-bootstrap:9092}
  - {alias: my-cluster-target, bootstrapServers: my-cluster-target-kafka-bootstrap:9092}
  mirrors:
  - sourceCluster: my-cluster-source
    targetCluster: my-cluster-target
    topicsPattern: "topic1|topic2|topic3"
    groupsPattern: "group1|group2|group3"
    sourceConnector:
      tasksMax: 10
      config:
        replication.factor: 1
        offset-syncs.topic.replication.factor: 1
        sync.topic.acls.enabled: "false"
        refresh.topics.interval.seconds: 60
        replication.policy.class: "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
        offset-syncs.topic.location: target
        heartbeats.replication.enabled: "false"
        consumer.isolation.level: read_committed
    heartbeatConnector:
      config:
        heartbeats.topic.replication.factor: 1
        emit.heartbeats.interval.seconds: 5
    checkpointConnector:
      config:
        checkpoints.topic.replication.factor: 1
        refresh.groups.interval.seconds: 600
        refresh.groups.enabled: false
        sync.group.offsets.enabled: true
        sync.group.offsets.interval.seconds: 60
        emit.checkpoints.interval.seconds: 60
        sync.topic.configs.interval.seconds: 900
        sync.topic.acls.interval.seconds: 1200
        consumer.poll.timeout.ms: 500
"""


def test_source_doc_properties_import_and_validate_each_honoured_or_noted():
    imp = convert(SOURCE_DOC_STRIMZI, "kmm2.yaml")
    body = imp.flows["my-cluster-source->my-cluster-target"]
    assert body == {
        "enabled": True, "replication.factor": 1, "state.topic.replication.factor": 1,
        "sync.topic.acls.enabled": False, "refresh.topics.interval.seconds": 60,
        "replication.policy.class": "IdentityReplicationPolicy", "heartbeats.replication.enabled": False,
        "tasks.max": 10,
        "checkpoints.topic.replication.factor": 1, "refresh.groups.interval.seconds": 600,
        "sync.group.offsets.enabled": True, "sync.group.offsets.interval.seconds": 60,
        "emit.checkpoints.interval.seconds": 60, "sync.topic.configs.interval.seconds": 900,
        "sync.topic.acls.interval.seconds": 1200, "heartbeats.topic.replication.factor": 1,
        "emit.heartbeats.interval.seconds": 5, "topics": "topic1|topic2|topic3", "groups": "group1|group2|group3",
    }
    where = "spec.mirrors[0]"
    assert imp.notes == [
        f"{where}.sourceConnector.config.offset-syncs.topic.replication.factor: imported as "
        "state.topic.replication.factor (mirrorflow's exact offset map, kept in the flow's state topics, "
        "replaces offset syncs)",
        f"{where}.sourceConnector.config.offset-syncs.topic.location: not imported (mirrorflow writes no "
        "offset-syncs topic; its offset map is always kept on the target, in the flow's state topics; remove it)",
        f"{where}.sourceConnector.config.consumer.isolation.level: not imported (mirrorflow sets isolation.level "
        "itself (read_committed keeps aborted source transactions out of the copy); it cannot be overridden)",
        f"{where}.checkpointConnector.config.refresh.groups.enabled: not imported (false is not supported: "
        "mirrorflow has no long-running task whose start would list the groups once; groups are looked up "
        "every refresh.groups.interval.seconds (select them with groups / groups.exclude))",
        f"{where}.checkpointConnector.config.consumer.poll.timeout.ms: not imported (a copy reads a planned "
        "offset range and returns as soon as it reaches the range's end, so a source poll timeout has nothing "
        "to bound here; remove it)",
    ]
    flow = parse(yaml.safe_load(imp.to_yaml("kmm2.yaml"))).flow("my-cluster-source->my-cluster-target")
    assert flow["checkpoints.topic.replication.factor"] == 1 and flow["heartbeats.topic.replication.factor"] == 1
    assert flow["state.topic.replication.factor"] == 1 and flow["emit.heartbeats.interval.seconds"] == 5


def test_source_doc_connector_configs_as_mm2_properties_import_and_validate():
    # the MirrorSourceConnector and MirrorCheckpointConnector configs of the DR guide, as an mm2.properties
    text = "\n".join([
        "clusters = A, B", "A.bootstrap.servers = a:9092", "B.bootstrap.servers = b:9092", "A->B.enabled = true",
        "A->B.tasks.max = 30", "A->B.offset-syncs.topic.location = target",
        "A->B.replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "A->B.heartbeats.replication.enabled = false", "A->B.replication.factor = -1",
        "A->B.offset-syncs.topic.replication.factor = -1", "A->B.sync.topic.acls.enabled = false",
        "A->B.consumer.isolation.level = read_committed", "A->B.checkpoints.topic.replication.factor = -1",
        "A->B.sync.group.offsets.enabled = true", "A->B.groups = .*", "A->B.topics = .*",
    ])
    imp = convert(text, "mm2.properties")
    flow = parse(yaml.safe_load(imp.to_yaml("mm2.properties"))).flow("A->B")
    assert (flow["checkpoints.topic.replication.factor"], flow["state.topic.replication.factor"]) == (-1, -1)
    assert [n.split(":")[0] for n in imp.notes] == [
        "A->B.offset-syncs.topic.location", "A->B.offset-syncs.topic.replication.factor",
        "A->B.consumer.isolation.level"]


def test_import_prints_the_takeover_steps_for_each_enabled_flow():
    text = convert("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
                   "A->B.enabled = true\nB->A.enabled = false\n", "mm2.properties").to_yaml("mm2.properties")
    head = [line for line in text.splitlines() if line.startswith("#")]
    assert "#   1. stop MirrorMaker 2 (all its nodes); its heartbeats into the targets must stop" in head
    assert "#   2. mirrorflow takeover --flow 'A->B' --dry-run, then again with --yes" in head
    assert not any("'B->A'" in line for line in head)


# -- the takeover command each deployment's import prints (where MM2 kept its offsets) ------------------
def takeover_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#   2. mirrorflow takeover")]


def test_strimzi_import_prints_the_takeover_from_strimzis_connector_and_offsets_topic():
    assert takeover_lines(convert(SOURCE_DOC_STRIMZI).to_yaml("kmm2.yaml")) == [
        "#   2. mirrorflow takeover --flow 'my-cluster-source->my-cluster-target' --mm2-offsets-topic "
        "mirrormaker2-cluster-offsets --mm2-connector 'my-cluster-source->my-cluster-target.MirrorSourceConnector' "
        "--dry-run, then again with --yes"]
    # Strimzi's multi-instance set-up names the Connect cluster's own topics (source document 003, 9.9.2)
    own = STRIMZI.replace("      config.storage.replication.factor: -1",
                          "      config.storage.replication.factor: -1\n"
                          "      offset.storage.topic: my-connect-cluster-offsets")
    want = "--mm2-offsets-topic my-connect-cluster-offsets --mm2-connector 'cluster-a->cluster-b.MirrorSourceConnector'"
    assert want in takeover_lines(convert(own).to_yaml("kmm2.yaml"))[0]


# The DR guide's connector configs (source document 002, 5.6), as posted to the Connect REST API.
DR_CONNECTORS = """[
{"name": "A-to-B-MirrorSourceConnector",
 "config": {"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", "tasks.max": "30",
   "source.cluster.alias": "A", "target.cluster.alias": "B",
   "source.cluster.bootstrap.servers": "a1:9092,a2:9092", "target.cluster.bootstrap.servers": "b1:9092",
   "offset-syncs.topic.location": "target",
   "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
   "heartbeats.replication.enabled": "false", "replication.factor": "-1",
   "offset-syncs.topic.replication.factor": "-1", "sync.topic.acls.enabled": "false",
   "consumer.isolation.level": "read_committed", "topics": "orders,payments"}},
{"name": "A-to-B-MirrorCheckpointConnector",
 "config": {"connector.class": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector", "tasks.max": "30",
   "source.cluster.alias": "A", "target.cluster.alias": "B",
   "source.cluster.bootstrap.servers": "a1:9092,a2:9092", "target.cluster.bootstrap.servers": "b1:9092",
   "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
   "offset-syncs.topic.location": "target", "checkpoints.topic.replication.factor": "-1",
   "sync.group.offsets.enabled": "true", "groups": ".*"}}
]"""
DR_WORKER = """bootstrap.servers=b1:9092
group.id=connect-mirrormaker-A-to-B
plugin.discovery=service_load
key.converter=org.apache.kafka.connect.converters.ByteArrayConverter
value.converter=org.apache.kafka.connect.converters.ByteArrayConverter
offset.storage.topic=__connect-mirrormaker-A-to-B-offsets
offset.storage.replication.factor=-1
config.storage.topic=__connect-mirrormaker-A-to-B-configs
exactly.once.source.support=enabled
"""


def test_connect_connector_configs_import_as_one_flow_with_the_takeover_from_that_connector():
    imp = convert(DR_CONNECTORS, "dr.json", parse_properties(DR_WORKER))
    assert imp.clusters == {"A": {"bootstrap.servers": "a1:9092,a2:9092"}, "B": {"bootstrap.servers": "b1:9092"}}
    assert imp.defaults == {"exactly.once": True}
    assert imp.flows == {"A->B": {
        "enabled": True, "tasks.max": 30, "replication.policy.class": "IdentityReplicationPolicy",
        "heartbeats.replication.enabled": False, "replication.factor": -1, "state.topic.replication.factor": -1,
        "sync.topic.acls.enabled": False, "topics": "orders, payments", "checkpoints.topic.replication.factor": -1,
        "sync.group.offsets.enabled": True, "groups": ".*"}}
    assert [n.split(":")[0] for n in imp.notes] == [
        "A-to-B-MirrorSourceConnector.offset-syncs.topic.location",
        "A-to-B-MirrorSourceConnector.offset-syncs.topic.replication.factor",
        "A-to-B-MirrorSourceConnector.consumer.isolation.level",
        "A-to-B-MirrorCheckpointConnector.tasks.max",
        "A-to-B-MirrorCheckpointConnector.offset-syncs.topic.location",
        "connect worker"]
    text = imp.to_yaml("dr.json")
    assert takeover_lines(text) == [
        "#   2. mirrorflow takeover --flow 'A->B' --mm2-offsets-topic __connect-mirrormaker-A-to-B-offsets "
        "--mm2-connector A-to-B-MirrorSourceConnector --dry-run, then again with --yes"]
    parse(yaml.safe_load(text)).flow("A->B")  # a valid configuration
    # without the worker's properties, the offsets topic is a placeholder the notes explain
    imp = convert(DR_CONNECTORS, "dr.json")
    assert "--mm2-offsets-topic OFFSET_STORAGE_TOPIC --mm2-connector A-to-B-MirrorSourceConnector" in \
        takeover_lines(imp.to_yaml("dr.json"))[0]
    note = "A-to-B-MirrorSourceConnector: its offsets are in the offset.storage.topic"
    assert any(n.startswith(note) for n in imp.notes)


def test_a_connector_properties_file_and_a_connectors_own_offsets_topic():
    text = "\n".join([
        "name = dc1-to-dc2-mirror", "connector.class = MirrorSourceConnector", "source.cluster.alias = dc1",
        "target.cluster.alias = dc2", "source.cluster.bootstrap.servers = d1:9092",
        "target.cluster.bootstrap.servers = d2:9092", "offsets.storage.topic = dc1-mirror-offsets", "topics = .*"])
    imp = convert(text, "mirror-source.properties")
    assert imp.flows == {"dc1->dc2": {"enabled": True, "topics": ".*"}}
    assert imp.takeover == {
        "dc1->dc2": {"mm2-offsets-topic": "dc1-mirror-offsets", "mm2-connector": "dc1-to-dc2-mirror"}}


@pytest.mark.parametrize("doc,error", [
    ('{"name": "x", "config": {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector"}}',
     "x.connector.class: 'io.confluent.connect.jdbc.JdbcSourceConnector' is not one of MM2's connectors"),
    ('{"config": {"connector.class": "MirrorSourceConnector"}}', "connector 1: no `name`"),
    ('[{"name": "a", "config": {"connector.class": "MirrorSourceConnector"}},'
     ' {"name": "b", "config": {"connector.class": "MirrorSourceConnector"}}]',
     "b: a second MirrorSourceConnector for source->target ('a' is the first)"),
    ('{"name": ', "malformed JSON"),
])
def test_connector_configs_mirrorflow_cannot_import_are_refused(doc, error):
    with pytest.raises(ConfigError, match=re.escape(error)):
        convert(doc, "c.json")


def test_dedicated_mode_takeover_names_a_custom_offsets_topic():
    base = "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
    assert convert(base).takeover == {}
    assert convert(base + "B.offset.storage.topic = b-offsets\n").takeover == {
        "A->B": {"mm2-offsets-topic": "b-offsets"}}
    # a top-level offset.storage.* wins (MirrorMakerConfig.workerConfig applies it after B.*)
    assert convert(base + "B.offset.storage.topic = b-offsets\noffset.storage.topic = all-offsets\n").takeover == {
        "A->B": {"mm2-offsets-topic": "all-offsets"}}


def test_config_import_cli_takes_the_connect_workers_properties(tmp_path):
    (tmp_path / "dr.json").write_text(DR_CONNECTORS)
    (tmp_path / "worker.properties").write_text(DR_WORKER)
    code = "import sys; from mirrorflow.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "include")}
    r = subprocess.run([sys.executable, "-c", code, "config", "import", str(tmp_path / "dr.json"), "--connect-worker",
                        str(tmp_path / "worker.properties")], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == convert(DR_CONNECTORS, "dr.json", parse_properties(DR_WORKER)).to_yaml("dr.json")
