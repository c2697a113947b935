"""Airflow adapters for mirrorflow: hooks, operators and DAG builders. Thin: logic is in `mirrorflow`."""
