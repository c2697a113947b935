"""The protocol of an operation a person approves (ops.dr.gated), pure: what it plans, refuses, asks and
commits, over an operation whose plan and commit are recorded instead of reaching a cluster (the
failover's and the failback's own steps are tested on real brokers: tests/integration/test_failover.py,
test_failback.py, test_client_switch.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from mirrorflow.config.loading import parse
from mirrorflow.errors import ConfigError
from mirrorflow.ops.dr.caller import Caller
from mirrorflow.ops.dr.failover_plan import PlanMovedError
from mirrorflow.ops.dr.gated import GatedOperation, settled


@dataclass
class P:
    id: str
    blocked: str | None = None

    def to_dict(self):
        return {"id": self.id, "blocked": self.blocked}


@dataclass
class R:
    plan: P | None
    note: str | None = None
    done: bool = False
    approved_by: str | None = None
    switch_steps: list = field(default_factory=list)
    switch: object = None

    def render(self):
        return f"plan {self.plan.id if self.plan else None}"

    def markdown(self):
        return self.render()

    def figures(self):
        return {}


def cfg(steps=()):
    return parse({
        "clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
        "flows": {"A->B": {"topics": "t", "client.switch.failover": list(steps)}},
    })


def op(plan: P | None, calls: list):
    def planned(cfg, flow, params, caller):
        calls.append(("plan", dict(params), caller.dry_run, caller.via))
        return R(plan)

    def commit(cfg, flow, plan, approver, report, via):
        calls.append(("commit", plan.id, approver, via))
        return R(plan, done=True, approved_by=approver)

    return GatedOperation("failover", "committed", planned, commit, lambda d: P(**d))


def carry(plan, confirm=lambda report: True, **kw):
    c = cfg()
    calls: list = []
    rep = op(plan, calls).carry_out(c, c.flow("A->B"), {"mode": "planned"}, Caller(**kw), confirm)
    return rep, calls


def test_the_confirmed_plan_is_committed_with_its_approver():
    asked = []
    rep, calls = carry(P("p1"), confirm=lambda r: asked.append(r.plan.id) or True, by="ann", via="cli")
    assert asked == ["p1"]
    assert calls == [("plan", {"mode": "planned"}, False, "cli"), ("commit", "p1", "ann", "cli")]
    assert rep.done and rep.approved_by == "ann" and settled(rep)


def test_nothing_to_do_is_returned_unasked_and_settled():
    c = cfg()
    calls: list = []
    o = op(None, calls)
    o2 = GatedOperation("failover", "committed", lambda *a: R(None, note="nothing to do: done before"), o.commit,
                        o.read_plan)
    rep = o2.carry_out(c, c.flow("A->B"), {}, confirm=lambda r: pytest.fail("asked"))
    assert rep.plan is None and settled(rep) and not rep.done and calls == []


def test_a_plan_that_is_not_the_approved_one_commits_nothing():
    with pytest.raises(PlanMovedError, match=r"failover of A->B: the plan is p2 now, not p1: .* nothing committed"):
        carry(P("p2"), plan_id="p1")


def test_a_dry_run_plans_and_commits_nothing():
    rep, calls = carry(P("p1"), dry_run=True, confirm=lambda r: pytest.fail("asked"))
    assert rep.note == "dry run: nothing changed" and [c[0] for c in calls] == ["plan"] and calls[0][2] is True
    assert not settled(rep)


def test_a_blocked_plan_is_not_asked_and_not_committed():
    rep, calls = carry(P("p1", blocked="verify found 2 mismatches"), confirm=lambda r: pytest.fail("asked"))
    assert rep.note == "plan p1 cannot be committed: verify found 2 mismatches; nothing changed"
    assert [c[0] for c in calls] == ["plan"] and not settled(rep)


def test_a_plan_not_confirmed_changes_nothing():
    rep, calls = carry(P("p1"), confirm=lambda r: False)
    assert rep.note == "not confirmed: nothing changed" and [c[0] for c in calls] == ["plan"]


def test_a_client_switch_step_that_cannot_be_imported_stops_before_the_plan():
    c = cfg([{"name": "alias", "callable": "no_such_module_x:switch"}])
    calls: list = []
    with pytest.raises(ConfigError, match="no_such_module_x"):
        op(P("p1"), calls).carry_out(c, c.flow("A->B"), {})
    assert calls == []  # not planned: a planned failover's drain would have run first
