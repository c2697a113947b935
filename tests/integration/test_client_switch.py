"""The client switch as a step of the failover and the failback (issue 40 item 3), on real brokers
through the CLI: the drill rehearses the steps as a dry run and counts them in its RTO (the file the
applications read is unchanged); the failover flips the bootstrap alias in that file after its
commit, times it and records it in the operations history; the failback flips the mirror readers'
file to the old source. A failing step is one error naming it, the failover stays committed, the
steps after it are not run, the history says so, and `mirrorflow client-switch --from STEP` runs
them once the cause is fixed. A step that cannot be imported stops the failover before its commit."""

from __future__ import annotations

import json

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.history import read_history
from tests.integration.test_failover import commit, committed_offsets
from tests.integration.test_replicate import cli, records
from tests.support import create_topic, produce, write_config

pytestmark = pytest.mark.integration

BUILTIN = "mirrorflow.ops.dr.client_switch:bootstrap_file"


def alias_file(path, servers: str) -> str:
    """A file the applications read their bootstrap alias from (a comment and a setting around it)."""
    text = f"# the orders service's Kafka\nclient.id=orders\nbootstrap.servers={servers}\nacks=all\n"
    path.write_text(text)
    return text


def switch_records(cfg, flow_name: str) -> list:
    with FlowClients(cfg, cfg.flow(flow_name)) as clients:
        return [r for r in read_history(clients) if r.kind == "client-switch"]


def replicated_flow(tmp_path, source, target, pfx: str, a: str, b: str, flows: dict):
    """Flows a->b (and whatever else `flows` holds) over the test clusters, one topic replicated and
    one group checkpointed on the target."""
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    common = {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
              "lease.timeout.seconds": 2, "heartbeats.replication.enabled": False,
              "state.namespace": pfx}  # its own state: test_failback.py fails over flows of the same names
    cfg = write_config(tmp_path / "mf.yaml", {a: source, b: target},
                       {name: {**common, **props} for name, props in flows.items()})
    flow = cfg.flow(f"{a}->{b}")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(30, 1))
    assert run_once(cfg, flow, mode="direct").records == 30
    commit(source, group, topic, {0: 12})
    assert group in emit_checkpoints(cfg, flow).groups
    return cfg, topic, group


