"""Failback end to end on real brokers: A->B with the identity
policy, the source SIGKILLed, unplanned failover, producers on B, A back, failback copies B's new
records to A exactly once and reports exactly the records B never got, then a planned failover back
to A resumes the group on A exactly, and A->B restarts without copying B->A's records back.
The same with the default policy (shorter). Own aliases (FA/FB, GA/GB) over clusters P and B."""

from __future__ import annotations

import json
import time

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.errors import StateError
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.ops.dr.failback import failback
from mirrorflow.ops.dr.failover import failover
from mirrorflow.ops.dr.failover_commit import commit_failover
from mirrorflow.ops.dr.failover_plan import FailoverPlan
from mirrorflow.ops.dr.failover_preflight import plan_failover
from mirrorflow.ops.verify.verify import verify_flow
from mirrorflow.replication.run.runner import run_once
from tests.integration.test_failover import commit, first_record_after_resume
from tests.integration.test_replicate import NOW, cli, records
from tests.support import (
    admin,
    consume_all,
    create_topic,
    end_transaction,
    markers_written,
    produce,
    producer,
    write_config,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def primary(kafka_pool):
    """Cluster P: the source these tests SIGKILL (and bring back)."""
    return kafka_pool.get("P")


def pair(tmp_path, primary, target, pfx: str, a: str, b: str, policy: str):
    common = {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "replication.policy.class": policy,
              "state.topic.partitions": 2, "lease.timeout.seconds": 2, "heartbeats.replication.enabled": False}
    return write_config(tmp_path / "mf.yaml", {a: primary, b: target},
                        {f"{a}->{b}": common, f"{b}->{a}": {**common, "standby": True}})


def kill(kafka_pool):
    kafka_pool.dev.kill("P")  # SIGKILL the whole source cluster


def content(r) -> str:
    """A sortable form of a record's key, value, headers and timestamp (values may be None)."""
    return repr(r.content())


def test_identity_story(tmp_path, primary, target, kafka_pool, unique):
    pfx = unique("fb")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    cfg = pair(tmp_path, primary, target, pfx, "FA", "FB", "IdentityReplicationPolicy")
    fwd, rev = cfg.flow("FA->FB"), cfg.flow("FB->FA")
    # the standby reverse flow does nothing before the failback
    assert "is stopped" in (run_once(cfg, rev, mode="direct").skipped or "")
    assert "FB->FA: enabled, stopped (in the config (standby: true)): standby: the failback path of FA->FB, " \
        "started by `mirrorflow failback --flow FA->FB`" in cli(cfg, "flow", "list").stdout
    proc = cli(cfg, "failback", "--flow", "FA->FB", "--yes", check=False)
    assert proc.returncode == 1 and "flow FA->FB was never failed over" in proc.stderr

    create_topic(primary, topic, 2)
    assert sync_flow(cfg, fwd, ["topics"]).ok
    produce(primary, topic, records(100, 2))
    assert run_once(cfg, fwd, mode="direct").records == 100
    commit(primary, group, topic, {0: 23, 1: 31})  # the application read part of it on A
    assert group in emit_checkpoints(cfg, fwd).groups
    produce(primary, topic, records(20, 2, seed="late"))  # never reaches B: the divergence
    src = consume_all(primary, topic)

    kill(kafka_pool)
    try:
        out = json.loads(cli(cfg, "failover", "--flow", "FA->FB", "--yes", "--json").stdout)
        assert out["done"] is True, out
        for p, resume in ((0, 23), (1, 31)):
            _, msg = first_record_after_resume(target, group, topic, p)
            want = next(r for r in src if r.partition == p and r.offset == resume)
            assert (msg.key(), msg.value(), msg.timestamp()[1]) == (want.key, want.value, want.timestamp)
        produce(target, topic, records(30, 2, seed="onB"))  # producers moved to B
        on_b = consume_all(target, topic)
        new_on_b = [r for r in on_b if b"onB" in (r.value or b"")]
        assert len(new_on_b) == 27  # records() leaves every 11th value None: 3 of 30 here
        # the application consumed on B: partition 0 into the new records, partition 1 only up to
        # a record that came from A (B's offsets differ from A's: the copy's transaction markers)
        b0 = [r for r in on_b if r.partition == 0 and r.offset >= out["partitions"][0]["target_end"]]
        b1 = next(r for r in on_b if r.partition == 1 and r.content() == next(
            s for s in src if s.partition == 1 and s.offset == 45).content())
        commit(target, group, topic, {0: b0[7].offset, 1: b1.offset})
    finally:
        kafka_pool.dev.restart("P", attached=True)

    dry = json.loads(cli(cfg, "failback", "--flow", "FA->FB", "--dry-run", "--json").stdout)
    assert dry["done"] is False and dry["note"] == "dry run: nothing changed"
    # exactly the records A had that B never got: the 20 late ones, offsets 50..60 of each partition
    assert [(d["topic"], d["partition"], d["ranges"], d["records"]) for d in dry["divergence"]] == [
        (topic, 0, [[50, 60]], 10), (topic, 1, [[50, 60]], 10)]
    ends = {p["partition"]: p["target_end"] for p in out["partitions"]}
    assert {s["partition"]: s["start"] for s in dry["seeds"]} == ends
    assert all(s["mapped"] == 50 and s["target_end"] == 60 for s in dry["seeds"])

    done = json.loads(cli(cfg, "failback", "--flow", "FA->FB", "--yes", "--json").stdout)
    assert done["done"] is True, done
    again = cli(cfg, "failback", "--flow", "FA->FB", "--yes")
    assert "nothing to do: FB->FA was already started by a failback of FA->FB at " in again.stdout
    # the reverse flow's operations history: the failback's resume, then the failback itself
    ops = json.loads(cli(cfg, "history", "--flow", "FB->FA", "--json").stdout)
    assert [o["kind"] for o in ops][-2:] == ["resume", "failback"], ops
    assert ops[-1]["summary"] == "started by the failback of FA->FB" and ops[-1]["figures"] == {
        "partitions": 2, "to copy": 30, "divergence": 20, "split brain": 0}, ops[-1]
    # the status names both operations, each on its own flow
    [fo], [fb] = (json.loads(cli(cfg, "status", "--flow", f, "--json").stdout)[0]["operations"] for f in ("FA->FB", "FB->FA"))
    assert fo.startswith("unplanned failover at ") and fb.startswith("started by the failback of FA->FB at ")
    assert run_once(cfg, fwd, mode="direct").skipped  # A->B stays stopped
    proc = cli(cfg, "flow", "resume", "--flow", "FA->FB", check=False)  # both running would loop
    assert proc.returncode == 1 and "cannot resume flow FA->FB: the reverse flow FB->FA is running" in proc.stderr

    rep = run_once(cfg, rev, mode="direct")
    assert rep.ok and rep.records == 30, rep.render()
    markers_written(primary, topic, 2)  # P was SIGKILLed and restarted before this run
    on_a = consume_all(primary, topic)
    # A: its 120 records untouched, then B's 30 new ones exactly once; nothing A had came back
    assert [r for r in on_a if r.offset < 60] == [r for r in src]
    back = [r for r in on_a if r.offset >= 60]
    assert sorted(map(content, back)) == sorted(
        content(r) for r in on_b if r.offset >= ends[r.partition])
    assert len(back) == 30
    assert run_once(cfg, rev, mode="direct").records == 0

    # failover back to A, planned: the group resumes on A exactly where it was on B. verify of
    # FB->FA (the planned preflight) checks B's records against A through the seeded inverse map
    # and the copies: everything matches, and the divergent records A kept (never on B) are
    # counted apart as kept by the failback, so they do not block the planned commit
    pre = json.loads(cli(cfg, "failover", "--flow", "FB->FA", "--mode", "planned", "--dry-run", "--json").stdout)
    ver = pre["verify"]
    assert ver["matched"] == 130 and [(p["partition"], p["counts"], p["kept"])
                                      for p in ver["partitions"]] == [(0, {}, 10), (1, {}, 10)], ver
    assert not pre["blocked"], pre
    back_out = json.loads(cli(cfg, "failover", "--flow", "FB->FA", "--mode", "planned", "--copy-mode", "direct",
                              "--yes", "--json").stdout)
    assert back_out["done"] is True, back_out
    for p, b_rec in ((0, b0[7]), (1, b1)):
        _, msg = first_record_after_resume(primary, group, topic, p)
        assert (msg.key(), msg.value(), msg.timestamp()[1]) == (b_rec.key, b_rec.value, b_rec.timestamp)

    # A->B again: from A's ends at that failover, so B->A's records are not copied back. A plain
    # resume would continue from A->B's old progress: refused
    proc = cli(cfg, "flow", "resume", "--flow", "FA->FB", check=False)
    assert proc.returncode == 1 and "FB->FA was failed over at " in proc.stderr and (
        "run `mirrorflow failback --flow FB->FA`") in proc.stderr, proc.stderr
    fb = json.loads(cli(cfg, "failback", "--flow", "FB->FA", "--yes", "--json").stdout)
    assert fb["done"] is True and fb["divergence"] == [], fb
    a_ends = {p["partition"]: p["target_end"] for p in back_out["partitions"]}
    assert {s["partition"]: s["start"] for s in fb["seeds"]} == a_ends
    produce(primary, topic, records(10, 2, seed="againA"))
    rep = run_once(cfg, fwd, mode="direct")
    assert rep.ok and rep.records == 10, rep.render()
    on_b2 = consume_all(target, topic)
    assert sorted(map(content, on_b2)) == sorted(map(content, on_b + [r for r in consume_all(primary, topic)
                                                                         if r.offset >= a_ends[r.partition]]))


def test_default_policy_story(tmp_path, primary, target, kafka_pool, unique):
    pfx = unique("fbd")
    topic = f"{pfx}.orders"
    cfg = pair(tmp_path, primary, target, pfx, "GA", "GB", "DefaultReplicationPolicy")
    fwd, rev = cfg.flow("GA->GB"), cfg.flow("GB->GA")
    create_topic(primary, topic, 1)
    assert sync_flow(cfg, fwd, ["topics"]).ok
    produce(primary, topic, records(40, 1))
    assert run_once(cfg, fwd, mode="direct").records == 40
    produce(primary, topic, records(5, 1, seed="late"))
    kill(kafka_pool)
    try:
        assert json.loads(cli(cfg, "failover", "--flow", "GA->GB", "--yes", "--json").stdout)["done"] is True
        create_topic(target, topic, 1)  # the producers write to B's own topic
        produce(target, topic, records(12, 1, seed="onB"))
    finally:
        kafka_pool.dev.restart("P", attached=True)
    out = json.loads(cli(cfg, "failback", "--flow", "GA->GB", "--yes", "--json").stdout)
    assert out["done"] is True and out["identity"] is False, out
    # every record of B's own topic reaches A (from B's log start: GB->GA never ran), none of GA.<topic>
    assert [(s["topic"], s["start"], s["to_copy"], s["mapped"]) for s in out["seeds"]] == [(topic, 0, 12, 0)]
    assert [(d["ranges"], d["records"]) for d in out["divergence"]] == [([[40, 45]], 5)]
    assert sync_flow(cfg, rev, ["topics"]).ok
    assert run_once(cfg, rev, mode="direct").records == 12  # B's GA.<topic> is not copied back (cycle)
    markers_written(primary, f"GB.{topic}")  # P was SIGKILLed and restarted before this run
    on_a = [r.content() for r in consume_all(primary, f"GB.{topic}")]
    assert on_a == [r.content() for r in consume_all(target, topic)]


def test_failback_bad_input(tmp_path, source, target, unique):
    pfx = unique("fbx")
    cfg = write_config(tmp_path / "mf.yaml", {"HA": source, "HB": target}, {"HA->HB": {"topics": f"{pfx}\\..*"}})
    proc = cli(cfg, "failback", "--flow", "HA->HC", "--yes", check=False)
    assert proc.returncode == 2 and "unknown flow 'HA->HC'" in proc.stderr
    proc = cli(cfg, "failback", "--flow", "HA->HB", "--yes", check=False)
    assert proc.returncode == 2 and (
        "flows.HB->HA: failback of HA->HB starts the reverse flow HB->HA, which is not in the config: add it "
        "with the same topics, groups and replication.policy.class as HA->HB and `standby: true`") in proc.stderr
    cfg = write_config(tmp_path / "mf.yaml", {"HA": source, "HB": target}, {
        "HA->HB": {"topics": f"{pfx}\\..*"},
        "HB->HA": {"topics": f"{pfx}\\..*", "replication.policy.class": "IdentityReplicationPolicy", "standby": True}})
    proc = cli(cfg, "failback", "--flow", "HA->HB", "--yes", check=False)
    assert proc.returncode == 2 and "flows.HB->HA.replication.policy.class: the reverse flow must use the same " \
        "replication policy as HA->HB" in proc.stderr, proc.stderr


def batch(n: int, partitions: int, seed: str, at: int | None) -> list[dict]:
    """records() with timestamps of their own (`at` + i; None: the producer's clock), so records of
    different batches never look alike (records() repeats keys, headers and None values)."""
    return [{**r, "timestamp": None if at is None else at + i} for i, r in enumerate(records(n, partitions, seed))]


@pytest.mark.parametrize("policy,a,b", [("IdentityReplicationPolicy", "QA", "QB"),
                                        ("DefaultReplicationPolicy", "RA", "RB")])
def test_every_record_written_on_b_reaches_a_once(tmp_path, source, target, unique, policy, a, b):
    """The incident as it unfolds: records written on B at every moment an incident allows -- between
    two A->B runs, between the failover's preflight and its commit, while its approval waits, after
    it (a transactional producer with an abort among them) -- all reach A exactly once, in B's order,
    with one B->A run, and the failback report counts them per partition. Records A accepted after
    the failover are reported as split brain, apart from the divergence, and stay on A only. A is
    not killed: not running A->B is the same for the failover's unplanned mode and the failback."""
    pfx = unique("fbi")
    topic = f"{pfx}.orders"
    identity = policy.startswith("Identity")
    common = {"topics": f"{pfx}\\..*", "replication.policy.class": policy, "state.topic.partitions": 2,
              "lease.timeout.seconds": 2, "heartbeats.replication.enabled": False}
    # the reverse flow starts at `latest` when it has no progress: the failback must seed it
    cfg = write_config(tmp_path / "mf.yaml", {a: source, b: target}, {
        f"{a}->{b}": common, f"{b}->{a}": {**common, "standby": True, "initial.position": "latest"}})
    fwd, rev = cfg.flow(f"{a}->{b}"), cfg.flow(f"{b}->{a}")
    create_topic(source, topic, 2)
    assert sync_flow(cfg, fwd, ["topics"]).ok
    if not identity:
        create_topic(target, topic, 2)  # B's own topic (A->B writes into B's A.<topic>)
    produce(source, topic, batch(30, 2, "a1", NOW))
    assert run_once(cfg, fwd, mode="direct").records == 30
    produce(target, topic, batch(4, 2, "early", NOW + 1000))  # an early mover, between two A->B runs
    produce(source, topic, batch(20, 2, "a2", NOW + 2000))
    assert run_once(cfg, fwd, mode="direct").records == 20
    produce(source, topic, batch(6, 2, "div", NOW + 3000))  # never reaches B: the divergence

    pre = failover(cfg, fwd, dry_run=True)  # the preflight the approver is shown
    assert pre.note == "dry run: nothing changed", pre.render()
    produce(target, topic, batch(6, 2, "preflight", NOW + 4000))  # applications move to B meanwhile

    def approve(report) -> bool:
        produce(target, topic, batch(8, 2, "approval", NOW + 5000))  # while the approval waits
        return True

    rep = failover(cfg, fwd, confirm=approve)
    assert rep.done, rep.render()
    tx = producer(target, **{"transactional.id": f"{pfx}-app"})
    tx.init_transactions(30)
    for seed, keep, n, at in (("tx1", True, 8, 6000), ("aborted", False, 5, 6100), ("tx2", True, 6, 6200)):
        tx.begin_transaction()
        for r in batch(n, 2, seed, NOW + at):
            tx.produce(topic, partition=r["partition"], key=r["key"], value=r["value"], headers=r["headers"],
                       timestamp=r["timestamp"])
        end_transaction(tx, keep)
    produce(target, topic, batch(5, 2, "after", NOW + 7000))
    produce(source, topic, batch(7, 2, "split", None))  # A still accepts writes after the failover
    markers_written(target, topic, 2)

    a_before, b_all = consume_all(source, topic), consume_all(target, topic)
    from_a = {content(r) for r in a_before}
    # on B, per partition in B's order: every record A->B did not write
    wanted = [r for r in b_all if content(r) not in from_a]
    assert len(wanted) == 4 + 6 + 8 + 8 + 6 + 5  # the aborted records are not records
    per_part = {p: sum(1 for r in wanted if r.partition == p) for p in (0, 1)}

    dry = failback(cfg, fwd, dry_run=True)
    assert {(s.topic, s.partition): s.to_copy for s in dry.seeds} == {(topic, p): n for p, n in per_part.items()}
    text = dry.render()
    assert f"written on {b} outside {a}->{b}: {len(wanted)} records, will be copied to {a}" in text, text
    # the divergence (before the failover) and the split brain (after it): apart, offsets on A
    assert [(d.partition, d.ranges, d.records) for d in dry.divergence] == [(0, ((25, 28),), 3), (1, ((25, 28),), 3)]
    assert [(d.partition, d.ranges, d.records) for d in dry.split_brain] == [(0, ((28, 32),), 4), (1, ((28, 31),), 3)]
    assert "split brain: 7 records accepted by " in text and "divergence: 6 records written on " in text, text

    done = failback(cfg, fwd)
    assert done.done and [s.to_copy for s in done.seeds] == [per_part[0], per_part[1]], done.render()
    if not identity:
        assert sync_flow(cfg, rev, ["topics"]).ok
    run = run_once(cfg, rev, mode="direct")
    assert run.ok and run.records == len(wanted), run.render()
    remote = topic if identity else f"{b}.{topic}"
    markers_written(source, remote, 2)
    on_a = consume_all(source, remote)
    if identity:  # A's own records stay as they were, at their offsets; B's follow them
        a_end = {p: 1 + max(r.offset for r in a_before if r.partition == p) for p in (0, 1)}
        assert [r for r in on_a if r.offset < a_end[r.partition]] == a_before
        on_a = [r for r in on_a if r.offset >= a_end[r.partition]]
    for p in (0, 1):  # exactly once, in B's order, keys/values/headers/timestamps
        assert [content(r) for r in on_a if r.partition == p] == [content(r) for r in wanted if r.partition == p]
    assert run_once(cfg, rev, mode="direct").records == 0
    assert not any(r.value and b"split" in r.value for r in consume_all(target, topic))  # never merged into B


def test_failback_reseed_to_a_rebuilt_empty_a(tmp_path, source, target, unique):
    """A was rebuilt empty (here: its topic deleted and created again, new topic ID): `failback
    --reseed` makes B->A copy all of B's topic (A's records B had, and B's own) into A in B's order,
    the group moves back to A exactly through B->A's map, and the failback back restarts A->B so
    that it copies only what is written on A afterwards. A's topic holding records is refused."""
    pfx = unique("fbr")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    common = {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "replication.policy.class": "IdentityReplicationPolicy",
              "state.topic.partitions": 2, "lease.timeout.seconds": 2, "heartbeats.replication.enabled": False}
    cfg = write_config(tmp_path / "mf.yaml", {"SA": source, "SB": target},
                       {"SA->SB": common, "SB->SA": {**common, "standby": True}})
    fwd, rev = cfg.flow("SA->SB"), cfg.flow("SB->SA")
    create_topic(source, topic, 2)
    assert sync_flow(cfg, fwd, ["topics"]).ok
    produce(source, topic, batch(30, 2, "a1", NOW))
    assert run_once(cfg, fwd, mode="direct").records == 30
    assert failover(cfg, fwd).done
    produce(target, topic, batch(10, 2, "onB", NOW + 1000))
    markers_written(target, topic, 2)
    on_b = consume_all(target, topic)
    b0, b1 = [r for r in on_b if r.partition == 0][16], [r for r in on_b if r.partition == 1][9]
    commit(target, group, topic, {0: b0.offset, 1: b1.offset})  # in B's own records, and in A's

    with pytest.raises(StateError, match=r"still holds records in .*\[0\] \(15 offsets\).*would be duplicated"):
        failback(cfg, fwd, reseed=True, dry_run=True)
    a = admin(source)
    a.delete_topics([topic])[topic].result(30)
    for _ in range(100):  # the rebuilt A
        try:
            create_topic(source, topic, 2)
            break
        except Exception:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS while the deletion completes
            time.sleep(0.3)
    done = failback(cfg, fwd, reseed=True)
    assert done.done and done.reseed and done.divergence == [] and done.split_brain == [], done.render()
    b_ends = {p: 1 + max(r.offset for r in on_b if r.partition == p) for p in (0, 1)}
    assert [(s.partition, s.start, s.to_copy_ranges) for s in done.seeds] == [
        (p, 0, ((0, b_ends[p]),)) for p in (0, 1)], done.render()
    run = run_once(cfg, rev, mode="direct")
    assert run.ok and run.records == 40, run.render()
    markers_written(source, topic, 2)
    on_a = consume_all(source, topic)
    for p in (0, 1):  # all of B, in B's order
        assert [content(r) for r in on_a if r.partition == p] == [content(r) for r in on_b if r.partition == p]

    assert group in emit_checkpoints(cfg, rev).groups
    back = failover(cfg, rev, mode="planned", copy_mode="direct")
    assert back.done, back.render()
    for p, b_rec in ((0, b0), (1, b1)):  # the group resumes on A exactly
        _, msg = first_record_after_resume(source, group, topic, p)
        assert (msg.key(), msg.value(), msg.timestamp()[1]) == (b_rec.key, b_rec.value, b_rec.timestamp)

    fb = failback(cfg, rev)  # A->B again: copies only what A gets from now on
    assert fb.done and fb.to_copy == 0, fb.render()
    produce(source, topic, batch(6, 2, "againA", NOW + 2000))
    rep = run_once(cfg, fwd, mode="direct")
    assert rep.ok and rep.records == 6, rep.render()
    markers_written(target, topic, 2)
    new_on_a = [r for r in consume_all(source, topic) if content(r) not in set(map(content, on_a))]
    assert len(new_on_a) == 6 and sorted(map(content, consume_all(target, topic))) == sorted(
        map(content, on_b + new_on_a))


def test_split_brain_starts_when_the_plan_was_made_however_it_is_committed(tmp_path, source, target, unique):
    """The DAG commits the approved plan alone (through its JSON in XCom), after the approval wait:
    the failover's time is still when its plan was made, so records A accepted while the approval
    waited are split brain, not divergence (found by tests/chaos/test_dr_chaos.py)."""
    pfx = unique("fbt")
    topic = f"{pfx}.orders"
    cfg = pair(tmp_path, source, target, pfx, "TA", "TB", "IdentityReplicationPolicy")
    fwd = cfg.flow("TA->TB")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, fwd, ["topics"]).ok
    produce(source, topic, batch(10, 1, "a1", NOW))
    assert run_once(cfg, fwd, mode="direct").records == 10
    produce(source, topic, batch(3, 1, "div", None))  # never reaches B, written before the plan
    time.sleep(0.05)
    pre = plan_failover(cfg, fwd)
    time.sleep(0.05)
    produce(source, topic, batch(4, 1, "split", None))  # A still written to while the approval waits
    time.sleep(0.5)
    plan = FailoverPlan.from_dict(json.loads(json.dumps(pre.plan.to_dict())))
    assert commit_failover(cfg, fwd, plan, "ops", via="airflow").done
    dry = failback(cfg, fwd, dry_run=True)
    assert [(d.ranges, d.records) for d in dry.divergence] == [(((10, 13),), 3)], dry.render()
    assert [(d.ranges, d.records) for d in dry.split_brain] == [(((13, 17),), 4)], dry.render()


