"""What a failback takes as the failed-over flow's writes on its target and maps back, from that flow's offset
map when it was pruned (ops.dr.failback_seeds, pure parts): every record the flow copied, also where a backfill
put older records after newer ones and the map kept them only as landmarks and spans below its floor."""
from __future__ import annotations

import random

from mirrorflow.ops.dr.failback_seeds import Facts, TargetRead, _below_the_floor, _written
from mirrorflow.state.offset_map import MapEntry, PartitionMap, Run, merge_ranges
from tests.unit.test_offset_map_landmarks import check_never_skips, fold_repeatedly, history, placed


def facts(pm: PartitionMap) -> Facts:
    return Facts(("t", 0), "B", "A->B", None, pm, None, "", 0, 10_000, 10_000, None, [], False, True, 0)


def test_a_backfill_reordered_pruned_map_leaves_none_of_the_flows_copies_to_copy_back_and_maps_them_back():
    rnd = random.Random(23)
    live, s, t = history(40, rnd, start=300)  # the flow started at 300 (initial.position latest)
    back, _, _ = history(40, rnd, start=0, tgt=t)  # then 0.. was backfilled after it on the target
    back = [e for e in back if e.src_to <= 300]
    truth = placed(live + back)
    pm = fold_repeatedly([live, back], max_runs=3, pins_of=lambda i: [])
    first = min(r.tgt for r in pm.runs)
    assert any(not p.exact and p.tgt >= first for p in pm.pieces_below), "a span above the first run"
    assert any(p.exact and p.tgt >= first for p in pm.pieces_below), "a landmark above the first run"
    f = facts(pm)
    _, runs, pruned_map = _written(TargetRead(), f, None)
    assert pruned_map
    _, below, forgot, spans = _below_the_floor(f, 0)
    taken = merge_ranges([*((r.tgt, r.tgt + r.count) for r in runs), *below])
    assert all(any(a <= tgt < b for a, b in taken) for tgt in truth.values()), "a copy the failback would copy back"
    # the reverse map (source: the target's offsets) never moves a group past a record it has not read
    inverse = sorted([*forgot, *(Run(r.tgt, r.src, r.count) for r in runs)], key=lambda r: r.src)
    rev = PartitionMap([MapEntry("t", 0, 0, max(b for _, b in taken), tuple(inverse), s, spans=tuple(spans))])
    check_never_skips(rev, {tgt: src for src, tgt in truth.items()}, 0, max(truth.values()) + 2)
