"""The failback's plan: its id (what it writes and read, not the moving ends), why it cannot be
started, its JSON (XCom), and what moved between it and the same state read again."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from mirrorflow.errors import StateError
from mirrorflow.ops.dr.failback_plan import Divergence, FailbackPlan, Loss, Seed, plan_moves


def plan(**changes) -> FailbackPlan:
    base = FailbackPlan(
        "A->B", "B->A", 1000, "3f9c0a1b2c4d", True,
        divergence=(Divergence("t", 0, ((10, 12),), 2),),
        split_brain=(Divergence("t", 0, ((12, 13),), 1),),
        seeds=(Seed("t", 0, 13, 0, 10, 13, 3, ((13, 16),), ((0, 13),)),),
        inverse="abc", read_to={"t:0": 16}, at_ms=5,
    )  # fmt: skip
    return replace(base, **changes)


def test_the_id_follows_what_the_failback_writes_not_the_ends_both_sides_move():
    p = plan()
    assert p.id == plan(at_ms=99).id  # when it was made
    assert p.id == plan(split_brain=(Divergence("t", 0, ((12, 20),), 8),)).id  # A accepts more meanwhile
    assert p.id == plan(seeds=(replace(p.seeds[0], target_end=40),)).id  # A's end moves
    assert p.id != plan(seeds=(replace(p.seeds[0], start=14),)).id
    assert p.id != plan(accept_loss=True).id and p.id != plan(inverse="abd").id


def test_json_round_trip_keeps_the_id_and_refuses_a_changed_plan():
    p = plan(losses=(Loss("t", 0, "retention", ((13, 15),), 2, "deleted"),), accept_loss=True)
    d = json.loads(json.dumps(p.to_dict()))
    assert FailbackPlan.from_dict(d) == p and d["id"] == p.id
    d["seeds"][0]["start"] = 99
    with pytest.raises(StateError, match=rf"failback plan {p.id}: its content does not match its id"):
        FailbackPlan.from_dict(d)
    with pytest.raises(StateError, match="not a failback plan"):
        FailbackPlan.from_dict({"flow": "A->B"})


def test_losses_block_the_plan_until_accepted_and_some_cannot_be_accepted():
    lost = Loss("t", 0, "retention", ((13, 15),), 2, "deleted")
    assert plan().blocked is None
    assert "accept it with --accept-loss" in (plan(losses=(lost,)).blocked or "")
    assert plan(losses=(lost,), accept_loss=True).blocked is None
    hard = Loss("t", 1, "truncated", ((3, 9),), -1, "where it was cut cannot be told", acceptable=False)
    assert plan(losses=(lost, hard), accept_loss=True).blocked == "t[1]: at 3..9 (truncated): where it was cut " \
        "cannot be told"


def test_plan_moves_names_what_moved():
    p = plan()
    assert plan_moves(p, plan(at_ms=7)) == []
    new = Seed("u", 0, 0, 0, 0, -1, 5, ((0, 5),), ())
    assert plan_moves(p, plan(seeds=(*p.seeds, new))) == ["u[0]: a new partition on 'B'"]
    lost = Loss("t", 0, "retention", ((13, 15),), 2, "deleted")
    assert plan_moves(p, plan(losses=(lost,))) == ["lost now: t[0]: 2 offsets at 13..15 (retention): deleted"]
    assert plan_moves(p, plan(seeds=(replace(p.seeds[0], to_copy=2),))) == [
        "t[0]: 2 records to copy at 13..16, not 3"]
