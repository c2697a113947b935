"""spark-submit entry point of the copy job (thin): `spark_job.py PLAN_JSON`.

It lives in the package (not beside it) so an installed mirrorflow can submit it: the runner passes
this file's path to spark-submit. Absolute imports only: Spark runs it as a script.

The plan file carries the flow name, the config path and the units (never secrets); each Spark task
copies one unit with mirrorflow.replication.copier, building its Kafka clients inside the task. PLAN_JSON
is a local path, or the name of the file spark-submit shipped with --files (a driver on another host).
The results (one dict per unit) go to the target cluster under the plan's run id, where the runner or
the DAG's report task reads them (mirrorflow.replication.handoff). Logic lives in mirrorflow.replication.spark.
"""

import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: spark_job.py PLAN_JSON", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    from mirrorflow.replication.spark import copy_from_plan_file

    spark = SparkSession.builder.appName("mirrorflow-copy").getOrCreate()
    try:
        results = copy_from_plan_file(spark, argv[0])
    finally:
        spark.stop()
    failed = [r for r in results if r["status"] == "failed"]
    for r in failed:
        print(
            f"mirrorflow: unit {r['topic']}[{r['partition']}] {r['start']}..{r['end']} failed: {r['error']}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
