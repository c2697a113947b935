"""The copy job's driver main (thin): `spark-submit ... spark_jobs/mirrorflow_copy.py PLAN_JSON`.

spark_jobs/mirrorflow_copy.py (the repository's Spark application) calls main(); a wheel installed
without the repository submits this module itself, which runs as a script too (see
mirrorflow.replication.executors.spark.job_path). Absolute imports only: Spark runs it as a script.

The plan file carries the flow name, the config path and the units (never secrets); each Spark task
copies one unit with mirrorflow.replication.task.copier, building its Kafka clients inside the task. PLAN_JSON
is a local path, or the name of the file spark-submit shipped with --files (a driver on another host).
The results (one dict per unit) go to the target cluster under the plan's run id, where the runner or
the DAG's report task reads them (mirrorflow.replication.executors.handoff). Logic lives in
mirrorflow.replication.executors.spark.
"""

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: {Path(sys.argv[0]).name} PLAN_JSON", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    from mirrorflow.replication.executors.spark import copy_from_plan_file

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
