"""Pure tests of what the offset map keeps below its floor (state.landmarks): a group is never moved
past a record it has not read, however often the map is folded and pruned, in source order or not."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from mirrorflow.state.landmarks import Pieces, Span, inverted, landmark_offsets, run_piece, span_piece, thin
from mirrorflow.state.offset_map import Folded, MapEntry, PartitionMap, Run, Translation
from mirrorflow.state.snapshot import Snapshot


def E(src_from, src_to, runs, tgt_end):
    return MapEntry("t", 0, src_from, src_to, tuple(Run(*r) for r in runs), tgt_end)


def history(n, rnd, start=0, tgt=0, holes=0.0):
    """n exactly-once transactions of 1..20 source offsets (a commit marker after each on the
    target), with compaction holes at rate `holes`."""
    out, s, t = [], start, tgt
    for _ in range(n):
        size = rnd.randint(1, 20)
        runs, run = [], None
        for o in range(s, s + size):
            if rnd.random() < holes:
                run = None
                continue
            if run is None:
                run = [o, t, 0]
                runs.append(run)
            run[2] += 1
            t += 1
        out.append(E(s, s + size, [tuple(r) for r in runs], t))
        s, t = s + size, t + 1
    return out, s, t


def folds(k, n, rnd, holes):
    """k batches of `history(n)` one after the other: (the batches, the next source and target offsets)."""
    batches, s, t = [], 0, 0
    for _ in range(k):
        b, s, t = history(n, rnd, s, t, holes=holes)
        batches.append(b)
    return batches, s, t


def placed(entries):
    """source offset -> target offset of every copied record (the earliest copy)."""
    out = {}
    for e in entries:
        for r in e.runs:
            for i in range(r.count):
                out[r.src + i] = min(out.get(r.src + i, 1 << 62), r.tgt + i)
    return out


def check_never_skips(pm, truth, lo, hi):
    """Every record at or after g lies at or after where g resumes; `reread` bounds the records
    before g that lie there too; a status other than reread/pruned means nothing is read again."""
    for g in range(lo, hi):
        tr = pm.translate(g)
        if tr.target_offset is None:
            assert tr.status in ("none", "pruned"), (g, tr)
            continue
        unread = [t for s, t in truth.items() if s >= g]
        assert all(t >= tr.target_offset for t in unread), (g, tr)
        again = sum(1 for s, t in truth.items() if s < g and t >= tr.target_offset)
        assert again <= tr.reread, (g, tr, again)
        if tr.status not in ("reread", "pruned"):
            assert again == 0 and tr.reread == 0, (g, tr)
        if tr.status == "exact" and unread:
            assert tr.target_offset == min(unread), (g, tr)  # exact means at its next record


def fold_repeatedly(batches, max_runs, pins_of):
    """Fold batch after batch into a snapshot, pruning to `max_runs` with the pins of that fold."""
    base = None
    for i, batch in enumerate(batches):
        base = PartitionMap(batch, base=base).pruned(0, max_runs, pins_of(i)).folded()
        base = Snapshot.from_json(Snapshot("t", 0, base).to_json()).folded  # through the record format
    return PartitionMap((), base=base)


# -- the idle group -------------------------------------------------------------------------------
def test_an_idle_group_below_the_raised_floor_stays_exact():
    rnd = random.Random(5)
    batches, s, t = folds(30, 10, rnd, holes=0.2)
    everything = [e for b in batches for e in b]
    truth = placed(everything)
    idle = 37  # committed early, never again
    pm = fold_repeatedly(batches, max_runs=8, pins_of=lambda i: [idle])
    assert pm.floor > 2000 and len(pm.runs) == 8
    assert pm.translate(idle) == PartitionMap(everything).translate(idle)
    assert pm.translate(idle).status in ("exact", "gap") and pm.translate(idle).reread == 0
    check_never_skips(pm, truth, 0, s + 3)
    # bounded: the landmarks and spans grow with the octaves of the history, not with its runs
    assert len(pm.marks) + len(pm.spans) < 80


def test_without_pins_the_map_degrades_to_an_earlier_position_never_a_later_one():
    rnd = random.Random(11)
    batches, s, t = folds(40, 12, rnd, holes=0.1)
    truth = placed([e for b in batches for e in b])
    pm = fold_repeatedly(batches, max_runs=10, pins_of=lambda i: [])
    check_never_skips(pm, truth, 0, s + 3)
    # precision: a group d offsets below the floor re-reads about d / 4 offsets' records at most
    for g in range(0, pm.floor - 64, 7):
        tr = pm.translate(g)
        assert tr.reread <= (pm.floor - g) // 3 + 20, (g, tr)
    reread = [pm.translate(g) for g in range(0, pm.floor) if pm.translate(g).status == "reread"]
    assert reread and all(tr.reread > 0 for tr in reread)
    # at and above the floor nothing changed
    full = PartitionMap([e for b in batches for e in b])
    assert [pm.translate(g) for g in range(pm.floor, s + 3)] == [full.translate(g) for g in range(pm.floor, s + 3)]


def test_the_pins_of_the_last_fold_hold_when_the_groups_cannot_be_read():
    rnd = random.Random(2)
    b1, s, t = history(30, rnd)
    b2, s, t = history(30, rnd, s, t)
    full = PartitionMap(b1 + b2)
    idle = b1[3].src_from + 1
    first = PartitionMap(b1).pruned(0, 5, [idle])
    assert first.pins == (idle,)
    later = PartitionMap(b2, base=first.folded()).pruned(0, 5, None)  # the groups could not be read
    assert later.pins == (idle,) and later.translate(idle) == full.translate(idle)
    # a fold that reads the groups again drops a pin whose group is gone
    assert PartitionMap(b2, base=first.folded()).pruned(0, 5, []).pins == ()


# -- target order is not source order (a backfill) ---------------------------------------------
def test_a_backfilled_map_resumes_where_no_unread_record_is_skipped():
    rnd = random.Random(7)
    live, s, t = history(25, rnd, start=300)  # the flow started at 300 (initial.position latest)
    back, _, t2 = history(40, rnd, start=0, tgt=t)  # then 0.. was backfilled after it
    back = [e for e in back if e.src_to <= 300]
    truth = placed(live + back)
    full = PartitionMap(live + back)
    assert full.reordered
    check_never_skips(full, truth, 0, s + 2)
    # in the backfilled range: at the first live record (it is unread too), re-reading the backfill below g
    g = back[5].src_from
    tr = full.translate(g)
    assert tr.target_offset == 0 and tr.status == "reread"
    assert tr.reread == sum(1 for src in truth if src < g)
    # pruned and folded again and again, the backfill thinned into spans: still never a skip
    pm = fold_repeatedly([live, back[:20], back[20:]], max_runs=6, pins_of=lambda i: [g])
    assert pm.spans and pm.reordered
    check_never_skips(pm, truth, 0, s + 2)


def test_pieces_answer_for_overlapping_and_reordered_spans():
    # a span [0, 100) of 60 records at targets 500..600, a run 40..50 (a later backfill) at 10..20
    ps = Pieces([span_piece(Span(0, 100, 500, 600, 60)), run_piece(40, 10, 10), run_piece(100, 600, 10)])
    assert not ps.regular
    assert ps.resume(45, 700) == 15  # the run's record at 45
    assert ps.resume(60, 700) == 500  # inside the span: its lowest target
    assert ps.resume(100, 700) == 600 and ps.resume(110, 700) == 700
    assert ps.inside_span(60) and not ps.inside_span(0) and not ps.inside_span(100)
    # resuming at 15 from 45: the run's 45..49 are unread; everything of the span may be re-read (60)
    assert ps.rereads(45, 15) == 45 - 40 - 5 + 45
    assert ps.rereads(0, 0) == 0


# -- thinning -----------------------------------------------------------------------------------
def test_landmark_offsets_are_nested_as_the_floor_rises():
    a = set(landmark_offsets(10_000, 0))
    b = set(landmark_offsets(10_500, 0))
    # what the later fold keeps below the earlier floor was kept by the earlier fold
    assert {x for x in b if x < 10_000 - 600} <= a
    assert len(a) < 4 * 14 + 8  # a few per octave
    assert landmark_offsets(10, 0)[:4] == [9, 8, 7, 6]


def test_thin_keeps_pins_and_landmarks_and_is_idempotent():
    runs = [(i * 10, i * 11, 10) for i in range(200)]  # transactions of 10, a marker after each
    keep, spans = thin(runs, [], [555, 1234, 5000], 2000)
    assert 55 in keep and 123 in keep and 199 in keep  # the runs holding the pins, the one below the floor
    assert sum(s.records for s in spans) + 10 * len(keep) == 2000
    again_runs = [runs[i] for i in keep]
    keep2, spans2 = thin(again_runs, spans, [555, 1234], 2000)
    assert [again_runs[i] for i in keep2] == again_runs and spans2 == spans


# -- snapshots: the new format and the old one --------------------------------------------------
def test_snapshot_v2_round_trip_and_v1_without_landmarks():
    rnd = random.Random(3)
    es, s, _ = history(60, rnd, holes=0.2)
    pm = PartitionMap(es).pruned(0, 10, [es[7].src_from])
    snap = Snapshot("t", 0, pm.folded(), {0: 60}, 17)
    raw = json.loads(snap.to_json())
    assert raw["v"] == 2 and raw["marks"] and raw["pins"] == [es[7].src_from]
    back = Snapshot.from_json(snap.to_json())
    assert back == snap
    assert [PartitionMap((), base=back.folded).translate(g) for g in range(s)] == [pm.translate(g) for g in range(s)]
    # a map with nothing below its floor is written as v1: a mirrorflow from before landmarks reads it
    plain = Snapshot("t", 0, PartitionMap(es).folded())
    assert json.loads(plain.to_json())["v"] == 1 and "marks" not in json.loads(plain.to_json())


def test_an_old_snapshot_pruned_by_the_run_bound_gives_no_translation_below_its_floor():
    """A v1 snapshot whose floor was raised by offset.map.max.runs forgot where the records below it
    landed: a group there gets no translation (no checkpoint, no commit), never the floor's record."""
    old = {
        "v": 1,
        "topic": "t",
        "partition": 0,
        "epoch": 0,
        "entries": 10,
        "floor": 60,
        "covered": [[60, 100]],
        "runs": [60, 66, 10, 0, 1, 10, 0, 1, 10, 0, 1, 10],
        "tgt_end": 110,
        "lost": 0,
        "first": 0,
        "end": 100,
        "anchor": 0,
        "folded_to": {"0": 10},
        "updated": 1,
    }
    pm = PartitionMap((), base=Snapshot.from_json(json.dumps(old).encode()).folded)
    assert pm.translate(20) == Translation(20, None, "pruned")
    assert pm.translate(60) == Translation(60, 66, "exact") and pm.translate(100) == Translation(100, 110, "end")
    # the next fold keeps what it knows; below the old floor stays unknown (never guessed)
    later = pm.pruned(0, 2, [20])
    assert later.translate(20) == Translation(20, None, "pruned")
    assert later.translate(75).target_offset <= 82 and later.translate(75).status in ("exact", "reread")
    # and a snapshot of the old format with nothing pruned reads exactly as before
    assert Snapshot.from_json(json.dumps({**old, "floor": 0, "first": 60}).encode()).folded.covered_from is None


