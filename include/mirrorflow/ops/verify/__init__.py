"""Verification: is the target a faithful copy of the source, compared through the exact offset map.

Owns: the operation and its `Verifier`, which judges one partition after another (`verify`); what
it reads, in batched calls before any partition and then each side's records (`verify_reads`); the
pure walk of a partition's source and target records (`verify_walk`); the 'verified up to' marks it
trusts and records (`verified_marks`; stored by `state.verified`) and its report (`verify_report`).
May import: every core package below `ops` (`errors`, `reporting`, `config`, `mm2`, `kafka`,
`clients`, `state`, `replication`); no other room of `ops` (the failover and the drill call it).
"""
