"""Write this directory's fixture of the state records a mirrorflow version writes, with THAT version's
own code: the progress of a partition, its offset-map entries, and its folded, pruned snapshot.

    git archive <commit> include | tar -x -C /tmp/at-<commit>
    PYTHONPATH=/tmp/at-<commit>/include python tests/unit/state_formats/generate.py <name> > tests/unit/state_formats/<name>.json

One story for every version (tests/unit/test_state_formats.py reads each fixture with today's code):
source partition `orders`[0], offsets 0..9 copied in two transactions (target 0..4, a commit marker at 5,
then 6..10), 10..12 lost to retention, 12..16 copied (target 12..15), then a unit cut short: 20..24 copied
after a hole 16..20 (what the unit jump of releases before `origin` left: `next` at 24, nothing below it
planned again; 0.2.0 itself writes `next` at the first hole, its fixture keeps the same record to compare).
The map is folded and pruned to its newest run (`offset.map.max.runs` 1).

Fixtures: `before-landmarks` (7ab0140^: progress without `origin`, snapshot format v1), `before-origin`
(cecb6a0^: snapshot v2 with landmarks, progress without `origin`), `0.2.0` (55a2e69). A new state format
gets its fixture from the last commit before it.
"""

from __future__ import annotations

import inspect
import json
import sys

from mirrorflow.state import records
from mirrorflow.state.offset_map import MapEntry, PartitionMap, Run
from mirrorflow.state.records import Progress, encode_entry
from mirrorflow.state.snapshot import Snapshot

ENTRIES = [
    MapEntry("orders", 0, 0, 5, (Run(0, 0, 5),), 5),
    MapEntry("orders", 0, 5, 10, (Run(5, 6, 5),), 11),
    MapEntry("orders", 0, 10, 16, (Run(12, 12, 4),), 16, lost=2),
    MapEntry("orders", 0, 20, 24, (Run(20, 17, 4),), 21),
]


def progress() -> Progress:
    fields = inspect.signature(Progress).parameters
    kw = {"records": 17, "last_timestamp": 1_764_000_000_000, "updated": 1_764_000_000_500, "gaps": ((10, 12),),
          "topic_id": "Z8yq1rZ9Tqa4mW3cH5b0nA", "target_topic": "A.orders", "target_topic_id": "Qm9wbGFuZXRzLmNvbQA"}
    if "origin" in fields:
        kw["origin"] = 0
    return Progress("orders", 0, 24, ((0, 16), (20, 24)), 21, 2, **kw)


def snapshot() -> Snapshot:
    pm = PartitionMap(ENTRIES)
    pruned = pm.pruned(max_runs=1)
    return Snapshot("orders", 0, pruned.folded(), {0: 4}, 1_764_000_000_900)


def main(name: str) -> None:
    out = {
        "written_by": name,
        "progress_format": records.FORMAT_VERSION,
        "progress": progress().to_json().decode(),
        "entries": [encode_entry(e).decode() for e in ENTRIES],
        "snapshot": snapshot().to_json().decode(),
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
