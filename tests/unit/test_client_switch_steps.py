"""The client-switch steps' config (client.switch.failover / failback) and the built-in
bootstrap_file step, without clusters (a dry run opens no client)."""

from __future__ import annotations

import os

import pytest

from mirrorflow.config.loading import parse
from mirrorflow.errors import ConfigError
from mirrorflow.ops.dr.caller import Caller
from mirrorflow.ops.dr.client_switch import ClientSwitchError, SwitchContext, bootstrap_file, run_client_switch

BUILTIN = "mirrorflow.ops.dr.client_switch:bootstrap_file"


def config(steps, key: str = "client.switch.failover"):
    return parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
                  "flows": {"A->B": {key: steps}}})


def test_steps_take_a_path_or_a_mapping_and_are_named():
    flow = config(["mypkg.dns:repoint", {"name": "alias", "callable": BUILTIN, "args": {"path": "/x"}},
                   "mypkg.gateway.route"]).flow("A->B")
    assert flow.props["client.switch.failover"] == [
        {"name": "repoint", "callable": "mypkg.dns:repoint", "args": {}, "timeout_seconds": 300},
        {"name": "alias", "callable": BUILTIN, "args": {"path": "/x"}, "timeout_seconds": 300},
        {"name": "route", "callable": "mypkg.gateway.route", "args": {}, "timeout_seconds": 300}]
    assert flow.props["client.switch.failback"] == []


@pytest.mark.parametrize("steps, why", [
    (["not a path"], "step 1: callable: expected a path such as mypkg.switches:repoint_dns, got 'not a path'"),
    (["a.b:c", "d.e:c"], "step 2: the name 'c' is used twice"),
    ([{"callable": "a.b:c", "name": "x y"}], "step 1: name may hold only letters, digits, '_' and '-'"),
    ([{"callable": "a.b:c", "args": ["x"]}], "step 1 (c): args: expected a mapping of keyword arguments"),
    ([{"callable": "a.b:c", "kwargs": {}}],
     "step 1: unknown key(s) kwargs (a step has name, callable, args, timeout_seconds)"),
    ([{"callable": "a.b:c", "timeout_seconds": 0}], "step 1 (c): timeout_seconds: expected a positive whole number"),
])
def test_bad_steps_are_named_by_their_key(steps, why):
    with pytest.raises(ConfigError) as exc:
        config(steps, "client.switch.failback")
    assert exc.value.problems[0][0] == "flows.A->B.client.switch.failback"
    assert exc.value.problems[0][1].startswith(why), exc.value.problems


def ctx(dry_run: bool, cluster: str = "B") -> SwitchContext:
    return SwitchContext("A->B", "failover", "A", "B", cluster, "b:1", "alias", dry_run, "alice")


def test_bootstrap_file_sets_the_key_keeps_the_rest_and_says_what_it_did(tmp_path):
    f = tmp_path / "app.properties"
    f.write_text("# app\nbootstrap.servers = a:1\nclient.id=x\n")
    os.chmod(f, 0o640)
    assert bootstrap_file(ctx(True), str(f)) == f"would set bootstrap.servers=b:1 in {f} (now a:1)"
    assert f.read_text() == "# app\nbootstrap.servers = a:1\nclient.id=x\n"
    assert bootstrap_file(ctx(False), str(f), values={"B": "kafka-b:9092"}) == \
        f"set bootstrap.servers=kafka-b:9092 in {f} (was a:1)"
    assert f.read_text() == "# app\nbootstrap.servers = kafka-b:9092\nclient.id=x\n"
    assert oct(f.stat().st_mode & 0o777) == "0o640"
    assert bootstrap_file(ctx(False), str(f), value="kafka-b:9092") == \
        f"bootstrap.servers in {f} is kafka-b:9092 already"
    assert bootstrap_file(ctx(False), str(f), key="KAFKA_BOOTSTRAP") == f"set KAFKA_BOOTSTRAP=b:1 in {f} (was unset)"
    assert f.read_text().endswith("client.id=x\nKAFKA_BOOTSTRAP=b:1\n")
    assert [p.name for p in tmp_path.iterdir()] == ["app.properties"]  # no temporary file left


