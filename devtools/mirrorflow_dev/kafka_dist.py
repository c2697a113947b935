"""The Apache Kafka jars the local clusters run, fetched from Maven Central, one folder per release.

`pom.xml` (the broker) and `mm2-pom.xml` (MirrorMaker 2 and Kafka Connect) beside this file take the
Kafka release as `-Dkafka.version`. Maven copies the runtime jars into one folder per release under
the cache (default ~/.cache/mirrorflow, outside the work tree; `MIRRORFLOW_CACHE` moves it); a stamp
file marks a complete copy, so later runs need no network at all.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from mirrorflow_dev.errors import DevClusterError
from mirrorflow_dev.kafka_release import KafkaRelease, default_release

POM = Path(__file__).with_name("pom.xml")
MM2_POM = Path(__file__).with_name("mm2-pom.xml")
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


def cache_dir() -> Path:
    return Path(os.environ.get("MIRRORFLOW_CACHE", Path.home() / ".cache" / "mirrorflow"))


def java_binary(release: KafkaRelease | None = None) -> str:
    """The `java` to run `release` with (JAVA_HOME's, else the one on PATH), checked against the
    release's minimum."""
    release = release or default_release()
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise DevClusterError(
            f"Java was not found: install Java {release.min_java} or newer and put `java` on PATH (or set JAVA_HOME)"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)', out)
    if m and int(m.group(1)) < release.min_java:
        raise DevClusterError(f"Kafka {release} needs Java {release.min_java} or newer; {java} is Java {m.group(1)}")
    return java


def libs_dir(release: KafkaRelease | None = None) -> Path:
    """The folder of a release's broker jars, fetching them with Maven on first use."""
    release = release or default_release()
    return _fetched(POM, release, "libs", f"kafka_2.13-{release}.jar", f"Apache Kafka {release}")


def mm2_libs_dir(release: KafkaRelease | None = None) -> Path:
    """The folder of MirrorMaker 2's jars (Connect, connect-mirror and its client library, no
    broker), for tests that run the real MM2 or read our checkpoints with `RemoteClusterUtils`; a
    folder of its own: Connect scans its classpath."""
    release = release or default_release()
    return _fetched(MM2_POM, release, "mm2-libs", f"connect-mirror-{release}.jar", f"MirrorMaker 2 of Kafka {release}")


def _fetched(pom: Path, release: KafkaRelease, folder: str, marker_jar: str, what: str) -> Path:
    return maven_fetched(
        cache_dir() / f"kafka-{release}" / folder, pom, {"kafka.version": str(release)}, marker_jar, what
    )


def maven_fetched(libs: Path, pom: Path, props: dict[str, str], marker_jar: str, what: str) -> Path:
    """The folder `libs` holding the runtime jars of `pom` (its `props` set), fetched with Maven
    once (`.complete` marks a finished fetch); `marker_jar` must be among them. DevClusterError
    naming `what` when Maven is missing or fails."""
    stamp = libs / ".complete"
    if stamp.exists():
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise DevClusterError(
            f"Maven was not found: install Maven (`mvn`) to fetch {what} (needed once; cached in {libs.parent})"
        )
    tmp = libs.with_name(f"{libs.name}.partial-{os.getpid()}")  # two processes may fetch at once
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
        *(f"-D{k}={v}" for k, v in props.items()),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise DevClusterError(f"could not fetch {what} from Maven Central (mvn exited {proc.returncode}):\n{tail}")
    if not (tmp / marker_jar).exists():
        shutil.rmtree(tmp, ignore_errors=True)
        raise DevClusterError(f"Maven finished but {marker_jar} is missing: could not fetch {what}")
    shutil.rmtree(libs, ignore_errors=True)
    tmp.rename(libs)
    stamp.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return libs


def main(argv: list[str]) -> int:
    """`python -m mirrorflow_dev.kafka_dist [--matrix] [VERSION...]`: fetch the broker jars of the
    default release (and, with --matrix, of the version matrix's releases, and of each VERSION),
    in parallel; each is fetched once."""
    from concurrent.futures import ThreadPoolExecutor

    from mirrorflow_dev.kafka_release import DEFAULT_VERSION, MATRIX_VERSIONS

    wanted = [DEFAULT_VERSION, *(MATRIX_VERSIONS if "--matrix" in argv else ()), *(a for a in argv if a[:1] != "-")]
    try:
        releases = list(dict.fromkeys(KafkaRelease.parse(v) for v in wanted))
        with ThreadPoolExecutor(len(releases)) as pool:
            list(pool.map(libs_dir, releases))
    except DevClusterError as exc:
        print(f"mirrorflow: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
