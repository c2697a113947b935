"""spark-submit entry point of the copy job (thin): `spark_job.py PLAN_JSON RESULTS_JSON`.

It lives in the package (not beside it) so an installed mirrorflow can submit it: the runner passes
this file's path to spark-submit. Absolute imports only: Spark runs it as a script.

The plan file carries the flow name, the config path and the units (never secrets); each Spark task
copies one unit with mirrorflow.replication.copier, building its Kafka clients inside the task. The results
(one dict per unit) are written to RESULTS_JSON. Logic lives in mirrorflow.replication.runner.
"""

import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: spark_job.py PLAN_JSON RESULTS_JSON", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    from mirrorflow.replication.spark import copy_from_plan_file

    spark = SparkSession.builder.appName("mirrorflow-copy").getOrCreate()
    try:
        results = copy_from_plan_file(spark, argv[0], argv[1])
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
