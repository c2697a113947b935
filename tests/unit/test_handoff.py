"""How plan and results travel without a shared disk: the plan's XCom text, the results' records on
the target (chunked, compressed, the newest complete write wins), and the check that every planned
unit has a result."""
from __future__ import annotations

import pytest

from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.executors.handoff import check_results, new_run_id
from mirrorflow.replication.plan.run_plan import Plan, Unit
from mirrorflow.replication.task.reader import OPEN_END
from mirrorflow.state.run_results import decode, encode


def unit(topic: str, p: int, start: int, end: int) -> Unit:
    return Unit(topic, p, f"A.{topic}", start, end)


def plan_of(*tasks: list[Unit]) -> Plan:
    return Plan("A->B", "/c.yaml", list(tasks), run="r-1")


def test_the_plan_travels_as_one_string_and_comes_back_equal():
    plan = plan_of([unit(f"t{i}", i % 50, i, i + 5) for i in range(2000)])
    text = plan.encode()
    assert isinstance(text, str) and text.startswith("mfplan1:")
    assert Plan.decode(text) == plan
    with pytest.raises(MirrorflowError, match="not a mirrorflow plan"):
        Plan.decode("/tmp/runs/A-B/plan.json")  # what an older plan task put in XCom
    with pytest.raises(MirrorflowError, match="damaged"):
        Plan.decode(text[:-40])


def test_run_ids_are_safe_and_never_repeat():
    a, b = new_run_id("manual__2026-11-23T01:00:00+00:00"), new_run_id("manual__2026-11-23T01:00:00+00:00")
    assert a != b and a.startswith("manual__2026-11-23T01_00_00_00_00-")
    assert set(a) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def test_results_are_chunked_and_the_newest_complete_write_wins():
    results = [{"topic": "t", "partition": i, "start": 0, "status": "ok", "records": i} for i in range(3000)]
    first = encode("r-1", {"results": results[:1]}, chunk=64)
    second = encode("r-1", {"results": results}, chunk=4096)
    assert len(second) > 1 and all(v.startswith(f"{i}/{len(second)}\n".encode()) for i, v in enumerate(second))
    assert decode(first + second) == {"results": results, "run": "r-1"}
    # a write cut short (the driver died between chunks) never hides the complete one before it
    assert decode(second + first[:-1]) == {"results": results, "run": "r-1"}
    assert decode(second[:-1]) is None
    assert decode([]) is None


def test_a_planned_unit_without_a_result_is_an_error_naming_it():
    plan = plan_of([unit("orders", 0, 0, 100), unit("orders", 1, 5, 9)], [unit("clicks", 2, 7, OPEN_END)])
    got = [{"topic": "orders", "partition": 0, "start": 0, "status": "ok"}]
    with pytest.raises(MirrorflowError) as exc:
        check_results(plan, got)
    assert str(exc.value).startswith(
        "flow A->B: run r-1 has no result for 2 of its 3 planned unit(s): orders[1] 5..9, clicks[2] 7..end"
    )
    full = got + [
        {"topic": "orders", "partition": 1, "start": 5, "status": "skipped"},
        {"topic": "clicks", "partition": 2, "start": 7, "status": "ok"},
    ]
    assert check_results(plan, full) == full
    assert check_results(plan_of(), []) == []
