"""mirrorflow's Airflow plugins, loaded through the package's `airflow.plugins` entry points (pyproject.toml):
`status` (the status page, Browse > Mirrorflow), `metrics` (Prometheus text at /mirrorflow-metrics/metrics),
`notes` (a DAG-run listener writing why a run did nothing as its note)."""