def test_a_dry_run_runs_every_step_in_order_and_stops_at_the_first_failure(tmp_path):
    ok, other = tmp_path / "ok.properties", tmp_path / "other.properties"
    ok.write_text("bootstrap.servers=a:1\n")
    other.write_text("bootstrap.servers=a:1\n")
    cfg = config([{"name": "one", "callable": BUILTIN, "args": {"path": str(ok)}},
                  {"name": "two", "callable": BUILTIN, "args": {"path": str(tmp_path / "missing")}},
                  {"name": "three", "callable": BUILTIN, "args": {"path": str(other)}}])
    flow = cfg.flow("A->B")
    with pytest.raises(ClientSwitchError) as exc:
        run_client_switch(cfg, flow, "failover", Caller(dry_run=True))
    rep = exc.value.report
    assert [(s.name, s.ok) for s in rep.steps] == [("one", True), ("two", False)] and rep.not_run == ["three"]
    assert str(exc.value) == (f"failover of A->B: client-switch step 'two' ({BUILTIN}) failed in its dry run: "
                              f"cannot read {tmp_path / 'missing'}: No such file or directory")
    rep = run_client_switch(cfg, flow, "failover", Caller(dry_run=True), start="three")
    assert [s.name for s in rep.steps] == ["three"] and rep.ok and rep.cluster == "B"
    with pytest.raises(ConfigError, match="flow A->B has no client-switch step 'four' after the failover"):
        run_client_switch(cfg, flow, "failover", Caller(dry_run=True), only="four")
    assert ok.read_text() == other.read_text() == "bootstrap.servers=a:1\n"  # nothing changed


def slow_step(ctx, out: str, seconds: float = 0.0, token: str = "") -> str:
    """A user's step (tests): writes the token it was given to `out`, then sleeps."""
    import time

    with open(out, "w") as f:
        f.write(token)
    time.sleep(seconds)
    return f"slept {seconds} s"


def test_a_step_past_its_timeout_fails_named_and_env_args_reach_it_unprinted(monkeypatch, tmp_path):
    """A step that hangs is reported failed after its timeout_seconds (it may still be running: the
    error says so); an argument written `${env:VAR}` reaches the callable resolved, while the
    report, the approval and the error show the reference, never the value."""
    monkeypatch.setenv("MF_SWITCH_TOKEN", "s3cret-token")
    step = {"name": "slow", "callable": "tests.unit.test_client_switch_steps:slow_step", "timeout_seconds": 1,
            "args": {"out": str(tmp_path / "token"), "seconds": 3, "token": "${env:MF_SWITCH_TOKEN}"}}
    cfg = config([step, {"name": "later", "callable": BUILTIN, "args": {"path": "/nowhere"}}])
    flow = cfg.flow("A->B")
    with pytest.raises(ClientSwitchError) as exc:
        run_client_switch(cfg, flow, "failover", Caller(dry_run=True))
    rep = exc.value.report
    assert [(s.name, s.ok) for s in rep.steps] == [("slow", False)] and rep.not_run == ["later"]
    assert 1 <= rep.steps[0].seconds < 2.5, rep.steps[0].seconds
    assert str(exc.value).endswith(
        "failed in its dry run: it did not finish within 1 s (timeout_seconds); it may still be running: check "
        "what it changes before running it again")
    assert (tmp_path / "token").read_text() == "s3cret-token"
    from mirrorflow.ops.dr.client_switch import plan_switch

    shown = " ".join(plan_switch(flow, "failover")) + str(exc.value) + rep.render()
    assert "s3cret" not in shown and "${env:MF_SWITCH_TOKEN}" in " ".join(plan_switch(flow, "failover"))
    monkeypatch.delenv("MF_SWITCH_TOKEN")
    step["args"]["seconds"] = 0
    with pytest.raises(ClientSwitchError) as exc:
        run_client_switch(config([step]), config([step]).flow("A->B"), "failover", Caller(dry_run=True))
    assert "environment variable MF_SWITCH_TOKEN is not set" in str(exc.value)
