"""Pure planning: ranges from progress / initial position, ledger respected, units and waves bounded."""
from __future__ import annotations

import pytest

from mirrorflow.errors import ConfigError
from mirrorflow.replication.planner import PartitionInput, Plan, parse_initial_position, plan_units
from mirrorflow.state.records import Progress


def P(next_, covered, tgt_end=0):
    return Progress("t", 0, next_, tuple(covered), tgt_end)


def test_fresh_partition_starts_at_initial_position_and_is_cut_into_units():
    waves, summary = plan_units([PartitionInput("t", 0, "A.t", 10, 35, None, 10)], max_records=10, parallelism=4)
    units = [u for w in waves for u in w]
    assert [(u.start, u.end) for u in units] == [(10, 20), (20, 30), (30, 35)]
    assert all(len(w) == 1 for w in waves)  # one unit per partition per wave: in order
    assert summary[0]["planned"] == 25 and summary[0]["lost_expected"] == 0


def test_progress_is_continued_and_covered_ranges_are_never_planned():
    pi = PartitionInput("t", 0, "A.t", 0, 100, P(40, [(0, 40), (60, 70)]), None)
    waves, _ = plan_units([pi], max_records=1000, parallelism=1)
    assert [(u.start, u.end) for w in waves for u in w] == [(40, 60), (70, 100)]


def test_nothing_new_plans_nothing():
    waves, summary = plan_units([PartitionInput("t", 0, "A.t", 0, 50, P(50, [(0, 50)]), None)], 10, 2)
    assert waves == [] and summary[0]["planned"] == 0


def test_truncated_source_is_expected_as_lost():
    waves, summary = plan_units([PartitionInput("t", 0, "A.t", 80, 100, P(50, [(0, 50)]), None)], 100, 2)
    assert [(u.start, u.end, u.log_start) for w in waves for u in w] == [(50, 100, 80)]
    assert summary[0]["lost_expected"] == 30


def test_waves_hold_at_most_parallelism_units():
    inputs = [PartitionInput(f"t{i}", p, f"A.t{i}", 0, 25, None, 0) for i in range(3) for p in range(2)]
    waves, _ = plan_units(inputs, max_records=10, parallelism=4)
    assert all(len(w) <= 4 for w in waves)
    assert sum(len(w) for w in waves) == 18
    # the k-th unit of a partition never runs before its (k-1)-th
    seen: dict = {}
    for i, w in enumerate(waves):
        keys = [(u.topic, u.partition) for u in w]
        assert len(keys) == len(set(keys))
        for u in w:
            assert seen.get((u.topic, u.partition), -1) < i
            assert u.start == seen.get(("end", u.topic, u.partition), 0)
            seen[(u.topic, u.partition)] = i
            seen[("end", u.topic, u.partition)] = u.end


def test_initial_latest_plans_only_an_anchor_for_old_data():
    waves, _ = plan_units([PartitionInput("t", 0, "A.t", 0, 500, None, 500)], 100, 2)
    assert [(u.start, u.end) for w in waves for u in w] == [(500, 500)]
    # once anchored, only what came after it is planned
    waves, _ = plan_units([PartitionInput("t", 0, "A.t", 0, 520, P(500, []), None)], 100, 2)
    assert [(u.start, u.end) for w in waves for u in w] == [(500, 520)]


def test_plan_round_trips_without_secrets():
    waves, summary = plan_units([PartitionInput("t", 1, "A.t", 0, 5, None, 0)], 10, 2)
    plan = Plan("A->B", "/x/mf.yaml", waves, summary)
    d = plan.to_dict()
    assert set(d) == {"flow", "config", "planned_at", "waves", "partitions"}
    assert Plan.from_dict(d).units == plan.units


def test_initial_position_parsing():
    assert parse_initial_position("earliest") == ("earliest", None)
    assert parse_initial_position("1700000000000") == ("timestamp", 1700000000000)
    assert parse_initial_position("2024-01-01T00:00:00Z") == ("timestamp", 1704067200000)
    with pytest.raises(ConfigError):
        parse_initial_position("yesterday")
