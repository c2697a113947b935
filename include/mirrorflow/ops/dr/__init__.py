"""Disaster recovery: moving a flow's applications to the target and back, and taking over from MM2.

Owns: the failover (`failover`: plan, confirm, commit), split by role like Kafka's mirror module:
its plan (`failover_plan`), report (`failover_report`), preflight (`failover_preflight`), the planned
mode's drain (`failover_drain`), commit (`failover_commit`), the failover record it writes
(`failover_record`) and the take-over of a flow's lease (`lease_takeover`); the failback that starts
the reverse flow (`failback`) with what it reads first (`failback_plan`), its report
(`failback_report`) and the reverse flow's seeded state (`seed_writer`); the drill that rehearses a
failover with nothing moved (`drill`); the take-over from a stopped MirrorMaker 2 (`takeover`).
May import: every core package below `ops` (`errors`, `reporting`, `config`, `mm2`, `kafka`,
`clients`, `state`, `replication`, `metadata`, `groups`) and `ops.verify` (a planned failover and a
drill verify the target).
"""