def test_drill_failover_and_failback_run_the_switch_steps(tmp_path, source, target, unique):
    pfx = unique("csw")
    app, readers = tmp_path / "orders.properties", tmp_path / "readers.properties"
    before = alias_file(app, source.bootstrap_servers)
    readers_before = alias_file(readers, target.bootstrap_servers)  # the mirror's readers read B now
    cfg, topic, group = replicated_flow(tmp_path, source, target, pfx, "SA", "SB", {
        "SA->SB": {
            "client.switch.failover": [{"name": "orders-alias", "callable": BUILTIN, "args": {"path": str(app)}}],
            "client.switch.failback": [{"name": "readers-alias", "callable": BUILTIN,
                                        "args": {"path": str(readers), "key": "bootstrap.servers"}}],
        },
        "SB->SA": {"standby": True, "initial.position": "latest"},
    })

    # the drill: the step as a dry run, timed, in the RTO; the file is untouched
    drill = json.loads(cli(cfg, "drill", "--flow", "SA->SB", "--verify-from", "earliest", "--json").stdout)
    assert drill["ok"] is True, drill
    step = drill["client_switch_report"]["steps"][0]
    assert step["name"] == "orders-alias" and step["ok"] is True and step["callable"] == BUILTIN
    assert step["said"] == (f"would set bootstrap.servers={target.bootstrap_servers} in {app} "
                            f"(now {source.bootstrap_servers})")
    assert drill["steps"]["client switch orders-alias"] == round(step["seconds"], 3)
    # rounded as the record rounds (a float sum of 0.x values is not: 1.156 >= 1.1560000000000001 failed a full run)
    assert drill["rto_s"] >= round(sum(v for k, v in drill["steps"].items() if k != "client switch orders-alias"), 3)
    assert drill["client_switch"] == "1 step(s) ok" and "client switch 1 step(s) ok" in drill["summary"]
    assert app.read_text() == before
    assert switch_records(cfg, "SA->SB") == []  # a dry run records no step (the drill's line has it)

    # the failover's dry run says what the step would do; the confirmation lists it
    dry = cli(cfg, "failover", "--flow", "SA->SB", "--dry-run")
    assert f"orders-alias: {BUILTIN}(path='{app}')" not in dry.stdout  # the run replaced the list by its result
    assert "client switch after the failover of SA->SB (clients to 'SB', dry run): 1 step(s)" in dry.stdout, dry.stdout
    assert app.read_text() == before

    out = json.loads(cli(cfg, "failover", "--flow", "SA->SB", "--yes", "--json").stdout)
    assert out["done"] is True and out["client_switch_steps"] == [f"orders-alias: {BUILTIN}(path='{app}')"]
    sw = out["client_switch"]
    assert sw["ok"] is True and sw["dry_run"] is False and sw["cluster"] == "SB", sw
    assert sw["steps"][0]["said"] == (f"set bootstrap.servers={target.bootstrap_servers} in {app} "
                                      f"(was {source.bootstrap_servers})")
    # the alias flipped, every other line kept
    assert app.read_text() == before.replace(source.bootstrap_servers, target.bootstrap_servers)
    assert committed_offsets(target, group, f"SA.{topic}", 1) == {0: 12}  # the commit came first
    recs = switch_records(cfg, "SA->SB")
    assert len(recs) == 1 and recs[0].figures["step"] == "orders-alias" and recs[0].figures["ok"] is True
    assert recs[0].by.endswith("(--yes)") and recs[0].via == "cli", recs[0]
    assert f"after the failover of SA->SB, plan {out['plan_id']}, clients to 'SB': set bootstrap.servers=" in \
        recs[0].summary
    hist = cli(cfg, "history", "--flow", "SA->SB").stdout
    assert "client-switch by" in hist and "step orders-alias" in hist, hist

    # the failback: its own steps, recorded in the reverse flow's history (where the failback is)
    back = json.loads(cli(cfg, "failback", "--flow", "SA->SB", "--yes", "--json").stdout)
    assert back["done"] is True and back["client_switch"]["ok"] is True, back
    assert back["client_switch"]["cluster"] == "SA"
    assert readers.read_text() == readers_before.replace(target.bootstrap_servers, source.bootstrap_servers)
    recs = switch_records(cfg, "SB->SA")
    assert [(r.figures["step"], r.figures["ok"]) for r in recs] == [("readers-alias", True)]
    assert "after the failback of SA->SB" in recs[0].summary
    assert app.read_text() == before.replace(source.bootstrap_servers, target.bootstrap_servers)  # untouched


