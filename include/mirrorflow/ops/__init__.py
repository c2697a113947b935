"""Operations over whole flows: status today; failover, failback, verify and backfill land here.

May import: every core package below it (`config`, `mm2`, `kafka`, `clients`, `state`,
`replication`, `metadata`, `groups`).
"""
