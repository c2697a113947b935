"""Metadata sync of a flow: remote topics and partitions, topic configs, topic ACLs, read-only mirrors.

Owns: the entry point (`sync`), topic and config planning/applying (`topic_sync`), topic ACL sync
(`acl_sync`), read-only mirrors (`read_only`: the DENY the sync and the failback put on, the
failover's promotion lifts) and the report they share (`sync_report`). Never deletes anything on the
target but the read-only DENY a failover lifts.
May import: `mirrorflow.errors`, `reporting`, `config`, `mm2`, `kafka`, `clients`, `state` (the flow
state, and the history's `promote` line).
"""