def test_a_flow_a_person_stopped_after_a_round_trip_fails_over_again(tmp_path, source, target, unique):
    """After a round trip A->B runs again, its first failover's record still on B. A person stops it
    (maintenance, or a stop that raced the commit), then a failover: a new one, which moves the group and
    leaves the flow failed over. It was taken as "already failed over" (the old record and a stopped
    flow): nothing committed, the group left where it was, the flow only stopped (found by the
    model-based search: a stop racing a failover's commit)."""
    from mirrorflow.ops.control.flow_control import control_flow
    from mirrorflow.state.flow_state import flow_state

    pfx = unique("fbs")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    cfg = pair(tmp_path, source, target, pfx, "SA", "SB", "IdentityReplicationPolicy")
    fwd, rev = cfg.flow("SA->SB"), cfg.flow("SB->SA")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, fwd, ["topics"]).ok
    produce(source, topic, batch(10, 1, "a", NOW))
    assert run_once(cfg, fwd, mode="direct").records == 10
    first = failover(cfg, fwd)
    assert first.done and failback(cfg, fwd).done
    assert failover(cfg, rev, mode="planned", copy_mode="direct").done
    assert failback(cfg, rev).done  # A->B runs again; its first failover's record stays on B
    produce(source, topic, batch(6, 1, "again", NOW + 100))
    assert run_once(cfg, fwd, mode="direct").records == 6
    commit(source, group, topic, {0: 13})  # the application read 13 of A's 16 records
    assert group in emit_checkpoints(cfg, fwd).groups
    control_flow(cfg, fwd, "stop", "alice", via="cli", reason="maintenance")

    second = failover(cfg, fwd)
    assert second.done and not second.note and second.plan.id != first.plan.id, second.render()
    with FlowClients(cfg, fwd) as clients:
        state = flow_state(clients)
    assert state.failed_over and f"plan {second.plan.id} " in state.reason, state
    _, msg = first_record_after_resume(target, group, topic, 0)  # the copy of A's record at 13 (B's offsets differ)
    assert msg is not None and msg.value() == batch(6, 1, "again", NOW + 100)[3]["value"]
    assert failback(cfg, fwd).done  # and the failback of this failover starts B->A


