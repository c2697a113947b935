"""The ACLs of a flow: what its principals need (`required_acls`: printed, checked, created with
`mirrorflow acls --apply`) and what the applications need on the target after a failover
(`failover_acls`: derived from their ACLs on the source, or from those the ACL sync replicated).
May import: every core package below `ops` (`errors`, `reporting`, `config`, `mm2`, `kafka`,
`clients`, `state`, `metadata`, `groups`); no other room of `ops`.
"""
