"""Operations over a flow: the one place an operation goes, in rooms by meaning.

An operation is one core function that the CLI (`cli/<command>.py`), a DAG
(`mirrorflow_airflow/dag_builders/`) and where it makes sense the status page call. The rooms:
`dr/` (failover, failback, the drill that rehearses a failover, the failover's take-over of a run's
lease), `verify/` (verify and its pure walk), `takeover/` (continuing where MirrorMaker 2 stopped:
`from_mm2`), `control/` (pause, resume, stop: `flow_control`), `acls/` (the ACLs a flow's principals
need, and the applications' after a failover). Reading a flow (status, metrics, the RPO) is no
operation: `mirrorflow.observe`, beside this package. Here: the registry of every operation
(`registry`: its CLI module, history kinds, DAG kind and status-page link, which the doors read),
backfill (`backfill`) and reseed (`reseed`). Their pure parts that the layers below own stay there
(`replication.plan.planner`, `replication.plan.backfill_plan`, `state.state_writer.write_partition_state`).
May import: every core package below it (`errors`, `process`, `reporting`, `config`, `mm2`,
`kafka`, `clients`, `state`, `replication`, `metadata`, `groups`). Inside `ops`, `dr` may import
`verify`, `control` may import `dr`; the modules here may import every room; no room imports these
modules (tests/unit/test_layers.py).
"""
