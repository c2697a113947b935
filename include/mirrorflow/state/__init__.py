"""Replication state on the TARGET cluster: what was copied, where it landed, what comes next.

Owns: state topic names, placement and creation (`state_topics`), record codecs (`records`), the
exact offset map (`offset_map`, pure) and what it keeps below its floor (`landmarks`, pure), its
snapshots and folding (`snapshot`, `compaction`), reading progress and the map back (`store`),
aborting what a crashed copy left open (`fencing`), writing
state inside a copy transaction or in one of its own (`state_writer`), and the flow's control
records: its lease (`lease`), operating state (`flow_state`), operations history (`history`), run log
(`run_log`) and the runs' unit results (`run_results`).
Record formats are documented in docs/state.md.
May import: `mirrorflow.errors`, `process`, `config`, `mm2`, `kafka`, `clients`.
"""
