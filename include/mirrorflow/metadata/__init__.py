"""Metadata sync of a flow: remote topics and partitions, topic configs, topic ACLs.

Owns: the entry point (`sync`), topic and config planning/applying (`topic_sync`), topic ACL sync
(`acl_sync`) and the report they share (`sync_report`). Never deletes anything on the target.
May import: `mirrorflow.errors`, `reporting`, `config`, `mm2`, `kafka`, `clients`, `state` (the flow
state only).
"""
