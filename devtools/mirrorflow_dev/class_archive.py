"""The class-data-sharing archive of a Kafka release's broker: the classes a broker loads, dumped once by
one broker's run (`python -m mirrorflow_dev.class_archive`, which scripts/bootstrap runs) and mapped by
every later broker JVM of that release and Java build, which then reads and verifies none of them again. A
broker's start took 1.1 instead of 1.8-2.4 CPU s and 1.6 instead of 2.2 s to ready (docs/testing.md): the
test suite starts about a hundred on two cores. Without an archive a broker starts as before."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

from mirrorflow_dev.errors import DevClusterError
from mirrorflow_dev.kafka_release import KafkaRelease


def path(java: str, libs: Path) -> Path:
    """Where the archive of the broker jars in `libs` for this `java` lies: a JVM maps only an archive its
    own build dumped, so the name carries the Java binary's identity."""
    real = os.path.realpath(java)
    st = os.stat(real)
    key = hashlib.sha1(f"{real}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return libs.parent / f"broker-classes-{key}.jsa"


def options(java: str, libs: Path) -> list[str]:
    """The broker JVM's option that maps the archive, when one was made."""
    archive = path(java, libs)
    return [f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []


def make(release: KafkaRelease) -> Path:
    """The release's archive (kept when one exists): a broker's run dumps the classes it loaded."""
    from mirrorflow_dev import kafka_dist

    java, libs = kafka_dist.java_binary(release), kafka_dist.libs_dir(release)
    final = path(java, libs)
    if final.exists():
        return final
    partial = final.with_name(f"{final.name}.partial-{os.getpid()}")
    try:
        _dump(release, partial)
        if not partial.exists():
            raise DevClusterError(f"the broker of Kafka {release} stopped without writing its class archive")
        partial.replace(final)
    finally:
        partial.unlink(missing_ok=True)
    return final


def _dump(release: KafkaRelease, to: Path) -> None:
    """A broker in a scratch home: a topic, a transaction written, a group reading it, then a clean stop
    (SIGTERM), at whose exit the JVM writes the classes it loaded to `to`."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from mirrorflow_dev.cluster import DevClusters

    with tempfile.TemporaryDirectory(prefix="mirrorflow-classes-") as home:
        clusters = DevClusters(home, classes=[f"-XX:ArchiveClassesAtExit={to}"])
        try:
            c = clusters.up(["CDS"], kafka_versions={"CDS": str(release)}, attached=True)["CDS"]
            conf = {"bootstrap.servers": c.bootstrap_servers}
            admin = AdminClient(conf)  # kept: its answer needs the client alive
            admin.create_topics([NewTopic("classes", 1, 1)])["classes"].result(30)
            producer = Producer({**conf, "transactional.id": "classes"})
            producer.init_transactions(30)
            producer.begin_transaction()
            producer.produce("classes", b"v", b"k")
            producer.commit_transaction(30)
            consumer = Consumer({**conf, "group.id": "classes", "auto.offset.reset": "earliest"})
            consumer.subscribe(["classes"])
            for _ in range(30):
                m = consumer.poll(1)
                if m is not None and not m.error():
                    break
            consumer.close()
        finally:
            clusters.down()


def main(argv: list[str]) -> int:
    """`python -m mirrorflow_dev.class_archive [--matrix]`: the archive of the default release (and of the
    version matrix's). A failure is printed and the brokers start without one."""
    from mirrorflow_dev.kafka_release import DEFAULT_VERSION, MATRIX_VERSIONS

    for version in [DEFAULT_VERSION, *(MATRIX_VERSIONS if "--matrix" in argv else ())]:
        try:
            make(KafkaRelease.parse(version))
        except Exception as exc:  # an optimisation: never fail the set-up
            print(
                f"mirrorflow: no class archive for Kafka {version} (brokers start without one): {exc}", file=sys.stderr
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