def test_folded_defaults_are_the_old_format():
    assert Folded().marks == () and Folded().spans == () and Folded().pins == () and Folded().covered_from is None
    with pytest.raises(Exception, match="5-tuples"):
        Snapshot.from_json(json.dumps({"v": 2, "topic": "t", "partition": 0, "spans": [1, 2]}).encode())



# -- a failback maps the failed-over flow's target back (ops.dr.failback_seeds) --------------------
def reverse_map(fwd, lo, least):
    """The reverse flow's map of target offsets [lo, ...) as a failback seeds it from the forward map `fwd`:
    the runs above the floor swapped, what lies below swapped by `inverted`, in entries through the record
    format (source and target of the reverse flow: the forward flow's target and source)."""
    from mirrorflow.state.records import decode_entry, encode_entry

    hi = fwd.runs[0].tgt
    swapped, spans = inverted(fwd.pieces_below, lo, hi, least, fwd.runs[0].src)
    runs = sorted([Run(*r) for r in swapped] + [Run(r.tgt, r.src, r.count) for r in fwd.runs], key=lambda r: r.src)
    entry = MapEntry("t", 0, lo, fwd.tgt_end, tuple(runs), fwd.end, spans=tuple(spans))
    assert decode_entry(encode_entry(entry)) == entry
    return PartitionMap([decode_entry(encode_entry(entry))])


