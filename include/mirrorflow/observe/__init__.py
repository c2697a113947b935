"""Observing flows: what an operator and a monitoring system read.

Owns: the per-partition status, progress on the target against the source's ends (`status`), the
status page's data model, with its history, groups and problems in plain words and the cache that
serves it (`status_page`; its HTML is drawn on the Airflow side, `mirrorflow_airflow.status_html`),
and the metrics under MirrorMaker 2's names from the status and the run log (`metrics`).
Beside `ops`, not in it: it reads, it operates nothing. May import every core package below `ops`
(`errors`, `config`, `mm2`, `kafka`, `clients`, `state`, `replication`, `metadata`, `groups`), nothing of
`ops`; the CLI and the Airflow side read it.
"""
