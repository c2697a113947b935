"""docs/mm2-compatibility.md: generated from the code's property tables, never
stale, and with a row for every MM2, Kafka Connect and Strimzi KafkaMirrorMaker2 property of the
source documents (/work/shared/source-docs, listed below with where each comes from)."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorflow.config import compat

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "mm2-compatibility.md"
SOURCE_DOCS = ROOT.parent / "shared" / "source-docs"


@functools.cache
def _table() -> tuple[compat.Row, ...]:
    return tuple(compat.rows())


def lookup(name: str) -> compat.Row | None:
    """The row of `name` in the generated table: its own row, else the most specific prefix form
    matching it (how a reader finds a property in docs/mm2-compatibility.md)."""
    exact = [r for r in _table() if r.name == name]
    if exact:
        return exact[0]
    forms = [r for r in _table() if r.matches(name)]
    return max(forms, key=lambda r: len(r.name)) if forms else None

# 000 (MM2 components and DR) and 001 / 004 (an MM2 guide; how MM2 is invoked) name no property.
# 002: Red Hat's "Setting up MirrorMaker for disaster recovery"; 003: Strimzi's KafkaMirrorMaker2 reference.
SOURCE_PROPERTIES: list[tuple[str, str]] = [
    # 002 §5.1, Kafka Connect worker settings, and the worker example of §5.6
    ("group.id", "002 §5.1"),
    ("plugin.discovery", "002 §5.1"),
    ("key.converter", "002 §5.1"),
    ("value.converter", "002 §5.1"),
    ("config.storage.topic", "002 §5.1"),
    ("offset.storage.topic", "002 §5.1"),
    ("status.storage.topic", "002 §5.1"),
    ("listeners", "002 §5.1"),
    ("bootstrap.servers", "002 §5.1"),
    ("security.protocol", "002 §5.1"),
    ("sasl.mechanism", "002 §5.1"),
    ("config.storage.replication.factor", "002 §5.6 worker example"),
    ("offset.storage.replication.factor", "002 §5.6 worker example"),
    ("status.storage.replication.factor", "002 §5.6 worker example"),
    # 002 §5.2, settings of both connectors
    ("name", "002 §5.2"),
    ("tasks.max", "002 §5.2"),
    ("source.cluster.alias", "002 §5.2"),
    ("target.cluster.alias", "002 §5.2"),
    ("offset-syncs.topic.location", "002 §5.2"),
    ("replication.policy.class", "002 §5.2"),
    ("source.cluster.bootstrap.servers", "002 §5.2"),
    ("source.cluster.security.protocol", "002 §5.2"),
    ("source.cluster.sasl.mechanism", "002 §5.2"),
    ("target.cluster.bootstrap.servers", "002 §5.2"),
    ("target.cluster.security.protocol", "002 §5.2"),
    ("target.cluster.sasl.mechanism", "002 §5.2"),
    ("connector.class", "002 §5.6 connector examples"),
    # 002 §5.3, MirrorSourceConnector
    ("heartbeats.replication.enabled", "002 §5.3"),
    ("replication.factor", "002 §5.3"),
    ("offset-syncs.topic.replication.factor", "002 §5.3"),
    ("topics", "002 §5.3"),
    ("topics.exclude", "002 §5.3"),
    ("sync.topic.acls.enabled", "002 §5.3"),
    ("offset.lag.max", "002 §5.3"),
    ("producer.override.<configuration name>", "002 §5.3"),
    ("batch.size", "002 §5.3"),
    ("compression.type", "002 §5.3"),
    # 002 §5.4, MirrorCheckpointConnector
    ("checkpoints.topic.replication.factor", "002 §5.4"),
    ("sync.group.offsets.enabled", "002 §5.4"),
    ("groups", "002 §5.4"),
    ("groups.exclude", "002 §5.4"),
    # 002 §5.5, exactly-once
    ("exactly.once.source.support", "002 §5.5"),
    ("consumer.isolation.level", "002 §5.5"),
    ("transaction.boundary", "002 §5.5"),
    ("transaction.boundary.interval.ms", "002 §5.5"),
    ("offset.flush.interval.ms", "002 §5.5"),
    # 003 table 9.3, MirrorMaker 2 connector configuration properties
    ("admin.timeout.ms", "003 table 9.3"),
    ("replication.policy.separator", "003 table 9.3"),
    ("consumer.poll.timeout.ms", "003 table 9.3"),
    ("topic.filter.class", "003 table 9.3"),
    ("config.property.filter.class", "003 table 9.3"),
    ("config.properties.exclude", "003 table 9.3"),
    ("refresh.topics.enabled", "003 table 9.3"),
    ("refresh.topics.interval.seconds", "003 table 9.3"),
    ("sync.topic.acls.interval.seconds", "003 table 9.3"),
    ("sync.topic.configs.enabled", "003 table 9.3"),
    ("sync.topic.configs.interval.seconds", "003 table 9.3"),
    ("emit.checkpoints.enabled", "003 table 9.3"),
    ("emit.checkpoints.interval.seconds", "003 table 9.3"),
    ("group.filter.class", "003 table 9.3"),
    ("refresh.groups.enabled", "003 table 9.3"),
    ("refresh.groups.interval.seconds", "003 table 9.3"),
    ("sync.group.offsets.interval.seconds", "003 table 9.3"),
    ("emit.heartbeats.enabled", "003 table 9.3"),
    ("emit.heartbeats.interval.seconds", "003 table 9.3"),
    ("heartbeats.topic.replication.factor", "003 table 9.3"),
    # 003 §9.9.3, producer and consumer overrides of the connectors (and the example after them)
    ("producer.override.request.timeout.ms", "003 §9.9.3 overrides example"),
    ("producer.override.linger.ms", "003 §9.9.3 overrides example"),
    ("producer.request.timeout.ms", "003 §9.9.3 overrides example"),
    ("consumer.fetch.max.bytes", "003 §9.9.3 overrides example"),
    ("consumer.max.poll.interval.ms", "003 §9.9.3 overrides example"),
    # 003, the KafkaMirrorMaker2 resource (example configuration and its callouts 1-43)
    ("spec.replicas", "003 example, callout 1"),
    ("spec.connectCluster", "003 example, callout 2"),
    ("spec.clusters[].alias", "003 example, callouts 4, 8"),
    ("spec.clusters[].authentication", "003 example, callouts 5, 9"),
    ("spec.clusters[].bootstrapServers", "003 example, callouts 6, 10"),
    ("spec.clusters[].tls.trustedCertificates", "003 example, callouts 7, 12"),
    ("spec.clusters[].config", "003 example, callout 11; §9.9.2 multiple instances"),
    ("spec.mirrors[].sourceCluster", "003 example, callout 14"),
    ("spec.mirrors[].targetCluster", "003 example, callout 15"),
    ("spec.mirrors[].topicsPattern", "003 example, callout 16"),
    ("spec.mirrors[].groupsPattern", "003 example, callout 17"),
    ("spec.mirrors[].sourceConnector.config", "003 example, callout 18"),
    ("spec.mirrors[].sourceConnector.tasksMax", "003 example, callout 19; §9.9.4"),
    ("spec.mirrors[].sourceConnector.autoRestart", "003 example, callout 20"),
    ("spec.mirrors[].sourceConnector.autoRestart.maxRestarts", "003 callout 20"),
    ("spec.mirrors[].heartbeatConnector.config", "003 example, callout 26"),
    ("spec.mirrors[].checkpointConnector.config", "003 example, callout 28"),
    ("spec.mirrors[].checkpointConnector.tasksMax", "003 §9.9.4"),
    ("spec.version", "003 example, callout 34"),
    ("spec.resources", "003 example, callout 35"),
    ("spec.logging", "003 example, callout 36 (loggers: connect.root.logger.level)"),
    ("spec.readinessProbe", "003 example, callout 37"),
    ("spec.livenessProbe", "003 example, callout 37"),
    ("spec.jvmOptions", "003 example, callout 38"),
    ("spec.image", "003 example, callout 39"),
    ("spec.rack", "003 example, callout 40"),
    ("spec.template", "003 example, callouts 41, 42"),
    ("spec.tracing", "003 example, callout 43"),
    ("spec.mirrors[].sourceConnector.state", "003 §9.9.8 stopping and pausing"),
    ("spec.mirrors[].sourceConnector.pause", "003 §9.9.8 (the deprecated pause configuration)"),
    ("metadata.annotations[strimzi.io/restart-connector]", "003 §9.9.9"),
    ("metadata.annotations[strimzi.io/restart-connector-task]", "003 §9.9.10"),
]

# Names in the source documents that are not MirrorMaker 2, Kafka Connect or client properties, and why
# (test_every_dotted_name_in_the_source_documents_has_a_row_or_is_listed_here).
NOT_MM2 = {
    "my-source-cluster.checkpoints.internal": "003 §9.9.7: a topic name in an ACL example",
    "mm2-offset-syncs.my-target-cluster.internal": "003 §9.9.7: a topic name in an ACL example",
    "connect-distributed.properties": "002 §5.1: the worker's file name",
    "log4j.properties": "003: a logging file name (spec.logging)",
    "log4j2.properties": "003: a logging file name (spec.logging)",
    "kafka-acl.sh": "002: a Kafka tool",
    "kafka.strimzi.io": "003: the Strimzi API group",
    "strimzi.io": "003: Strimzi's annotation and API domain",
    "kubernetes.io": "003: Kubernetes label domain",
    "topology.kubernetes.io": "003: a Kubernetes label (the rack example's topologyKey)",
    "leeroo.com": "004: the page's site",
    "org.apache.kafka.connect.converters": "002: a Java package (the converter class's)",
    "org.apache.kafka.connect.mirror": "002: a Java package (MM2's classes')",
    "props.put": "002: Java code of the ACL example",
    "e.g": "002: prose",
    "config": "002 §5.6: the JSON object of a connector's properties",
    "source.crt": "003: a certificate file in a Secret",
    "source.key": "003: a key file in a Secret",
    "target.crt": "003: a certificate file in a Secret",
    "target.key": "003: a key file in a Secret",
    "user.crt": "003: a certificate file in a Secret",
    "user.key": "003: a key file in a Secret",
    "offsets.topic.replication.factor": "003 §9.9.7: a broker setting of the example `Kafka` resource",
    "transaction.state.log.replication.factor": "003 §9.9.7: a broker setting of the example `Kafka` resource",
    "transaction.state.log.min.isr": "003 §9.9.7: a broker setting of the example `Kafka` resource",
    "default.replication.factor": "003 §9.9.7: a broker setting of the example `Kafka` resource",
    "min.insync.replicas": "003 §9.9.7: a broker setting of the example `Kafka` resource",
    "inter.broker.protocol.version": "003 §9.9.7: a broker setting of the example `Kafka` resource",
    "connect.root.logger.level": "003 callout 36: a logger name inside spec.logging (its row)",
}


# Kafka Connect worker settings an MM2 deployment on Connect (002 §5.1, mm2-behaviour.md's worker) sets
# besides those the documents name: each has a row, and `config import` leaves it out with its reason.
CONNECT_WORKER_SETTINGS = [
    "offset.flush.interval.ms", "offset.flush.timeout.ms", "offset.storage.topic", "offset.storage.partitions",
    "offset.storage.replication.factor", "config.storage.topic", "config.storage.replication.factor",
    "status.storage.topic", "status.storage.partitions", "status.storage.replication.factor",
    "offset.storage.file.filename", "group.id", "plugin.path", "plugin.discovery", "listeners",
    "rest.advertised.host.name", "rest.advertised.port", "rest.advertised.listener", "connect.protocol",
    "scheduled.rebalance.max.delay.ms", "task.shutdown.graceful.timeout.ms", "key.converter", "value.converter",
    "header.converter",
]
# a dotted lowercase name anywhere in a document (not the start of a camelCase one: log4j.rootLogger); a
# trailing dot before a quote, `*` or `<` is a prefix ("source.cluster." -> source.cluster.*)
DOTTED = re.compile(r"(?<![\w.$/-])([a-z][a-z0-9-]*(?:\.[a-z0-9-]+)+)(?![\w-])(\.(?=[\"*<]))?")
# a key of an example: `key=value` (worker properties) or `"key": value` (connector JSON)
EXAMPLE_KEY = re.compile(r'^\s*(?:"([a-z][a-z0-9.-]*)"\s*:|([a-z][a-z0-9.-]*)=)', re.M)


def source_document_names() -> dict[str, str]:
    """Every property-like name of the source documents (dotted names anywhere, the keys of the
    properties and JSON examples): {name: the document it is in}."""
    out: dict[str, str] = {}
    for path in sorted(SOURCE_DOCS.glob("*.txt")):
        text = path.read_text()
        for m in DOTTED.finditer(text):
            out.setdefault(m.group(1) + (".*" if m.group(2) else ""), path.name[:3])
        for m in EXAMPLE_KEY.finditer(text):
            out.setdefault(m.group(1) or m.group(2), path.name[:3])
    return out


def _source_text(origin: str) -> str:
    [path] = SOURCE_DOCS.glob(f"{origin[:3]}_*.txt")
    return path.read_text()


def test_the_generated_document_is_current():
    assert DOC.read_text() == compat.markdown(), "stale: run `mirrorflow config compat -o docs/mm2-compatibility.md`"


def test_the_cli_prints_the_same_markdown():
    out = subprocess.run([sys.executable, "-m", "mirrorflow.cli", "config", "compat", "--markdown"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout == compat.markdown()


@pytest.mark.parametrize("name,origin", SOURCE_PROPERTIES, ids=[n for n, _ in SOURCE_PROPERTIES])
def test_every_source_document_property_has_a_row(name, origin):
    if SOURCE_DOCS.is_dir():  # the list is taken from the documents: each name is in the one it cites
        last = name.rsplit(".", 1)[-1] if name.startswith(("spec.", "metadata.")) else name
        last = last.removesuffix("]").split("[")[-1].split("/")[-1]
        assert last in _source_text(origin), (name, origin)
    row = lookup(name)
    assert row is not None, f"{name} ({origin}) has no row in docs/mm2-compatibility.md"
    assert row.verdict in compat.VERDICTS
    assert f"| `{row.name}` | {row.verdict} |" in DOC.read_text()


def test_verdicts_follow_the_code():
    """A few rows checked against what the loader and the importer really do."""
    assert lookup("consumer.poll.timeout.ms").verdict == "refused"
    assert lookup("emit.checkpoints.enabled").verdict == "same"
    assert lookup("replication.factor").verdict == "different"
    assert lookup("transaction.boundary").verdict == "mapped"
    assert lookup("exactly.once.source.support").verdict == "mapped"
    assert lookup("offset-syncs.topic.replication.factor").what.startswith(
        "refused in a mirrorflow config; `config import` makes it `state.topic.replication.factor`")
    assert lookup("consumer.isolation.level").verdict == "different"  # held by mirrorflow
    assert lookup("consumer.fetch.max.bytes").name == "consumer.*"
    assert lookup("producer.override.linger.ms").name == "producer.override.*"
    assert lookup("source.cluster.bootstrap.servers").name == "source.cluster.*"
    assert lookup("spec.mirrors[].checkpointConnector.autoRestart.maxRestarts").verdict == "different"
    assert lookup("spec.mirrors[].sourceConnector.state").name == "spec.mirrors[].*Connector.state"


@pytest.mark.skipif(not SOURCE_DOCS.is_dir(), reason="the source documents live beside the repository, not in it")
def test_every_name_in_the_source_documents_has_a_row_or_is_listed_as_no_property():
    names = source_document_names()
    assert {"offset.flush.interval.ms", "offset.storage.topic", "name", "topics", "source.cluster.*"} <= set(names)
    missing = {n: doc for n, doc in names.items() if n not in NOT_MM2 and lookup(n) is None}
    assert not missing, f"names of the source documents without a row in docs/mm2-compatibility.md: {missing}"
    # the hand-kept lists stay true: what they leave out is in the documents, what they cite has a row
    assert set(NOT_MM2) <= set(names), set(NOT_MM2) - set(names)
    assert not [n for n in NOT_MM2 if lookup(n) is not None]


def test_connect_worker_settings_have_rows_and_import_leaves_them_out_with_their_reason():
    from mirrorflow.config.mm2_import import convert

    text = DOC.read_text()
    for name in CONNECT_WORKER_SETTINGS:
        row = lookup(name)
        assert row is not None and row.name == name and row.section == "Kafka Connect settings", name
        assert row.verdict == "different" and f"| `{name}` | different |" in text
    props = "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
    imp = convert(props + "".join(f"{n} = 1\n" for n in CONNECT_WORKER_SETTINGS), "mm2.properties")
    notes = {n.split(":")[0]: n for n in imp.notes}
    for name in CONNECT_WORKER_SETTINGS:
        why = lookup(name).what.removeprefix("no effect here (").split("); `config import`")[0]
        assert notes[name] == f"{name}: not imported ({why})"
    assert imp.flows["A->B"] == {"enabled": True} and imp.defaults == {}
    assert all(set(c) == {"bootstrap.servers"} for c in imp.clusters.values()), imp.clusters


@pytest.mark.skipif(not SOURCE_DOCS.is_dir(), reason="the source documents live beside the repository, not in it")
def test_the_names_left_out_are_in_the_documents_too():
    for name, why in NOT_MM2.items():
        assert name in _source_text(why), name
