"""Pure planning: ranges from progress / initial position, ledger respected, units and tasks bounded."""
from __future__ import annotations

import pytest

from mirrorflow.errors import ConfigError
from mirrorflow.replication.plan.planner import PartitionInput, parse_initial_position, plan_units
from mirrorflow.replication.plan.run_plan import Plan
from mirrorflow.state.records import Progress


def P(next_, covered, tgt_end=0):
    return Progress("t", 0, next_, tuple(covered), tgt_end)


def test_fresh_partition_starts_at_initial_position_and_is_cut_into_units():
    tasks, summary = plan_units([PartitionInput("t", 0, "A.t", 10, 35, None, 10)], max_records=10, parallelism=4)
    units = [u for t in tasks for u in t]
    assert [(u.start, u.end) for u in units] == [(10, 20), (20, 30), (30, 35)]
    assert len(tasks) == 1  # the units of a partition run in one task, in order
    assert summary[0]["planned"] == 25 and summary[0]["lost_expected"] == 0


def test_progress_is_continued_and_covered_ranges_are_never_planned():
    pi = PartitionInput("t", 0, "A.t", 0, 100, P(40, [(0, 40), (60, 70)]), None)
    tasks, _ = plan_units([pi], max_records=1000, parallelism=1)
    assert [(u.start, u.end) for t in tasks for u in t] == [(40, 60), (70, 100)]


def test_nothing_new_plans_nothing():
    tasks, summary = plan_units([PartitionInput("t", 0, "A.t", 0, 50, P(50, [(0, 50)]), None)], 10, 2)
    assert tasks == [] and summary[0]["planned"] == 0


def test_truncated_source_is_expected_as_lost():
    tasks, summary = plan_units([PartitionInput("t", 0, "A.t", 80, 100, P(50, [(0, 50)]), None)], 100, 2)
    assert [(u.start, u.end, u.log_start) for t in tasks for u in t] == [(50, 100, 80)]
    assert summary[0]["lost_expected"] == 30


def test_tasks_are_at_most_parallelism_and_keep_each_partitions_units_together_in_order():
    inputs = [PartitionInput(f"t{i}", p, f"A.t{i}", 0, 25, None, 0) for i in range(3) for p in range(2)]
    tasks, _ = plan_units(inputs, max_records=10, parallelism=4)
    assert len(tasks) == 4
    assert sum(len(t) for t in tasks) == 18
    owner: dict = {}
    for i, t in enumerate(tasks):
        ends: dict = {}
        for u in t:
            key = (u.topic, u.partition)
            assert owner.setdefault(key, i) == i  # one task per partition
            assert u.start == ends.get(key, 0)  # in order, without holes
            ends[key] = u.end


def test_tasks_are_the_slots_of_a_round_robin_deal():
    """A partition's task is its slot (its transactional producer's), the same whatever the load:
    the sorted partitions dealt round-robin (MM2's assignment), not balanced by offsets per run."""
    sizes = [100, 90, 10, 10, 10, 10, 5, 5]
    inputs = [PartitionInput("t", p, "A.t", 0, n, None, 0) for p, n in enumerate(sizes)]
    tasks, _ = plan_units(inputs, max_records=1000, parallelism=3)
    assert [[u.partition for u in t] for t in tasks] == [[0, 3, 6], [1, 4, 7], [2, 5]]
    assert [sum(u.records for u in t) for t in tasks] == [115, 105, 20]
    many, _ = plan_units([PartitionInput("t", p, "A.t", 0, 1, None, 0) for p in range(200)], 1000, 8)
    assert [len(t) for t in many] == [25] * 8  # 200 quiet partitions: 8 tasks of 25 units, not 25 waves


def test_initial_latest_plans_only_an_anchor_for_old_data():
    tasks, _ = plan_units([PartitionInput("t", 0, "A.t", 0, 500, None, 500)], 100, 2)
    assert [(u.start, u.end) for t in tasks for u in t] == [(500, 500)]
    # once anchored, only what came after it is planned
    tasks, _ = plan_units([PartitionInput("t", 0, "A.t", 0, 520, P(500, []), None)], 100, 2)
    assert [(u.start, u.end) for t in tasks for u in t] == [(500, 520)]


def test_plan_round_trips_without_secrets():
    tasks, summary = plan_units([PartitionInput("t", 1, "A.t", 0, 5, None, 0)], 10, 2)
    plan = Plan("A->B", "/x/mf.yaml", tasks, summary)
    d = plan.to_dict()
    assert set(d) == {"flow", "config", "planned_at", "tasks", "partitions", "lease", "run"}
    assert Plan.from_dict(d) == plan  # the plan file as the copy job reads it: the same plan


def test_initial_position_parsing():
    assert parse_initial_position("earliest") == ("earliest", None)
    assert parse_initial_position("1700000000000") == ("timestamp", 1700000000000)
    assert parse_initial_position("2024-01-01T00:00:00Z") == ("timestamp", 1704067200000)
    with pytest.raises(ConfigError):
        parse_initial_position("yesterday")
