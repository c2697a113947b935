"""Schema DAGs (one per enabled flow whose clusters name schema registries): copy schemas with their ids.

Built from the mirrorflow config; see include/mirrorflow_airflow/dag_builders/schemas.py.
"""

from mirrorflow_airflow.dag_builders.schemas import build_schemas_dags

globals().update(build_schemas_dags())
