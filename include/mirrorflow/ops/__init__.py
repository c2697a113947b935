"""Operations over a flow: the one place an operation goes, in rooms by role.

An operation is one core function that the CLI (`cli/<command>.py`), a DAG
(`mirrorflow_airflow/dag_builders/`) and where it makes sense the status page call. The rooms:
`dr/` (failover, failback, the drill that rehearses a failover, takeover from MirrorMaker 2),
`verify/` (verify and its pure walk), `observe/` (status, the status page's data model, metrics;
the page's HTML is `mirrorflow_airflow.status_html`), `acls/` (the ACLs a flow's principals need,
and the applications' after a failover). Here: the registry of every operation (`registry`: its CLI
module, history kinds, DAG kind and status-page link, which the doors read), pause/resume/stop
(`flow_control`), backfill (`backfill`) and reseed (`reseed`). Their pure parts that the layers below own stay there
(`replication.plan.planner`, `replication.plan.backfill_plan`, `state.state_writer.write_partition_state`).
May import: every core package below it (`errors`, `process`, `reporting`, `config`, `mm2`,
`kafka`, `clients`, `state`, `replication`, `metadata`, `groups`). Inside `ops`, `dr` may import
`verify`; the modules here may import every room; no room imports these modules or `dr`
(tests/unit/test_layers.py).
"""