def test_a_failing_step_is_named_the_failover_stands_and_the_rest_runs_later(tmp_path, source, target, unique):
    pfx = unique("cswf")
    first, third = tmp_path / "first.properties", tmp_path / "third.properties"
    missing = tmp_path / "not-yet" / "second.properties"
    alias_file(first, source.bootstrap_servers)
    third_before = alias_file(third, source.bootstrap_servers)
    steps = [
        {"name": "first", "callable": BUILTIN, "args": {"path": str(first)}},
        {"name": "second", "callable": BUILTIN, "args": {"path": str(missing), "value": "kafka-b.example:9092"}},
        {"name": "third", "callable": BUILTIN, "args": {"path": str(third), "values": {"TB": "kafka-b.example:9093"}}},
    ]
    # a step that cannot be imported: refused before anything is committed
    cfg, topic, group = replicated_flow(tmp_path, source, target, pfx, "TA", "TB", {"TA->TB": {
        "client.switch.failover": [*steps, "mirrorflow_no_such_module.switches:repoint"]}})
    proc = cli(cfg, "failover", "--flow", "TA->TB", "--yes", check=False)
    assert proc.returncode != 0
    assert ("flows.TA->TB.client.switch.failover: step 'repoint': 'mirrorflow_no_such_module.switches:repoint' "
            "cannot be imported") in proc.stderr, proc.stderr
    with FlowClients(cfg, cfg.flow("TA->TB")) as clients:
        assert flow_state(clients).state == "running"  # nothing committed
    # the drill finds the step that would fail (its dry run), and says so
    proc = cli(cfg, "drill", "--flow", "TA->TB", "--verify-from", "latest", "--json", check=False)
    assert proc.returncode == 1 and "cannot be imported" in proc.stdout, proc.stdout

    cfg = write_config(tmp_path / "mf.yaml", {"TA": source, "TB": target}, {"TA->TB": {
        "topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
        "heartbeats.replication.enabled": False, "state.namespace": pfx, "client.switch.failover": steps}})
    drill = json.loads(cli(cfg, "drill", "--flow", "TA->TB", "--verify-from", "latest", "--json",
                           check=False).stdout)
    assert drill["ok"] is False and drill["client_switch"] == "FAILED at step 'second'", drill
    assert first.read_text().count(source.bootstrap_servers) == 1  # the dry run changed nothing

    proc = cli(cfg, "failover", "--flow", "TA->TB", "--yes", "--json", check=False)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    plan = out["plan_id"]
    # one clear error, naming the step, what failed, that the failover stands, and what is left
    err = [line for line in proc.stderr.splitlines() if line.startswith("mirrorflow:")]
    assert err == [
        f"mirrorflow: failover of TA->TB: client-switch step 'second' ({BUILTIN}) failed: cannot read {missing}: "
        f"No such file or directory. The failover stands (committed, plan {plan}; nothing undone); steps not run: "
        "third. Fix the cause, then run the steps from 'second' again: `mirrorflow client-switch --flow TA->TB "
        "--after failover --from second` (Airflow: clear the task client_switch.second of this run)"], proc.stderr
    assert out["done"] is True and out["client_switch"]["ok"] is False
    assert [(s["name"], s["ok"]) for s in out["client_switch"]["steps"]] == [("first", True), ("second", False)]
    assert out["client_switch"]["not_run"] == ["third"]
    with FlowClients(cfg, cfg.flow("TA->TB")) as clients:
        assert flow_state(clients).state == "stopped"  # the failover was not undone
    assert committed_offsets(target, group, f"TA.{topic}", 1) == {0: 12}
    assert f"bootstrap.servers={target.bootstrap_servers}\n" in first.read_text()
    assert third.read_text() == third_before
    text = cli(cfg, "failover", "--flow", "TA->TB", "--yes", check=False).stdout  # a second one: nothing to do
    assert "nothing to do: flow TA->TB was already failed over" in text
    recs = switch_records(cfg, "TA->TB")
    assert [(r.figures["step"], r.figures["ok"]) for r in recs] == [("first", True), ("second", False)]
    assert "FAILED: cannot read" in recs[1].summary

    # fixed: the steps from the failed one run again (approved with --yes), recorded
    missing.parent.mkdir()
    missing.write_text("bootstrap.servers=kafka-a.example:9092\n")
    again = json.loads(cli(cfg, "client-switch", "--flow", "TA->TB", "--after", "failover", "--from", "second",
                           "--yes", "--json").stdout)
    assert [(s["name"], s["ok"]) for s in again["steps"]] == [("second", True), ("third", True)], again
    assert missing.read_text() == "bootstrap.servers=kafka-b.example:9092\n"
    assert third.read_text() == third_before.replace(source.bootstrap_servers, "kafka-b.example:9093")
    recs = switch_records(cfg, "TA->TB")
    assert [(r.figures["step"], r.figures["ok"]) for r in recs][2:] == [("second", True), ("third", True)]
    # running them again changes nothing and says so
    again = json.loads(cli(cfg, "client-switch", "--flow", "TA->TB", "--from", "third", "--yes", "--json").stdout)
    assert again["steps"][0]["said"] == f"bootstrap.servers in {third} is kafka-b.example:9093 already"


def test_client_switch_refuses_before_the_operation(tmp_path, source, target, unique):
    pfx = unique("cswr")
    app = tmp_path / "app.properties"
    before = alias_file(app, source.bootstrap_servers)
    cfg = write_config(tmp_path / "mf.yaml", {"UA": source, "UB": target}, {"UA->UB": {
        "topics": f"{pfx}\\..*", "client.switch.failover": [{"callable": BUILTIN, "args": {"path": str(app)}}]}})
    proc = cli(cfg, "client-switch", "--flow", "UA->UB", "--yes", check=False)
    assert proc.returncode == 1 and "flow UA->UB is not failed over: its applications stay on 'UA'" in proc.stderr
    dry = cli(cfg, "client-switch", "--flow", "UA->UB", "--dry-run").stdout
    assert "bootstrap_file (mirrorflow.ops.dr.client_switch:bootstrap_file)" in dry and "would set" in dry, dry
    assert app.read_text() == before
    proc = cli(cfg, "client-switch", "--flow", "UA->UB", "--dry-run", "--from", "nope", check=False)
    assert proc.returncode != 0 and "flow UA->UB has no client-switch step 'nope'" in proc.stderr, proc.stderr
