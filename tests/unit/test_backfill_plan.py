"""Backfill, the pure parts: WHEN parsing (and the form's pattern agreeing with it), per-partition
planning (ledger, retention gaps, `start`), the copier's ranges for a backfill unit, the progress
after an out-of-order copy, and the offset map over runs that are not in target order."""

from __future__ import annotations

import re

import pytest

from mirrorflow.errors import ConfigError
from mirrorflow.replication.plan.backfill_plan import plan_partition, units_of
from mirrorflow.replication.plan.planner import PartitionInput
from mirrorflow.replication.plan.run_plan import Unit
from mirrorflow.replication.plan.when import WHEN_PATTERN, When
from mirrorflow.replication.task.copier import ranges_to_copy
from mirrorflow.state.offset_map import MapEntry, PartitionMap, Run, Translation
from mirrorflow.state.records import Progress


@pytest.mark.parametrize(
    "text, kind, value",
    [
        ("earliest", "earliest", 0),
        ("latest", "latest", 0),
        ("start", "start", 0),
        ("offset:42", "offset", 42),
        ("2026-01-01T00:00:00Z", "time", 1767225600000),
        ("2026-01-01T01:00:00.5+01:00", "time", 1767225600500),
    ],
)
def test_when_parses_the_documented_forms_and_the_form_pattern_agrees(text, kind, value):
    assert When.parse(text, "--from") == When(kind, value)
    assert re.fullmatch(WHEN_PATTERN, text)


@pytest.mark.parametrize(
    "text, message",
    [
        ("yesterday", "--to: expected earliest (source log start), latest (source end), start"),
        ("offset:-1", "--to: offset:N needs a non-negative integer N, got 'offset:-1'"),
        ("offset:", "--to: offset:N needs a non-negative integer N"),
        ("2026-01-01T00:00:00", "--to: the time '2026-01-01T00:00:00' needs a time zone"),
        ("2026-13-01T00:00:00Z", "--to: expected earliest"),
        ("", "--to: expected earliest"),
    ],
)
def test_bad_when_is_one_config_error_naming_the_option(text, message):
    with pytest.raises(ConfigError) as exc:
        When.parse(text, "--to")
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)
    if text != "2026-13-01T00:00:00Z":  # the pattern checks the shape, the parser the calendar
        assert not re.fullmatch(WHEN_PATTERN, text)


def pi(log_start=0, end=100, covered=((60, 100),), nxt=100, target_partitions=1):
    prog = Progress("t", 0, nxt, tuple(covered), 40) if nxt >= 0 else None
    return PartitionInput("t", 0, "A.t", log_start, end, prog, None, "id", "tid", -1, target_partitions)


def test_plan_partition_subtracts_the_ledger_and_reports_retention_gaps():
    bp = plan_partition(pi(log_start=10, covered=((30, 40), (60, 100))), When("offset", 5), When("start"), {}, "A->B")
    assert (bp.start, bp.end) == (5, 30)  # start: the lowest covered offset
    assert bp.gaps == [(5, 10)] and bp.todo == [(10, 30)] and bp.offsets == 20 and bp.lost == 5
    bp = plan_partition(pi(log_start=10, covered=((30, 40), (60, 100))), When("earliest"), When("latest"), {}, "A->B")
    assert bp.gaps == [] and bp.todo == [(10, 30), (40, 60)]
    units = units_of(bp, pi(), 15)
    assert [(u.start, u.end, u.backfill) for u in units] == [
        (10, 25, True),
        (25, 30, True),
        (40, 55, True),
        (55, 60, True),
    ]
    # a time with no record at or after it resolves to the end; offsets past the end clamp to it
    bp = plan_partition(pi(), When("time", 1), When("offset", 500), {"from": {("t", 0): -1}}, "A->B")
    assert (bp.start, bp.end, bp.todo) == (100, 100, [])
    bp = plan_partition(pi(), When("time", 1), When("latest"), {"from": {("t", 0): 20}}, "A->B")
    assert bp.todo == [(20, 60)]


def test_plan_partition_skips_with_a_reason():
    bp = plan_partition(pi(nxt=-1), When("earliest"), When("start"), {}, "A->B")
    assert bp.skipped.startswith("the flow has not copied this partition yet, so `start` is unknown")
    bp = plan_partition(pi(target_partitions=0), When("earliest"), When("latest"), {}, "A->B")
    assert "run the sync DAG or `mirrorflow sync --flow A->B` first" in bp.skipped
    assert plan_partition(pi(), When("offset", 50), When("offset", 20), {}, "A->B").todo == []