def test_a_failback_over_a_pruned_map_resumes_a_group_of_the_target_at_or_before_its_next_record():
    """Found by the model-based search (seed 2744423497): a group on the failed-over flow's target inside
    what the forward map kept only as landmarks and spans resumes on the source at or before its next record."""
    rnd = random.Random(17)
    batches, s, t = folds(25, 10, rnd, holes=0.15)
    truth = placed([e for b in batches for e in b])
    fwd = fold_repeatedly(batches, max_runs=6, pins_of=lambda i: [])
    assert fwd.spans and fwd.marks and fwd.floor > 1000
    back = {tgt: src for src, tgt in truth.items()}  # the reverse flow's truth: target offset -> source offset
    rev = reverse_map(fwd, 0, 0)
    assert rev.floor == max(sp.src_end for sp in rev.spans) and rev.spans
    check_never_skips(rev, back, 0, t + 2)
    # exact where the forward map kept runs: above its floor and at every landmark
    for m in fwd.marks:
        assert rev.translate(m.tgt + m.count - 1) == Translation(m.tgt + m.count - 1, m.src + m.count - 1, "exact")
    first = fwd.runs[0]
    assert rev.translate(first.tgt) == Translation(first.tgt, first.src, "exact")
    # folded and pruned again as the reverse flow runs on: still never a skip
    again = PartitionMap((), base=Snapshot.from_json(Snapshot("t", 0, rev.pruned(0, 4, []).folded()).to_json()).folded)
    check_never_skips(again, back, 0, t + 2)


