"""The Apache Kafka jars that local development clusters run, fetched from Maven Central.

`pom.xml` beside this file pins the Kafka release. Maven copies the runtime jars into one
folder per Kafka version under the cache (default ~/.cache/mirrorflow, outside the work tree);
a stamp file marks a complete copy, so later runs need no network at all.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from mirrorflow.errors import DevClusterError

POM = Path(__file__).with_name("pom.xml")
MM2_POM = Path(__file__).with_name("mm2-pom.xml")
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


def kafka_version() -> str:
    m = re.search(r"<kafka.version>([^<]+)</kafka.version>", POM.read_text())
    assert m, "pom.xml pins kafka.version"
    return m.group(1)


def cache_dir() -> Path:
    return Path(os.environ.get("MIRRORFLOW_CACHE", Path.home() / ".cache" / "mirrorflow"))


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise DevClusterError("Java was not found: install Java 17 or newer and put `java` on PATH (or set JAVA_HOME)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)', out)
    if m and int(m.group(1)) < 17:
        raise DevClusterError(f"Kafka {kafka_version()} needs Java 17 or newer; {java} is Java {m.group(1)}")
    return java


def libs_dir() -> Path:
    """The folder of Kafka jars, fetching them with Maven on first use."""
    return _fetched(POM, "libs", f"kafka_2.13-{kafka_version()}.jar")


def mm2_libs_dir() -> Path:
    """The folder of MirrorMaker 2's jars (Connect and connect-mirror, no broker), for tests that
    run the real MM2 (a takeover from it); a folder of its own: Connect scans its classpath."""
    return _fetched(MM2_POM, "mm2-libs", f"connect-mirror-{kafka_version()}.jar")


def _fetched(pom: Path, folder: str, marker_jar: str) -> Path:
    version = kafka_version()
    libs = cache_dir() / f"kafka-{version}" / folder
    stamp = libs / ".complete"
    if stamp.exists():
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise DevClusterError(
            "Maven was not found: install Maven (`mvn`) to fetch the Apache Kafka jars "
            f"(needed once; they are cached in {libs.parent})"
        )
    tmp = libs.with_name(f"{folder}.partial-{os.getpid()}")  # two processes may fetch at once
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(pom),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={tmp}",
        f"-Dkafka.version={version}",  # one Kafka release for the broker and MM2 poms
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise DevClusterError(
            f"could not fetch Apache Kafka {version} from Maven Central (mvn exited {proc.returncode}):\n{tail}"
        )
    if not (tmp / marker_jar).exists():
        raise DevClusterError(f"Maven finished but {marker_jar} is missing in {tmp}")
    shutil.rmtree(libs, ignore_errors=True)
    tmp.rename(libs)
    stamp.write_text(version + "\n")
    return libs
