"""mirrorflow_dev.class_archive: a broker JVM maps the release's class archive only once one was made, and
only one its own Java build dumped (the archive's name carries the binary's identity)."""
from mirrorflow_dev import class_archive
from mirrorflow_dev.broker_config import broker_command


def test_a_broker_maps_the_archive_only_once_it_exists_and_only_its_own_javas(tmp_path):
    libs = tmp_path / "kafka-9.9.9" / "libs"
    libs.mkdir(parents=True)
    java = tmp_path / "java"  # only named and stat'ed, never run
    java.write_bytes(b"a java build")
    other = tmp_path / "other-java"
    other.write_bytes(b"another java build")
    archive = class_archive.path(str(java), libs)
    assert archive.parent == libs.parent and archive != class_archive.path(str(other), libs)
    cmd = broker_command(str(java), libs, tmp_path, tmp_path)
    assert not [o for o in cmd if "SharedArchive" in o or "ArchiveClasses" in o]
    archive.write_bytes(b"dumped")
    cmd = broker_command(str(java), libs, tmp_path, tmp_path)
    option = f"-XX:SharedArchiveFile={archive}"
    assert option in cmd and cmd.index("kafka.Kafka") > cmd.index(option)  # a JVM option, before the class
    assert not [o for o in broker_command(str(other), libs, tmp_path, tmp_path) if "SharedArchive" in o]
    # a dump's own options replace the mapping (class_archive.make)
    dump = broker_command(str(java), libs, tmp_path, tmp_path, classes=["-XX:ArchiveClassesAtExit=x.jsa"])
    assert "-XX:ArchiveClassesAtExit=x.jsa" in dump and f"-XX:SharedArchiveFile={archive}" not in dump
