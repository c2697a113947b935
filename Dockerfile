# The Airflow + Spark image for docker-compose.yaml: Airflow 3.3 with Java 17 (Spark local/client
# mode and spark-submit), mirrorflow and its pinned dependencies.
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
USER airflow
COPY --chown=airflow:root requirements.txt pyproject.toml /opt/mirrorflow/
COPY --chown=airflow:root include /opt/mirrorflow/include
# the Spark application the DAGs submit (spark_jobs/mirrorflow_copy.py; mirrorflow.replication.executors.spark.job_path)
COPY --chown=airflow:root spark_jobs /opt/mirrorflow/spark_jobs
RUN pip install --no-cache-dir -r /opt/mirrorflow/requirements.txt \
 && pip install --no-cache-dir --no-deps --force-reinstall "$(grep -E '^pyspark==' /opt/mirrorflow/requirements.txt)" \
 && pip install --no-cache-dir --no-deps -e /opt/mirrorflow \
 && rm -rf /opt/mirrorflow/include/mirrorflow.egg-info
