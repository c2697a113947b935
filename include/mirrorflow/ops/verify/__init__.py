"""Verification: is the target a faithful copy of the source, compared through the exact offset map.

Owns: the operation and its `Verifier`, which reads what a verify needs in a few batched calls
(`verify`), the pure walk of a partition's source and target records (`verify_walk`), the 'verified
up to' marks it trusts and records (`verified_marks`; stored by `state.verified`) and its report
(`verify_report`).
May import: every core package below `ops` (`errors`, `reporting`, `config`, `mm2`, `kafka`,
`clients`, `state`, `replication`); no other room of `ops` (the failover and the drill call it).
"""