def test_backfill_unit_copies_below_the_progress_a_normal_unit_does_not():
    prog = Progress("t", 0, 100, ((60, 100),), 40)
    assert ranges_to_copy(Unit("t", 0, "A.t", 0, 80, backfill=True), prog) == [(0, 60)]
    assert ranges_to_copy(Unit("t", 0, "A.t", 0, 80), prog) == []
    assert Unit.from_dict(Unit("t", 0, "A.t", 0, 80, backfill=True).to_dict()).backfill is True


def test_progress_after_a_backfill_batch_keeps_next_and_the_newest_timestamp():
    prog = Progress("t", 0, 100, ((60, 100),), 40, records=40, last_timestamp=9000)
    new = prog.advanced(0, 30, 71, 30, 1000)
    assert new.next == 100 and new.covered == ((0, 30), (60, 100)) and new.tgt_end == 71
    assert new.last_timestamp == 9000 and new.records == 70
    assert new.advanced(100, 101, 73, 1, 9500).last_timestamp == 9500


def out_of_order_map() -> PartitionMap:
    """Live [60, 100) copied first to target 0..39 (a marker at 40), then the backfill [0, 60) to
    target 41..100 in two transactions (markers between)."""
    return PartitionMap(
        [
            MapEntry("t", 0, 60, 100, (Run(60, 0, 40),), 40),
            MapEntry("t", 0, 0, 30, (Run(0, 41, 30),), 71),
            MapEntry("t", 0, 30, 60, (Run(30, 72, 10), Run(45, 82, 15)), 97),  # 40..44: a compaction hole
        ]
    )


@pytest.mark.parametrize("make", [out_of_order_map, lambda: PartitionMap([], out_of_order_map().folded())])
def test_offset_map_over_runs_out_of_target_order_never_skips_the_live_range(make):
    pm = make()
    assert pm.tgt_end == 97 and pm.covered == [(0, 100)]
    # a group at 0 has read nothing: from the target's first record on, every record is unread
    assert pm.translate(0) == Translation(0, 0, "exact")
    # in the backfilled range: the live range (target 0..39) is unread too; the backfill below g is read again
    assert pm.translate(29) == Translation(29, 0, "reread", 0, 29)
    assert pm.translate(42) == Translation(42, 0, "reread", 0, 40)  # the hole 40..44: 40 records below 42
    # in the live range: exactly its next record, re-reading the backfilled records after it (55)
    assert pm.translate(60) == Translation(60, 0, "reread", 0, 55)
    assert pm.translate(99) == Translation(99, 39, "reread", 0, 55)
    assert pm.translate(100) == Translation(100, 97, "end")
    assert pm.target_of(45) == 82 and pm.target_of(42) is None
    # pruning below a floor keeps everything at or above it as it was
    pruned = pm.pruned(floor=20)
    assert pruned.translate(25) == pm.translate(25) and pruned.translate(60) == pm.translate(60)
    assert pruned.translate(100).target_offset == 97


def test_a_group_moving_from_the_backfilled_range_into_the_live_one_is_not_held():
    from mirrorflow.groups.checkpoint_store import CheckpointStore, plan_checkpoints
    from mirrorflow.groups.translation import TranslatedOffset
    from mirrorflow.mm2.formats import Checkpoint

    assert out_of_order_map().reordered
    assert not PartitionMap([MapEntry("t", 0, 0, 10, (Run(0, 0, 10),), 10)]).reordered
    store = CheckpointStore([Checkpoint("g", "A.t", 0, 30, 72, "")])  # in the backfilled range
    moved = TranslatedOffset("g", "t", 0, 60, "A.t", 0, "exact", reordered=True)  # into the live one
    assert [a for _, a in plan_checkpoints(store, [moved])[0]] == ["advanced"]
    # the same move back on a map in source order is MM2's guard case: held
    plain = TranslatedOffset("g", "t", 0, 60, "A.t", 0, "exact")
    assert [a for _, a in plan_checkpoints(store, [plain])[0]] == ["held"]
    # and without a forward source move nothing changes (same upstream, lower downstream: held)
    same = TranslatedOffset("g", "t", 0, 30, "A.t", 0, "exact", reordered=True)
    assert [a for _, a in plan_checkpoints(store, [same])[0]] == ["held"]
