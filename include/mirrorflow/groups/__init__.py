"""Consumer groups across clusters: exact checkpoints, group offset sync, heartbeats.

Owns: translation of committed source offsets and MM2 checkpoints (`checkpoint`), committing them
on the target (`offset_sync`), MM2 heartbeats and replication latency (`heartbeat`), and the one
renderer of each of their results (`render`), used by the CLI and the DAG tasks alike.
May import: `mirrorflow.errors`, `config`, `mm2`, `kafka`, `clients`, `state`.
"""
