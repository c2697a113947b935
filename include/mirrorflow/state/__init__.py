"""Replication state on the TARGET cluster: what was copied, where it landed, what comes next.

Owns: state topic names, placement and creation (`state_topics`), record codecs (`records`), the exact
offset map (`offset_map`, pure), reading progress and the map back (`store`), aborting what a
crashed copy left open (`fencing`), and writing state inside a copy transaction (`state_writer`).
Record formats are documented in docs/state.md.
May import: `mirrorflow.errors`, `config`, `mm2`, `kafka`, `clients`.
"""
