"""Failback end to end on real brokers (issue 9.3 and the story of 9.6): A->B with the identity
policy, the source SIGKILLed, unplanned failover, producers on B, A back, failback copies B's new
records to A exactly once and reports exactly the records B never got, then a planned failover back
to A resumes the group on A exactly, and A->B restarts without copying B->A's records back.
The same with the default policy (shorter). Own aliases (FA/FB, GA/GB) over clusters P and B."""

from __future__ import annotations

import json

import pytest

from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.runner import run_once
from tests.integration.test_failover import commit, first_record_after_resume
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, create_topic, markers_written, produce, write_config

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
    kafka_pool.dev._kill(kafka_pool.dev.clusters()["P"])  # SIGKILL the whole source cluster


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

    # planned failover back to A: the group resumes on A exactly where it was on B
    back_out = json.loads(cli(cfg, "failover", "--flow", "FB->FA", "--mode", "planned", "--copy-mode", "direct",
                              "--yes", "--json").stdout)
    assert back_out["done"] is True, back_out
    # verify of FB->FA checks B's records against A through the seeded inverse map and the copies:
    # everything matches except exactly the divergent records A kept (extra on A, never on B)
    ver = back_out["verify"]
    assert ver["matched"] == 130 and [(p["partition"], p["counts"], p["first_mismatch"]["target_offset"])
                                      for p in ver["partitions"]] == [(0, {"extra": 10}, 50), (1, {"extra": 10}, 50)]
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
    assert out["done"] is True and out["identity"] is False and out["seeds"] == []
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
