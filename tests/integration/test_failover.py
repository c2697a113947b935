"""Failover end to end on real brokers: the source cluster is SIGKILLed, the failover
commits exact offsets on the target from the target's state alone, the application resumes on B
at exactly the next replicated record, the flow is stopped; a second failover is a no-op."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.run.runner import run_once
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, produce, write_config

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def primary(kafka_pool):
    """Cluster P: the source these tests SIGKILL (and bring back for the next test)."""
    return kafka_pool.get("P")


def commit(cluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def first_record_after_resume(cluster, group: str, topic: str, partition: int):
    """What the application reads first on `cluster` after the failover: from its committed offset."""
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "error", "isolation.level": "read_committed"})
    committed = c.committed([TopicPartition(topic, partition)], timeout=10)[0].offset
    c.assign([TopicPartition(topic, partition, committed)])
    msg = None
    for _ in range(40):
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            break
    c.close()
    return committed, msg


@pytest.mark.parametrize("policy", ["IdentityReplicationPolicy", "DefaultReplicationPolicy"])
def test_unplanned_failover_with_the_source_killed(tmp_path, primary, target, kafka_pool, unique, policy):
    pfx = unique("dr")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    cfg = write_config(tmp_path / "mf.yaml", {"P": primary, "B": target}, {"P->B": {
        "topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "replication.policy.class": policy,
        "state.topic.partitions": 2, "lease.timeout.seconds": 2, "heartbeats.replication.enabled": False}})
    flow = cfg.flow("P->B")
    remote = topic if policy == "IdentityReplicationPolicy" else f"P.{topic}"
    from tests.support import create_topic

    create_topic(primary, topic, 2)
    # the flow's state outlives a previous failover test of P->B: its applications never moved (--force)
    cli(cfg, "flow", "resume", "--flow", "P->B", "--force")
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(primary, topic, records(100, 2))
    assert run_once(cfg, flow, mode="direct").records == 100
    # the application read part of each partition on P and committed
    commit(primary, group, topic, {0: 23, 1: 31})
    run = emit_checkpoints(cfg, flow)
    assert group in run.groups
    produce(primary, topic, records(20, 2, seed="late"))  # never replicated: the RPO
    src = consume_all(primary, topic)

    kafka_pool.dev.kill("P")  # SIGKILL the whole source cluster (its current pid)
    try:
        dry = json.loads(cli(cfg, "failover", "--flow", "P->B", "--dry-run", "--json").stdout)
        assert dry["done"] is False and dry["note"] == "dry run: nothing changed"
        assert dry["source_error"] and dry["not_replicated"] is None
        assert {(p["topic"], p["partition"]): p["replicated_to"] for p in dry["partitions"]} == {
            (topic, 0): 50, (topic, 1): 50}
        # nothing changed by the dry run
        assert consume_all(target, remote)  # target readable
        # without --yes and without a terminal: not confirmed, nothing changed
        proc = cli(cfg, "failover", "--flow", "P->B", check=False)
        assert proc.returncode == 1 and "not confirmed" in proc.stdout + proc.stderr

        out = json.loads(cli(cfg, "failover", "--flow", "P->B", "--yes", "--json").stdout)
        assert out["done"] is True, out
        dst = consume_all(target, remote)
        for p, resume in ((0, 23), (1, 31)):
            committed, msg = first_record_after_resume(target, group, remote, p)
            want = next(r for r in src if r.partition == p and r.offset == resume)
            # exactly the next record the application had not read on P
            assert (msg.key(), msg.value(), msg.timestamp()[1]) == (want.key, want.value, want.timestamp)
            assert committed == next(r.offset for r in dst if r.partition == p and r.content() == want.content())
        # the flow is stopped: no copy; a second failover says there is nothing to do
        text = cli(cfg, "flow", "list").stdout
        assert "P->B: enabled, stopped by " in text and "failed over to 'B' (unplanned)" in text
        again = cli(cfg, "failover", "--flow", "P->B", "--yes")
        assert "nothing to do: flow P->B was already failed over to 'B' at " in again.stdout
        # a plain resume would copy to B what P accepts from now on: the next step is the failback
        proc = cli(cfg, "flow", "resume", "--flow", "P->B", check=False)
        assert proc.returncode == 1 and "cannot resume flow P->B: it was failed over to 'B' at " in proc.stderr
        assert "its next step is the failback (`mirrorflow failback --flow P->B`" in proc.stderr
        assert "stopped" in cli(cfg, "flow", "list").stdout.split("P->B: ", 1)[1].splitlines()[0]
    finally:
        kafka_pool.dev.restart("P", attached=True)
    rep = run_once(cfg, flow, mode="direct")
    assert rep.skipped and "is stopped" in rep.skipped and rep.records == 0


def test_failover_refuses_bad_input(tmp_path, source, target, unique):
    pfx = unique("dr")
    # source alias N: a flow of its own (N->B) that never replicated anything
    cfg = write_config(tmp_path / "mf.yaml", {"N": source, "B": target}, {"N->B": {"topics": f"{pfx}\\..*"}})
    proc = cli(cfg, "failover", "--flow", "N->C", "--yes", check=False)
    assert proc.returncode == 2 and "N->C" in proc.stderr
    proc = cli(cfg, "failover", "--flow", "N->B", "--yes", check=False)
    assert proc.returncode == 1 and "flow N->B has no replicated data on cluster 'B': nothing to fail over to" in proc.stderr
    proc = cli(cfg, "failover", "--flow", "N->B", "--groups", "(", "--yes", check=False)
    assert proc.returncode == 2 and "--groups: not a valid regular expression" in proc.stderr


def own_flow(tmp_path, source, target, alias: str, pfx: str, partitions: int, n: int):
    """A flow of its own (`alias`->B, so its stopped state touches no other test's flow) over topic
    `pfx`.orders of `partitions`, synced, its first `n` records copied: (config, flow, topic)."""
    from tests.support import create_topic

    topic = f"{pfx}.orders"
    cfg = write_config(tmp_path / "mf.yaml", {alias: source, "B": target}, {f"{alias}->B": {
        "topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
        "heartbeats.replication.enabled": False}})
    flow = cfg.flow(f"{alias}->B")
    create_topic(source, topic, partitions)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(n, partitions))
    assert run_once(cfg, flow, mode="direct").records == n
    return cfg, flow, topic


def test_planned_failover_drains_verifies_and_resumes_exactly(tmp_path, source, target, unique):
    pfx = unique("drp")
    group = f"{pfx}-app"
    cfg, flow, topic = own_flow(tmp_path, source, target, "Q", pfx, 2, 60)
    produce(source, topic, records(40, 2, seed="late"))  # not replicated yet: the drain copies it
    commit(source, group, topic, {0: 44, 1: 9})  # the application committed after the last checkpoint
    out = json.loads(cli(cfg, "failover", "--flow", "Q->B", "--mode", "planned", "--copy-mode", "direct",
                         "--yes", "--json").stdout)
    assert out["done"] is True and out["not_replicated"] == 0, out
    assert out["drain"][1].startswith("replicate run 1: 40 records, lag 0")
    assert out["verify"]["ok"] is True
    src = consume_all(source, topic)
    for p, resume in ((0, 44), (1, 9)):
        _, msg = first_record_after_resume(target, group, f"Q.{topic}", p)
        want = next(r for r in src if r.partition == p and r.offset == resume)
        assert (msg.key(), msg.value(), msg.timestamp()[1]) == (want.key, want.value, want.timestamp)


def test_a_planned_failover_of_a_paused_flow_is_refused_until_it_is_resumed(tmp_path, source, target, unique):
    """A paused flow's drain copies nothing: its run is skipped, and a skipped run has no partition to count a
    lag on. The planned failover took that as lag 0 and committed with 40 records not copied (RPO 40 where a
    planned failover promises 0). It is refused now, naming the pause and the next steps; nothing changes,
    and after the resume the planned failover drains everything."""
    cfg, _, topic = own_flow(tmp_path, source, target, "Z", unique("drz"), 2, 60)
    cli(cfg, "flow", "pause", "--flow", "Z->B", "--reason", "maintenance")
    produce(source, topic, records(40, 2, seed="late"))
    failover = ("failover", "--flow", "Z->B", "--mode", "planned", "--copy-mode", "direct", "--yes")
    refused = cli(cfg, *failover, check=False)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "planned failover of Z->B: nothing changed, its drain cannot copy (flow Z->B is paused" in refused.stderr
    assert "`mirrorflow flow resume --flow Z->B`" in refused.stderr and "fail over unplanned" in refused.stderr
    [status] = json.loads(cli(cfg, "status", "--flow", "Z->B", "--json").stdout)
    assert status["state"].startswith("paused") and not status["operations"], status  # no failover recorded
    cli(cfg, "flow", "resume", "--flow", "Z->B")
    out = json.loads(cli(cfg, *failover, "--json").stdout)
    assert out["done"] is True and out["not_replicated"] == 0, out
    assert out["drain"][1].startswith("replicate run 1: 40 records, lag 0"), out["drain"]


def committed_offsets(cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    c.close()
    return {tp.partition: tp.offset for tp in got}


def test_commit_refuses_a_plan_whose_state_moved_and_commits_exactly_an_unmoved_one(tmp_path, source, target, unique):
    """The commit re-reads what the plan was built from. A group that commits on B after
    the preflight, or a new checkpoint, makes it refuse (naming what moved, nothing committed, flow
    running); a plan whose state did not move is committed exactly, with its approver on the record."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.observe.status import flow_status
    from mirrorflow.ops.dr.caller import Caller
    from mirrorflow.ops.dr.failover_commit import commit_failover
    from mirrorflow.ops.dr.failover_plan import PlanMovedError
    from mirrorflow.ops.dr.failover_preflight import plan_failover
    from mirrorflow.state.flow_state import flow_state, read_control
    from tests.support import create_topic

    pfx = unique("drm")
    topic, group, other = f"{pfx}.orders", f"{pfx}-app", f"{pfx}-other"
    # source alias M: a flow of its own (M->B)
    cfg = write_config(tmp_path / "mf.yaml", {"M": source, "B": target}, {"M->B": {
        "topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
        "heartbeats.replication.enabled": False}})
    flow = cfg.flow("M->B")
    remote = f"M.{topic}"
    create_topic(source, topic, 2)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(60, 2))
    assert run_once(cfg, flow, mode="direct").records == 60
    commit(source, group, topic, {0: 11, 1: 22})
    commit(source, other, topic, {0: 5})
    assert {group, other} <= set(emit_checkpoints(cfg, flow).groups)

    plan = plan_failover(cfg, flow).plan
    assert plan is not None and plan.blocked is None
    planned = plan.commits()
    assert set(planned) == {group, other} and {k: len(v) for k, v in planned.items()} == {group: 2, other: 1}

    # 1. an application starts on B and commits for `other` while the approval waits
    commit(target, other, remote, {0: 2})
    with pytest.raises(PlanMovedError) as err:
        commit_failover(cfg, flow, plan, "alice")
    msg = str(err.value)
    assert f"nothing committed: the state moved since plan {plan.id} was made" in msg, msg
    assert f"group {other} {remote}[0]: committed offset on the target moved from none to 2" in msg, msg
    assert "Run the preflight again" in msg
    assert committed_offsets(target, group, remote, 2) == {0: -1001, 1: -1001}  # nothing committed
    assert committed_offsets(target, other, remote, 1) == {0: 2}
    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "running" and read_control(clients, "failover") is None

    # 2. a new plan sees it; then the group reads on on the source and a new checkpoint is written
    plan = plan_failover(cfg, flow).plan
    commit(source, group, topic, {0: 30})
    emit_checkpoints(cfg, flow)
    with pytest.raises(PlanMovedError, match=rf"group {group} {remote}\[0\]: checkpoint moved from \d+ to \d+"):
        commit_failover(cfg, flow, plan, "alice")
    assert committed_offsets(target, group, remote, 2) == {0: -1001, 1: -1001}

    # 3. nothing moves: the commit writes exactly the plan's offsets and names the approver
    plan = plan_failover(cfg, flow).plan
    assert plan_failover(cfg, flow, caller=Caller(dry_run=True)).plan.id == plan.id  # the id is the content's
    proc = cli(cfg, "failover", "--flow", "M->B", "--plan-id", "0" * 12, "--yes", check=False)
    assert proc.returncode == 1, proc.stdout
    assert f"the plan is {plan.id} now, not 000000000000: the state moved since that preflight" in proc.stderr
    rep = commit_failover(cfg, flow, plan, "alice")
    assert rep.done and rep.approved_by == "alice"
    want = plan.commits()
    assert set(want[group]) == {f"{remote}:0", f"{remote}:1"} and set(want[other]) == {f"{remote}:0"}
    assert {f"{remote}:{p}": o for p, o in committed_offsets(target, group, remote, 2).items()} == want[group]
    assert {f"{remote}:{p}": o for p, o in committed_offsets(target, other, remote, 1).items()} == want[other]
    with FlowClients(cfg, flow) as clients:
        record = read_control(clients, "failover")
        assert record["approved_by"] == "alice" and record["plan"] == plan.id and record["groups"] == want
        assert flow_state(clients).state == "stopped"
        from mirrorflow.state.history import read_history

        last = read_history(clients, 5)[-1]
        assert (last.kind, last.by, last.summary) == (
            "failover", "alice", f"unplanned failover to 'B', plan {plan.id}: the flow is stopped")
    status = flow_status(cfg, flow)
    assert any(f"plan {plan.id} approved by alice" in line for line in status.operations), status.operations


