"""The per-flow DAGs a user generates from their mirrorflow config, in one call of a DAG file of their own."""

import os

from mirrorflow_airflow import build_flow_dags

globals().update(build_flow_dags(os.environ["MY_MIRRORFLOW_CONFIG"]))
