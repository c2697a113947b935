"""Operations over a flow: the one place an operation goes.

An operation is one core function that the CLI (`cli/<command>.py`), a DAG
(`mirrorflow_airflow/dag_builders/`) and where it makes sense the status page call: status and
its page (`status`, `status_page`, `status_html`), metrics (`metrics`), pause/resume/stop
(`flow_control`), failover, failback and the drill that rehearses a failover (`failover`,
`failback`, `drill`), verify (`verify`, pure walk in `verify_walk`), backfill (`backfill`), reseed
(`reseed`), takeover from MirrorMaker 2 (`takeover`) and the ACLs a flow's principals need
(`required_acls`). Their pure parts that the layers below own stay there (`replication.planner`,
`replication.backfill_plan`, `state.state_writer.write_partition_state`).
May import: every core package below it (`errors`, `process`, `reporting`, `config`, `mm2`,
`kafka`, `clients`, `state`, `replication`, `metadata`, `groups`).
"""
