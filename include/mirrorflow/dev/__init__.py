"""Local development clusters: real Apache Kafka (KRaft) from Maven Central jars.

May import: `mirrorflow.errors`, `mirrorflow.config` (the project folder).
"""
