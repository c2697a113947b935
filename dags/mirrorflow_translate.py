"""Translate DAGs (one per enabled flow, manual): where a consumer outside consumer groups (Spark,
Flink, assign()) resumes on the target. See include/mirrorflow_airflow/dag_builders/translate.py."""

from mirrorflow_airflow.dag_builders.translate import build_translate_dags

globals().update(build_translate_dags())
