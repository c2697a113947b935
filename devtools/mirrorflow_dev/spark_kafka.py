"""Spark's Kafka connector (`spark-sql-kafka-0-10`) for the venv's PySpark, fetched from Maven Central.

PySpark's wheel does not ship the connector; a Structured Streaming query that reads Kafka needs its
jar and the few it brings (the token provider, `kafka-clients`, `commons-pool2`) on `spark.jars`.
`spark-kafka-pom.xml` beside this file takes the release as `-Dspark.version`; Maven copies the jars
into one folder per release under the cache (`kafka_dist.cache_dir()`), a stamp marks a complete copy.

The connector's release is the installed PySpark's, unless Maven Central does not have it: Spark 4.3.0
was published to PyPI but not to Maven Central (its `spark-sql_2.13` and `spark-sql-kafka-0-10_2.13`
stop at 4.2.0 there), so for a release Maven cannot find, the newest published release of the same
major version below it, `PUBLISHED_BELOW`, is used: the 4.2.0 connector runs on the 4.3.0 runtime
(tests/integration/test_spark_offsets.py is the proof). `MIRRORFLOW_SPARK_KAFKA_VERSION` chooses one.
"""

from __future__ import annotations

import os
from pathlib import Path

from mirrorflow_dev.errors import DevClusterError
from mirrorflow_dev.kafka_dist import cache_dir, maven_fetched

POM = Path(__file__).with_name("spark-kafka-pom.xml")
# release -> the connector release used when Maven Central does not have `release` itself
PUBLISHED_BELOW = {"4.3.0": "4.2.0"}


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def connector_version() -> str:
    """The connector release to fetch first: $MIRRORFLOW_SPARK_KAFKA_VERSION, else the installed PySpark's."""
    import pyspark

    return os.environ.get("MIRRORFLOW_SPARK_KAFKA_VERSION") or pyspark.__version__


def connector_jars(version: str | None = None) -> list[Path]:
    """The jars a `kafka` source needs beyond PySpark's own (a jar whose artifact PySpark already ships,
    e.g. scala-library or lz4, is left out: two versions of one artifact on a classpath is a conflict)."""
    version = version or connector_version()
    try:
        folder = _fetched(version)
    except DevClusterError as first:
        fallback = PUBLISHED_BELOW.get(version)
        if fallback is None:
            raise
        try:
            folder = _fetched(fallback)
        except DevClusterError:
            raise first from None
    shipped = {_artifact(j.name) for j in pyspark_jars_dir().glob("*.jar")}
    return sorted(j for j in folder.glob("*.jar") if _artifact(j.name) not in shipped)


def _artifact(jar: str) -> str:
    """`kafka-clients-3.9.2.jar` -> `kafka-clients`, `spark-sql-kafka-0-10_2.13-4.2.0.jar` ->
    `spark-sql-kafka-0-10_2.13`: the name before its last part that starts with a digit (the version)."""
    parts = jar.removesuffix(".jar").split("-")
    last = max((i for i, part in enumerate(parts) if i and part[:1].isdigit()), default=len(parts))
    return "-".join(parts[:last])


def _fetched(version: str) -> Path:
    return maven_fetched(
        cache_dir() / f"spark-{version}" / "kafka-connector",
        POM,
        {"spark.version": version},
        f"spark-sql-kafka-0-10_2.13-{version}.jar",
        f"Spark's Kafka connector {version}",
    )
