"""The Spark application of mirrorflow's copy job: `spark-submit ... spark_jobs/mirrorflow_copy.py PLAN_JSON`.

The replicate and backfill DAGs and the CLI submit this file when mirrorflow runs from a checkout
(the Docker image too). It is an entry point only: the job is mirrorflow.replication.executors.spark_job.main,
so a wheel installed without this folder submits that module instead (mirrorflow.replication.executors.spark.
job_path). Named `mirrorflow_copy`, not `copy`: spark-submit puts this folder first on sys.path,
where a `copy.py` would shadow the standard library's module.
"""

import sys

from mirrorflow.replication.executors.spark_job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