def test_what_an_old_pruned_map_forgot_maps_back_to_the_lowest_source_offset_that_can_hold_it():
    """A forward map pruned by a mirrorflow before landmarks knows nothing below its floor: the failback's
    reverse map resumes a group there at the lowest source offset that can hold its next record (the
    first the forward flow copied, or the source's log start), a re-read, never past a record."""
    rnd = random.Random(4)
    es, s, t = history(30, rnd, start=500, tgt=0)
    truth = placed(es)
    fwd = PartitionMap(es).pruned(0, 5, [])
    fwd = PartitionMap((), base=replace(fwd.folded(), marks=(), spans=(), forgotten=fwd.floor))  # what v1 kept
    assert not fwd.pieces_below and fwd.translate(510).status == "pruned"
    back = {tgt: src for src, tgt in truth.items()}
    for least in (500, 530):  # the first copied; the source's log start, above it (older records deleted)
        rev = reverse_map(fwd, 0, least)
        for g in range(0, t + 2):
            tr = rev.translate(g)
            unread = [a for b, a in back.items() if b >= g]
            assert tr.target_offset is not None and all(a >= min(tr.target_offset, a) for a in unread)
            assert tr.target_offset <= max(min(unread, default=tr.target_offset), least), (g, tr)
            if g < fwd.runs[0].tgt:
                assert tr.target_offset == least, (g, tr)
