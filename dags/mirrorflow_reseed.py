"""Re-seed DAGs (one per enabled flow, manual): restart a topic whose partitions were stopped.

See include/mirrorflow_airflow/dag_builders/reseed.py. Parsing touches no cluster.
"""

from mirrorflow_airflow.dag_builders.reseed import build_reseed_dags

globals().update(build_reseed_dags())