def test_groups_left_alone_at_the_failover_are_moved_later(tmp_path, source, target, unique):
    """A group with an active member on B is left alone by the failover; once the member
    has left, `failover --groups` moves it to exactly the translated offset (bound plan, history
    line, the failover record untouched); a second call has nothing to do."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.state.flow_state import read_control
    from mirrorflow.state.history import read_history
    from tests.support import create_topic

    pfx = unique("drl")
    topic, app, busy = f"{pfx}.orders", f"{pfx}-app", f"{pfx}-busy"
    # source alias L: a flow of its own (L->B)
    cfg = write_config(tmp_path / "mf.yaml", {"L": source, "B": target}, {"L->B": {
        "topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
        "heartbeats.replication.enabled": False}})
    flow = cfg.flow("L->B")
    remote = f"L.{topic}"
    create_topic(source, topic, 2)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(60, 2))
    assert run_once(cfg, flow, mode="direct").records == 60
    commit(source, app, topic, {0: 11, 1: 22})
    commit(source, busy, topic, {0: 7, 1: 13})
    assert {app, busy} <= set(emit_checkpoints(cfg, flow).groups)
    src = consume_all(source, topic)

    member = Consumer({**target.client_config(), "group.id": busy, "enable.auto.commit": False,
                       "session.timeout.ms": 10000})
    member.subscribe([remote])
    for _ in range(150):
        if member.assignment():
            break
        member.poll(0.2)
    assert member.assignment()
    try:
        out = json.loads(cli(cfg, "failover", "--flow", "L->B", "--yes", "--json").stdout)
        assert out["done"] is True and set(out["groups"]["committed"]) == {app}, out
        assert committed_offsets(target, busy, remote, 2) == {0: -1001, 1: -1001}
        still = cli(cfg, "failover", "--flow", "L->B", "--yes").stdout
        assert "nothing to do: flow L->B was already failed over" in still
        assert f"left alone (active members on 'B'): {busy}" in still, still
    finally:
        member.close()  # leaves the group
    with FlowClients(cfg, flow) as clients:
        record = read_control(clients, "failover")
    failover_plan = record["plan"]
    still = cli(cfg, "failover", "--flow", "L->B").stdout
    assert f"groups still to move: {busy} (`mirrorflow failover --flow L->B --groups REGEX`" in still, still

    moved = json.loads(cli(cfg, "failover", "--flow", "L->B", "--groups", f"{pfx}-.*", "--yes", "--json").stdout)
    assert moved["done"] is True and moved["groups"]["committed"] == {busy: 2}, moved
    for p, resume in ((0, 7), (1, 13)):
        _, msg = first_record_after_resume(target, busy, remote, p)
        want = next(r for r in src if r.partition == p and r.offset == resume)
        assert (msg.key(), msg.value(), msg.timestamp()[1]) == (want.key, want.value, want.timestamp)
    # the failover's offsets for `app` are untouched
    assert {f"{remote}:{p}": o for p, o in committed_offsets(target, app, remote, 2).items()} == record["groups"][app]
    with FlowClients(cfg, flow) as clients:
        assert read_control(clients, "failover") == record  # the record keeps the original failover
        last = read_history(clients, 5)[-1]
    assert (last.kind, last.summary) == (
        "failover", f"moved groups left alone: {busy} (plan {moved['plan_id']}, after failover {failover_plan})")
    again = cli(cfg, "failover", "--flow", "L->B", "--groups", f"{pfx}-.*", "--yes").stdout
    assert "nothing to do: flow L->B was already failed over" in again
    assert f"no group matching '{pfx}-.*' is left to move" in again, again


def test_a_planned_drain_that_cannot_reach_lag_0_stops_unless_the_lag_is_accepted(tmp_path, source, target, unique):
    """Producers still writing on the source, the drain's runs end with lag > 0: the
    failover stops naming the partition and its lag, nothing changed; `max_lag` accepts a stated lag."""
    import threading

    from mirrorflow.clients import FlowClients
    from mirrorflow.errors import MirrorflowError
    from mirrorflow.ops.dr.failover_drain import Drain
    from mirrorflow.ops.dr.failover_preflight import plan_failover
    from mirrorflow.state.flow_state import flow_state, read_control

    pfx = unique("drd")
    cfg, flow, topic = own_flow(tmp_path, source, target, "W", pfx, 1, 20)
    stop = threading.Event()

    def keep_writing() -> None:  # the producers the operator did not stop
        i = 0
        while not stop.is_set():
            produce(source, topic, records(1, 1, seed=f"w{i}"))
            i += 1
            stop.wait(0.02)

    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        with pytest.raises(MirrorflowError) as err:
            plan_failover(cfg, flow, "planned", drain=Drain("direct", 1))
        msg = str(err.value)
        assert "the drain did not reach lag 0 in 1 replicate run(s): lag " in msg, msg
        assert f" on {topic}[0] " in msg and "Nothing changed." in msg and "--max-lag " in msg, msg
        rep = plan_failover(cfg, flow, "planned", drain=Drain("direct", 1, max_lag=10**6))
    finally:
        stop.set()
        writer.join(10)
    assert rep.plan is not None and any(d.endswith("accepted (max lag 1,000,000)") for d in rep.drain), rep.drain
    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "running" and read_control(clients, "failover") is None
