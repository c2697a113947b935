"""State written by earlier releases, read by today's code: the fixtures in tests/unit/state_formats/ were
written by each version's own code (generate.py there says how), one story each: a partition copied in
two transactions, a range lost to retention, a stretch copied, a hole the unit jump of releases before
`origin` left below `next`, the map folded and pruned to its newest run.

What must hold (docs/state.md, docs/guarantees.md "No holes"): the progress is read as it is, its hole is
found and its `next` is the first offset not copied, whatever `next` the record says; the offset-map
entries decode to the same runs; a snapshot pruned before landmarks (format v1) says `pruned` (no target:
the group keeps its last checkpoint) below its floor, never a wrong offset; every later snapshot translates
exactly, the copied offsets above the floor exactly in every version."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirrorflow.state.offset_map import PartitionMap, Run
from mirrorflow.state.records import Progress, decode_entry
from mirrorflow.state.snapshot import Snapshot

HERE = Path(__file__).parent / "state_formats"
VERSIONS = ("before-landmarks", "before-origin", "0.2.0")


def fixture(name: str) -> dict:
    return json.loads((HERE / f"{name}.json").read_text())


def test_every_version_has_a_fixture():
    assert sorted(p.stem for p in HERE.glob("*.json")) == sorted(VERSIONS)


@pytest.mark.parametrize("name", VERSIONS)
def test_the_progress_is_read_as_it_is_with_its_hole_found(name):
    p = Progress.from_json(fixture(name)["progress"].encode())
    assert (p.topic, p.partition, p.covered, p.gaps, p.lost, p.tgt_end) == ("orders", 0, ((0, 16), (20, 24)),
                                                                           ((10, 12),), 2, 21)
    assert p.holes() == [(16, 20)] and p.next == 16  # the record says 24: the hole below it is planned
    assert p.owned_from == 0 and p.origin == (0 if name == "0.2.0" else -1)
    assert (p.topic_id, p.target_topic, p.epoch) == ("Z8yq1rZ9Tqa4mW3cH5b0nA", "A.orders", 0)


@pytest.mark.parametrize("name", VERSIONS)
def test_the_offset_map_entries_decode_to_the_same_runs(name):
    entries = [decode_entry(e.encode()) for e in fixture(name)["entries"]]
    assert [(e.src_from, e.src_to, e.runs, e.tgt_end, e.lost) for e in entries] == [
        (0, 5, (Run(0, 0, 5),), 5, 0),
        (5, 10, (Run(5, 6, 5),), 11, 0),
        (10, 16, (Run(12, 12, 4),), 16, 2),
        (20, 24, (Run(20, 17, 4),), 21, 0),
    ]
    full = PartitionMap(entries)
    assert [(t.target_offset, t.status) for t in map(full.translate, (3, 14, 21, 24))] == [
        (3, "exact"), (14, "exact"), (18, "exact"), (21, "end")]


@pytest.mark.parametrize("name", VERSIONS)
def test_a_pruned_snapshot_never_places_a_group_on_a_wrong_offset(name):
    snap = Snapshot.from_json(fixture(name)["snapshot"].encode())
    assert (snap.topic, snap.partition, snap.folded.floor, snap.folded_to) == ("orders", 0, 20, {0: 4})
    pm = PartitionMap(base=snap.folded)
    got = [(t.target_offset, t.status) for t in map(pm.translate, (3, 14, 21, 24))]
    if name == "before-landmarks":  # v1 forgot where the records below its floor landed
        assert snap.folded.forgotten == 20
        assert got == [(None, "pruned"), (None, "pruned"), (18, "exact"), (21, "end")]
    else:
        assert got == [(3, "exact"), (14, "exact"), (18, "exact"), (21, "end")]
