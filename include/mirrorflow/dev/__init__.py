"""Local development clusters: real Apache Kafka (KRaft) from Maven Central jars.

May import: `mirrorflow.errors`, `mirrorflow.kafka` (to see a broker answer), `mirrorflow.config`
(the project folder).
"""
