"""Control DAGs (one per flow, manual): pause, resume or stop a flow, recorded with the triggering user.

See include/mirrorflow_airflow/dag_builders/control.py. Parsing touches no cluster.
"""

from mirrorflow_airflow.dag_builders.control import build_control_dags

globals().update(build_control_dags())
