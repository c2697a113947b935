"""Consumer groups across clusters: exact checkpoints, group offset sync, heartbeats.

Owns: listing groups and fetching their committed offsets (`group_offsets`), translation of
committed source offsets and MM2 checkpoints (`checkpoint`), keeping the offset map bounded after
each checkpoint pass (`map_upkeep`), committing checkpoints on the target (`offset_sync`), MM2
heartbeats and replication latency (`heartbeat`), and the one renderer of each of their results
(`render`), used by the CLI and the DAG tasks alike.
May import: `mirrorflow.errors`, `reporting`, `config`, `mm2`, `kafka`, `clients`, `state`.
"""
