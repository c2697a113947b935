"""Airflow adapters for mirrorflow, laid out like a provider package; thin: logic is in `mirrorflow`.

`hooks/` MirrorflowHook (the config and the clusters' Kafka connections), `operators/` the Spark
copy step and the deferrable heartbeat task, `triggers/` what those wait on (on Airflow's
triggerer), `dag_builders/` one module per DAG kind (`build_<kind>_dags(cfg=None)`,
`build_<kind>_dag(cfg, flow)`), `common` what every generated DAG shares, `status_html` the status
page's HTML (its data: `mirrorflow.ops.observe.status_page`; its routes: plugins/mirrorflow_status.py).
"""
