"""mirrorflow's development harness: local Apache Kafka clusters (3.9 to 4.4, from Maven Central jars),
a Spark Connect server and a Spark standalone cluster, the real MirrorMaker 2 and a Kafka Connect worker,
a PostgreSQL for Airflow, throw-away certificates, and the `mirrorflow dev` and `mirrorflow demo`
commands. For development, the demo, tests and benchmarks; never part of the product: the product
(`mirrorflow`, `mirrorflow_airflow`, DAGs, plugins, the Spark job) imports nothing from it
(tests/unit/test_layers.py), and finds its commands through an entry point.

May import: anything of `mirrorflow` (it stands above the product, like the tests).
"""