def test_a_second_round_trip_still_keeps_the_first_ones_records_apart(tmp_path, source, target, unique):
    """Two round trips, each leaving records on A that B never got: `verify --flow B->A` (the whole
    history, as an operator runs it) counts the records every failback kept on A, not only the
    latest one's, as kept: neither copies nor `extra`, so they never block a planned failover back
    (found by tests/chaos/test_dr_chaos.py)."""
    pfx = unique("fb2")
    topic = f"{pfx}.orders"
    cfg = pair(tmp_path, source, target, pfx, "UA", "UB", "IdentityReplicationPolicy")
    fwd, rev = cfg.flow("UA->UB"), cfg.flow("UB->UA")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, fwd, ["topics"]).ok
    for round_ in (1, 2):
        produce(source, topic, batch(10, 1, f"a{round_}", NOW + 100 * round_))
        assert run_once(cfg, fwd, mode="direct").records == 10
        produce(source, topic, batch(2 + round_, 1, f"div{round_}", NOW + 100 * round_ + 50))  # the divergence
        assert failover(cfg, fwd).done
        produce(target, topic, batch(5, 1, f"b{round_}", NOW + 100 * round_ + 60))
        assert failback(cfg, fwd).done
        assert run_once(cfg, rev, mode="direct").records == 5
        with FlowClients(cfg, rev) as clients:
            ver = verify_flow(clients)
        assert ver.ok and [(p.kept, p.counts) for p in ver.partitions] == [(3 if round_ == 1 else 3 + 4, {})], (
            ver.render()
        )
        back = failover(cfg, rev, mode="planned", copy_mode="direct")
        assert back.done, back.render()
        assert failback(cfg, rev).done
