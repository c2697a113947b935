"""Failback at the edges, on real brokers: the whole flow as it is at the failback (topics and
partitions born on either side during the outage), split brain told from divergence by offsets
(producers stamping event time), what the target no longer holds (retention, compaction, a recreated
topic, a truncated partition) counted, named and accepted before anything starts, and the input a
failback refuses (an at-least-once flow, --reseed under the default policy). Own aliases per test."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewPartitions

from mirrorflow.clients import FlowClients
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.ops.dr.failback import failback
from mirrorflow.ops.dr.failover import failover
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.history import read_history
from tests.integration.test_failback import batch, content
from tests.integration.test_replicate import NOW, cli
from tests.support import admin, consume_all, create_topic, markers_written, produce, write_config

pytestmark = pytest.mark.integration

DAY = 86_400_000


def identity_pair(tmp_path, a_cluster, b_cluster, pfx: str, a: str, b: str, both: dict | None = None,
                  topics: tuple[str, ...] = (), **rev_props):
    """Flows a->b and its standby reverse b->a with the identity policy (`both`: more properties of both);
    `topics`: created on a's cluster with one partition each, and synced to b."""
    common = {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "replication.policy.class": "IdentityReplicationPolicy",
              "state.topic.partitions": 1, "lease.timeout.seconds": 2, "heartbeats.replication.enabled": False,
              "emit.heartbeats.enabled": False, **(both or {})}
    cfg = write_config(tmp_path / "mf.yaml", {a: a_cluster, b: b_cluster},
                       {f"{a}->{b}": common, f"{b}->{a}": {**common, "standby": True, **rev_props}})
    for topic in topics:
        create_topic(a_cluster, topic, 1)
    if topics:
        assert sync_flow(cfg, cfg.flow(f"{a}->{b}"), ["topics"]).ok
    return cfg, cfg.flow(f"{a}->{b}"), cfg.flow(f"{b}->{a}")


def add_partitions(cluster, topic: str, total: int) -> None:
    a = admin(cluster)
    a.create_partitions([NewPartitions(topic, total)])[topic].result(30)
    for _ in range(100):
        if len(a.list_topics(topic, timeout=10).topics[topic].partitions) >= total:
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} did not grow to {total} partitions")


def on(records, partition: int) -> list:
    return [r for r in records if r.partition == partition]


def test_failback_covers_the_flow_as_it_is_at_the_failback(tmp_path, source, target, unique):
    """During the outage a topic and a partition are created on B and written to, a topic and a
    partition are created on A and written to, and A's producers stamp event time (a record written
    before the failover dated in the future, one written after it dated in the past). The failback
    copies B's new topic and partition to A (also with the reverse flow's initial.position `latest`)
    and counts them; it reports A's new topic and partition, and the record A accepted after the
    failover, as split brain and the future-dated one as divergence, by offsets; after the failback
    back, A->B copies none of A's split brain to B, only what A gets from then on."""
    pfx = unique("fbw")
    t, born_b, born_a = f"{pfx}.orders", f"{pfx}.refunds", f"{pfx}.audit"
    cfg, fwd, rev = identity_pair(tmp_path, source, target, pfx, "WA", "WB", topics=(t,),
                                  **{"initial.position": "latest"})
    produce(source, t, batch(10, 1, "a1", NOW))
    assert run_once(cfg, fwd, mode="direct").records == 10
    # written before the failover, never replicated, stamped half an hour ahead (event time; brokers
    # refuse more than log.message.timestamp.after.max.ms, an hour): divergence
    produce(source, t, batch(2, 1, "future", int(time.time() * 1000) + 1_800_000))
    assert failover(cfg, fwd).done  # unplanned; A answers, so its ends are recorded with the plan

    # B during the outage: a new topic, a new partition of the flow's topic, records in both
    create_topic(target, born_b, 1)
    produce(target, born_b, batch(5, 1, "newtopic", NOW + 100))
    add_partitions(target, t, 2)
    produce(target, t, [{**r, "partition": 1} for r in batch(4, 1, "newpart", NOW + 200)])
    produce(target, t, batch(3, 1, "b0", NOW + 300))
    # A during the outage (split brain): a record dated yesterday, a new topic, a new partition
    produce(source, t, batch(1, 1, "past", NOW - DAY))
    create_topic(source, born_a, 1)
    produce(source, born_a, batch(2, 1, "atopic", NOW + 400))
    add_partitions(source, t, 2)
    produce(source, t, [{**r, "partition": 1} for r in batch(3, 1, "apart", NOW + 500)])

    dry = failback(cfg, fwd, dry_run=True)
    text = dry.render()
    assert {(s.topic, s.partition): (s.to_copy, s.mapped, s.absent) for s in dry.seeds} == {
        (t, 0): (3, 10, False), (t, 1): (4, 0, False), (born_b, 0): (5, 0, False), (born_a, 0): (0, 0, True)}, text
    assert "written on WB outside WA->WB: 12 records, will be copied to WA" in text, text
    assert [(d.topic, d.partition, d.ranges, d.records) for d in dry.divergence] == [(t, 0, ((10, 12),), 2)], text
    assert [(d.topic, d.partition, d.ranges, d.records) for d in dry.split_brain] == [
        (born_a, 0, ((0, 2),), 2), (t, 0, ((12, 13),), 1), (t, 1, ((0, 3),), 3)], text
    assert dry.losses == [] and dry.plan is not None and not dry.plan.blocked, text

    done = failback(cfg, fwd)
    assert done.done and done.plan.id == dry.plan.id, done.render()
    assert sync_flow(cfg, rev, ["topics"]).ok  # B's new topic on A (A's new partition is there already)
    rep = run_once(cfg, rev, mode="direct")
    assert rep.ok and rep.records == 12, rep.render()
    markers_written(source, t, 2)
    on_a, on_b = consume_all(source, t), consume_all(target, t)
    # B's records reached A exactly once, after what A holds in each partition, in B's order
    assert [content(r) for r in on_a if b"b0" in (r.value or b"")] == [content(r) for r in on_b
                                                                       if b"b0" in (r.value or b"")]
    assert [content(r) for r in on(on_a, 1) if b"newpart" in (r.value or b"")] == [content(r) for r in on(on_b, 1)]
    assert [content(r) for r in consume_all(source, born_b)] == [content(r) for r in consume_all(target, born_b)]

    # back to A, then A->B again: A's split brain (its new topic and partition, the record after the
    # failover) and the divergence never reach B; what A gets from now on does
    back = failover(cfg, rev, mode="planned", copy_mode="direct")
    assert back.done, back.render()
    fb = failback(cfg, rev)
    assert fb.done and fb.to_copy == 0 and fb.divergence == [] and fb.split_brain == [], fb.render()
    produce(source, born_a, batch(2, 1, "atopic-after", NOW + 600))
    produce(source, t, [{**r, "partition": 1} for r in batch(1, 1, "apart-after", NOW + 700)])
    assert sync_flow(cfg, fwd, ["topics"]).ok
    rep = run_once(cfg, fwd, mode="direct")
    assert rep.ok and rep.records == 3, rep.render()
    markers_written(target, t, 2)
    values = [r.value or b"" for r in consume_all(target, t) + consume_all(target, born_a)]
    for kept in (b"past", b"future", b"apart" + b"value", b"atopicvalue"):
        assert not any(v.startswith(kept) for v in values), kept
    assert sorted(v[: v.index(b"value")] for v in values if b"after" in v) == [b"apart-after", b"atopic-after",
                                                                               b"atopic-after"]


def test_a_failback_stops_where_the_target_lost_records_until_accepted(tmp_path, source, target, unique):
    """Records written on B after the failover and deleted there before the failback (retention,
    delete-records) and a topic recreated on B during the outage: the plan counts and names them,
    the failback does not start without --accept-loss (CLI exit 1, nothing written), and with it
    copies what B still holds: the rest of the partition, and the recreated topic whole, nothing of
    A->B mapped into it. The history line counts what was accepted."""
    pfx = unique("fbl")
    t, u = f"{pfx}.orders", f"{pfx}.users"
    cfg, fwd, rev = identity_pair(tmp_path, source, target, pfx, "LA", "LB", topics=(t, u))
    produce(source, t, batch(8, 1, "a", NOW))
    produce(source, u, batch(4, 1, "ua", NOW))
    assert run_once(cfg, fwd, mode="direct").records == 12
    assert failover(cfg, fwd).done
    end = consume_all(target, t)[-1].offset + 2  # A->B's last record, then its commit marker
    produce(target, t, batch(6, 1, "b", NOW + 100))
    a = admin(target)  # kept alive until its futures resolve
    [done] = a.delete_records([TopicPartition(t, 0, end + 2)]).values()
    done.result(30)
    a.delete_topics([u])[u].result(30)
    for _ in range(100):  # the same name, a new topic ID
        try:
            create_topic(target, u, 1)
            break
        except Exception:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS while the deletion completes
            time.sleep(0.3)
    produce(target, u, batch(3, 1, "ub", NOW + 200))

    proc = cli(cfg, "failback", "--flow", "LA->LB", "--yes", "--json", check=False)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["done"] is False and out["note"].startswith(f"plan {out['plan_id']} cannot be started: "), out
    losses = {(x["topic"], x["partition"], x["cause"]): x for x in out["losses"]}
    assert set(losses) == {(t, 0, "retention"), (u, 0, "recreated")}, out["losses"]
    assert (losses[(t, 0, "retention")]["ranges"], losses[(t, 0, "retention")]["offsets"]) == ([[end, end + 2]], 2)
    assert "was recreated after LA->LB wrote it" in losses[(u, 0, "recreated")]["detail"]
    text = cli(cfg, "failback", "--flow", "LA->LB", "--dry-run").stdout
    assert f"    {t}[0]: 2 offsets at {end}..{end + 2} (retention): deleted from {t}[0] on 'LB'" in text, text
    assert "STOPPED until accepted (--accept-loss)" in text, text
    with FlowClients(cfg, rev) as clients:
        assert read_history(clients) == []  # nothing written

    out = json.loads(cli(cfg, "failback", "--flow", "LA->LB", "--yes", "--json", "--accept-loss").stdout)
    assert out["done"] is True and out["accept_loss"] is True, out
    # B holds none of A->B's copies in either topic now: nothing is mapped back
    assert {(s["topic"], s["to_copy"], s["mapped"]) for s in out["seeds"]} == {(t, 4, 0), (u, 3, 0)}, out["seeds"]
    rep = run_once(cfg, rev, mode="direct")
    assert rep.ok and rep.records == 7, rep.render()
    markers_written(source, t)
    markers_written(source, u)
    assert [content(r) for r in consume_all(source, t)][8:] == [content(r) for r in consume_all(target, t)]
    assert [content(r) for r in consume_all(source, u)][4:] == [content(r) for r in consume_all(target, u)]
    with FlowClients(cfg, rev) as clients:
        line = read_history(clients)[-1]
    assert line.kind == "failback" and line.figures["lost (accepted)"] == 2, line


def test_records_compacted_away_on_the_target_are_named(tmp_path, target, third, unique):
    """A compacted topic on B: records B's producers wrote there during the outage and the log cleaner
    removed before the failback (values superseded by later ones or by a tombstone, tombstones once
    older than delete.retention.ms) never reach A. The plan names the offsets with no record left outside A->B's
    writes; accepted, the failback copies what the cleaner kept. (B is the session's cluster C here:
    the session's B holds every test's compacted state topics, and its one cleaner thread is busy.)"""
    pfx = unique("fbc")
    o, t = f"{pfx}.orders", f"{pfx}.profiles"
    conf = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100", "min.compaction.lag.ms": "0"}
    a_cluster, b_cluster = target, third
    cfg, fwd, rev = identity_pair(tmp_path, a_cluster, b_cluster, pfx, "CPA", "CPB")
    create_topic(a_cluster, o, 1)
    create_topic(b_cluster, o, 1)
    produce(a_cluster, o, batch(4, 1, "a", NOW))
    assert run_once(cfg, fwd, mode="direct").records == 4
    assert failover(cfg, fwd).done
    create_topic(b_cluster, t, 1, config=conf)  # a compacted topic B's applications use during the outage
    start = 0
    produce(b_cluster, t, [{"partition": 0, "key": b"gone", "value": b"v", "timestamp": NOW + 10}])
    produce(b_cluster, t, [{"partition": 0, "key": b"gone", "value": None, "timestamp": NOW + 11}])
    for round_ in range(6):  # values superseded again and again (as tests/integration/test_verify.py does)
        produce(b_cluster, t, [{"partition": 0, "key": f"k{i % 10}".encode(), "value": f"r{round_}-{i}".encode(),
                                "timestamp": NOW + 100 + round_ * 100 + i} for i in range(50)])
        time.sleep(0.3)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # the cleaner runs on rolled segments: nudge them to roll
        produce(b_cluster, t, [{"partition": 0, "key": b"nudge", "value": b"n", "timestamp": NOW + 12}])
        present = [r.offset for r in consume_all(b_cluster, t) if r.offset >= start]
        if len(present) < present[-1] + 1 - start:  # a record B's producer wrote is gone
            break
        time.sleep(1)
    else:
        pytest.fail("the cleaner never removed a record")
    source, target = a_cluster, b_cluster  # below: A and B of the flow
    seen, kept = None, set()
    while seen != kept:  # the cleaner has nothing left to do: two reads a while apart agree
        seen = kept
        time.sleep(2)
        kept = {r.offset for r in consume_all(target, t) if r.offset >= start}
    end = max(kept) + 1
    missing = set(range(start, end)) - kept
    dry = failback(cfg, fwd, dry_run=True)
    [loss] = dry.losses
    assert (loss.topic, loss.cause) == (t, "compaction") and missing, dry.render()
    assert {o for a, b in loss.ranges for o in range(a, b)} == missing and loss.offsets == len(missing), dry.render()
    assert dry.plan.blocked and "accept it with --accept-loss" in dry.plan.blocked, dry.render()
    first = min(missing)
    assert f"{t}[0]: {len(missing)} offsets at {first}.." in dry.render() and "(compaction)" in dry.render()
    done = failback(cfg, fwd, accept_loss=True)
    assert done.done and {s.topic: s.to_copy for s in done.seeds} == {o: 0, t: len(kept)}, done.render()
    assert sync_flow(cfg, rev, ["topics"]).ok
    rep = run_once(cfg, rev, mode="direct")
    assert rep.ok and rep.records == len(kept), rep.render()
    markers_written(source, t)
    # what the cleaner kept, once, in B's order: A's copy of the topic is compacted too (its config was
    # synced), so A may hold fewer of them by now, never another one, and the same latest value per key
    on_a, on_b = consume_all(source, t), consume_all(target, t)
    rest = iter([content(r) for r in on_b])
    assert all(content(r) in rest for r in on_a), (on_a, on_b)  # in B's order, none twice
    assert {r.key: r.value for r in on_a} == {r.key: r.value for r in on_b}


def test_a_failback_refuses_an_at_least_once_flow_and_a_reseed_under_the_default_policy(tmp_path, source, target,
                                                                                          unique):
    """An at-least-once flow may hold a retried batch on B twice while its map names one copy: the
    failback would put the other on A again, so it refuses (naming why and what to do). Under the
    default policy A's former records are on B as A.<topic>, which B->A never copies back: a reseed
    would rebuild A with B's own records only, so it refuses instead of saying it copied all of B."""
    pfx = unique("fbx2")
    for name, a, b, props in (("eos", "NA", "NB", {"exactly.once": False}),
                              ("default", "OA", "OB", {"replication.policy.class": "DefaultReplicationPolicy"})):
        common = {"topics": f"{pfx}\\.{name}", "state.topic.partitions": 1, "heartbeats.replication.enabled": False,
                  "replication.policy.class": "IdentityReplicationPolicy", **props}
        cfg = write_config(tmp_path / f"{name}.yaml", {a: source, b: target},
                           {f"{a}->{b}": common, f"{b}->{a}": {**common, "standby": True}})
        fwd = cfg.flow(f"{a}->{b}")
        topic = f"{pfx}.{name}"
        create_topic(source, topic, 1)
        assert sync_flow(cfg, fwd, ["topics"]).ok
        produce(source, topic, batch(3, 1, name, NOW))
        assert run_once(cfg, fwd, mode="direct").records == 3
        assert failover(cfg, fwd).done
        args = ["failback", "--flow", f"{a}->{b}", "--yes"] + ([] if name == "eos" else ["--reseed", "--dry-run"])
        proc = cli(cfg, *args, check=False)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        if name == "eos":
            assert f"flows.{a}->{b}.exactly.once: failback of {a}->{b}: the flow copies at least once" in proc.stderr
            assert "A failback needs exactly-once copies" in proc.stderr, proc.stderr
            with FlowClients(cfg, cfg.flow(f"{b}->{a}")) as clients:
                assert read_history(clients) == []
        else:
            assert f"flows.{b}->{a}.replication.policy.class: failback --reseed rebuilds cluster '{a}' from '{b}', " \
                f"but under the default replication policy the records {a} had are on {b} as {a}.<topic>, which " \
                f"{b}->{a} never copies back" in proc.stderr, proc.stderr


def test_a_target_truncated_since_the_failover_is_found_by_its_leader_epochs(tmp_path, source, kafka_pool, unique):
    """B loses the tail of a partition A->B wrote (what an unclean leader election leaves: here B is
    SIGKILLed and its last log segments removed before it restarts) and its producers write there
    again. The failback finds where, by the leader epochs (the failover recorded the epoch of A->B's
    last copy): it names the truncated partition and stops until accepted; accepted, A->B's records
    count only below the cut, B's new records are copied to A, and the inverse offset map never
    places B's new offsets onto A->B's old ones (B->A translates them to their own copies on A)."""
    from mirrorflow.replication.run.runner import run_once as replicate
    from tests.support import load_offset_map

    b = kafka_pool.get("P")  # killed and restarted here: test_failback.py uses it as a source that dies
    pfx = unique("fbu")
    t = f"{pfx}.orders"
    cfg, fwd, rev = identity_pair(tmp_path, source, b, pfx, "TRA", "TRB")
    create_topic(source, t, 1)
    # segment.ms rolls by record time: each copy's records (2 s apart, later than any marker's time) open a
    # segment of their own on B, so removing the last segment removes exactly the last copy and its marker
    create_topic(b, t, 1, config={"segment.ms": "100"})
    soon = int(time.time() * 1000) + 10_000
    for i in range(3):
        produce(source, t, batch(5, 1, f"a{i}", soon + 2000 * i))
        assert replicate(cfg, fwd, mode="direct").records == 5
    assert failover(cfg, fwd).done
    copies = consume_all(b, t)
    last = copies[-1].offset  # A->B's last copy
    first = next(r.offset for r in copies if r.value and r.value.startswith(b"a2"))  # its last copy run's first
    dev = kafka_pool.dev
    dev.kill("P")
    try:
        folder = dev.home / "P" / "data" / f"{t}-0"
        bases = sorted(int(f.stem) for f in folder.glob("*.log"))
        assert first in bases, (first, bases)
        for f in folder.iterdir():
            if f.suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot") and int(f.stem) >= first:
                f.unlink()
    finally:
        dev.restart("P", attached=True)
    produce(b, t, batch(4, 1, "b", NOW + 1000))  # written again by B's producers, under a new leader epoch
    on_b = consume_all(b, t)
    cut = next(r.offset for r in on_b if r.value and r.value.startswith(b"bvalue"))
    assert cut <= last, (cut, last)

    dry = failback(cfg, fwd, dry_run=True)
    [loss] = dry.losses
    assert (loss.topic, loss.cause, loss.ranges) == (t, "truncated", ((cut, last + 1),)), dry.render()
    assert f"its last copy at offset {last} (leader epoch " in loss.detail and (
        f"from offset {cut} on the partition was written again") in loss.detail, loss.detail
    assert dry.plan.blocked and "STOPPED until accepted (--accept-loss)" in dry.render()
    done = failback(cfg, fwd, accept_loss=True)
    a_copies = sum(1 for r in on_b if r.offset < cut)
    assert done.done and [(s.mapped, s.to_copy) for s in done.seeds] == [(a_copies, 4)], done.render()
    rep = replicate(cfg, rev, mode="direct")
    assert rep.ok and rep.records == 4, rep.render()
    markers_written(source, t)
    on_a = consume_all(source, t)
    assert [content(r) for r in on_a][15:] == [content(r) for r in on_b if r.offset >= cut]
    pm = load_offset_map(cfg, rev, [(t, 0)])[(t, 0)]
    for b_rec in (on_b[0], on_b[a_copies - 1], *[r for r in on_b if r.offset >= cut]):
        got = pm.translate(b_rec.offset)
        assert got.status == "exact", (b_rec.offset, got)
        assert content(next(r for r in on_a if r.offset == got.target_offset)) == content(b_rec), (b_rec.offset, got)


def failed_over_over_a_pruned_map(tmp_path, source, target, pfx: str, a: str, b: str, records: int = 6, **props):
    """Six records on a's topic, a->b with `offset.map.max.runs` 2 and transactions of 2 records, a planned
    failover (its drain copies 3 transactions, the map keeps its last 2 runs; with more records, landmarks and
    spans below them): (cfg, a->b, b->a, topic)."""
    from mirrorflow.ops.dr.failover_commit import commit_failover
    from mirrorflow.ops.dr.failover_drain import Drain
    from mirrorflow.ops.dr.failover_preflight import plan_failover

    topic = f"{pfx}.t"
    cfg, fwd, rev = identity_pair(tmp_path, source, target, pfx, a, b,
                                  both={"offset.map.max.runs": 2, "transaction.max.records": 2, **props})
    create_topic(source, topic, 1)
    create_topic(target, topic, 1)
    produce(source, topic, [{"partition": 0, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                             "timestamp": NOW + i} for i in range(records)])
    pre = plan_failover(cfg, fwd, "planned", drain=Drain("direct"))
    assert pre.plan is not None and not pre.plan.blocked, pre.render()
    assert commit_failover(cfg, fwd, pre.plan, "tester", pre).done
    return cfg, fwd, rev, topic


def verifies_and_fails_back_over(cfg, rev) -> None:
    """The reverse flow `rev` verifies, and its planned failover back is not blocked."""
    from mirrorflow.ops.dr.failover_drain import Drain
    from mirrorflow.ops.dr.failover_preflight import plan_failover
    from mirrorflow.ops.verify.verify import verify_flow

    with FlowClients(cfg, rev) as clients:
        ver = verify_flow(clients)
    assert ver.ok, ver.render()
    back = plan_failover(cfg, rev, "planned", drain=Drain("direct"))
    assert back.plan is not None and not back.plan.blocked, back.render()


def test_after_a_failback_over_a_pruned_map_the_reverse_flow_verifies_and_fails_back_over(tmp_path, source, target,
                                                                                          unique):
    """A->B's offset map pruned to its last runs before the failover (found by the model-based
    tests): the failback takes the offsets below its first run as A->B's (never copied back) and maps them
    back as far as A->B's map knows them (exactly where it kept runs, else below B->A's floor, which verify
    names not checkable), never as `missing`; the planned failover back to A is not blocked."""

    cfg, fwd, rev, _ = failed_over_over_a_pruned_map(tmp_path, source, target, unique("fbp"), "PRA", "PRB")
    rep = failback(cfg, fwd)
    assert rep.done and rep.to_copy == 0, rep.render()
    assert rep.seeds[0].pruned_below > 0, rep.render()  # the map kept its last 2 runs only
    assert run_once(cfg, rev, mode="direct").records == 0
    verifies_and_fails_back_over(cfg, rev)


def test_a_partition_and_a_topic_only_the_old_source_has_are_copied_whole_once_the_other_side_gets_them(
    tmp_path, source, target, unique
):
    """A partition and a topic created on A and written to while A->B ran, which no sync took to B
    before an unplanned failover (found by the model-based search, seed 1255376339). The failback
    keeps A's records there apart, as split brain, and records them as kept: when B later gets that
    partition and that topic (an operator adds them, B's applications write), B->A copies them from
    their beginning after A's records, instead of stopping them as state lost; verify of B->A checks
    B's records there, and the failback back copies none of A's records to B."""
    from mirrorflow.ops.verify.verify import verify_flow

    pfx = unique("fbp")
    t, born_a = f"{pfx}.orders", f"{pfx}.audit"
    cfg, fwd, rev = identity_pair(tmp_path, source, target, pfx, "PA", "PB", topics=(t,))
    produce(source, t, batch(5, 1, "a0", NOW))
    assert run_once(cfg, fwd, mode="direct").records == 5
    add_partitions(source, t, 2)  # no sync, no run: B never gets them
    produce(source, t, [{**r, "partition": 1} for r in batch(3, 1, "apart", NOW + 100)])
    create_topic(source, born_a, 1)
    produce(source, born_a, batch(2, 1, "atopic", NOW + 200))
    kept_part, kept_topic = [content(r) for r in on(consume_all(source, t), 1)], consume_all(source, born_a)
    assert len(kept_part) == 3 and len(kept_topic) == 2
    assert failover(cfg, fwd).done  # unplanned
    produce(target, t, batch(2, 1, "b0", NOW + 300))

    fb = failback(cfg, fwd)
    text = fb.render()
    assert fb.done, text
    assert {(s.topic, s.partition): (s.to_copy, s.absent) for s in fb.seeds} == {
        (t, 0): (2, False), (t, 1): (0, True), (born_a, 0): (0, True)}, text
    assert f"{t}[1]: not on PB yet" in text and f"{born_a}[0]: not on PB yet" in text, text
    rep = run_once(cfg, rev, mode="direct")
    assert rep.ok and rep.records == 2, rep.render()

    # B gets the partition and the topic after the failback, and its applications write to them
    add_partitions(target, t, 2)
    produce(target, t, [{**r, "partition": 1} for r in batch(4, 1, "bpart", NOW + 400)])
    create_topic(target, born_a, 1)
    produce(target, born_a, batch(3, 1, "btopic", NOW + 500))
    assert sync_flow(cfg, rev, ["topics"]).ok
    rep = run_once(cfg, rev, mode="direct")
    assert rep.ok and rep.records == 7, rep.render()
    markers_written(source, t, 2)
    # A's own records first (kept), then B's, each exactly once, in B's order
    b_part, b_topic = [content(r) for r in on(consume_all(target, t), 1)], consume_all(target, born_a)
    assert len(b_part) == 4 and len(b_topic) == 3
    assert [content(r) for r in on(consume_all(source, t), 1)] == kept_part + b_part
    assert [content(r) for r in consume_all(source, born_a)] == [content(r) for r in kept_topic + b_topic]
    with FlowClients(cfg, rev) as clients:
        ver = verify_flow(clients)
    text = ver.render()
    assert ver.ok, text
    assert f"{t}[1] -> {t}[1]: ok, 4 of 4 source records match (4 on the target)" in text, text
    assert f"{born_a}[0] -> {born_a}[0]: ok, 3 of 3 source records match (3 on the target)" in text, text

    # back to A and A->B again: A's kept records never reach B
    back = failover(cfg, rev, mode="planned", copy_mode="direct")
    assert back.done, back.render()
    fb2 = failback(cfg, rev)
    assert fb2.done and fb2.to_copy == 0, fb2.render()
    rep = run_once(cfg, fwd, mode="direct")
    assert rep.ok and rep.records == 0, rep.render()
    assert [content(r) for r in on(consume_all(target, t), 1)] == b_part, "A's kept records reached B"
    assert [content(r) for r in consume_all(target, born_a)] == [content(r) for r in b_topic]


def test_records_deleted_on_the_old_source_before_the_failover_are_not_checkable_after_the_failback(
    tmp_path, source, target, unique
):
    """delete-records on A while A->B ran (the copies on B stay), then an unplanned failover and the
    failback: B->A's map must not place B's copies of those records at A's offsets, which A no longer
    holds. It did (the inverse of A->B's map), and verify of B->A named them `missing ... below the
    target's log start`, which also refused the planned failover back to A (found by the model-based
    search, seed 2629272868). Now they are not checkable (nothing to compare them with on A), verify says
    ok and the planned failover back commits."""
    from mirrorflow.ops.verify.verify import verify_flow
    from tests.integration.replicate_helpers import delete_records

    pfx = unique("fbd")
    t = f"{pfx}.orders"
    cfg, fwd, rev = identity_pair(tmp_path, source, target, pfx, "DA", "DB", topics=(t,))
    produce(source, t, batch(6, 1, "a0", NOW))
    assert run_once(cfg, fwd, mode="direct").records == 6
    delete_records(source, t, 0, 2)  # A's first two records: their copies stay on B
    assert failover(cfg, fwd).done  # unplanned
    produce(target, t, batch(2, 1, "b0", NOW + 100))
    fb = failback(cfg, fwd)
    assert fb.done, fb.render()
    assert run_once(cfg, rev, mode="direct").records == 2
    with FlowClients(cfg, rev) as clients:
        ver = verify_flow(clients)
    assert ver.ok, ver.render()
    back = failover(cfg, rev, mode="planned", copy_mode="direct")
    assert back.done, back.render()


@pytest.mark.parametrize("records,committed,unread", [(6, 1, 1), (40, 7, 5)], ids=["landmarks", "spans"])
def test_a_group_inside_what_a_pruned_map_forgot_resumes_on_a_at_or_before_its_next_record(tmp_path, source, target,
                                                                                          unique, records, committed,
                                                                                          unread):
    """A->B's offset map pruned to its last runs before a planned failover; on B a group reads the first record
    and commits; after the failback, B->A's checkpoint pass and group sync must put the group on A at or
    before A's second record, which it never read (a re-read is allowed, a skip never). The failback seeds
    B->A's map from A->B's, also below its floor, from what it kept there (landmarks exactly, the rest as
    spans: state.landmarks.inverted); it left that stretch uncovered, and the translation resumed the group
    at the first record B->A's map knew, past A's second record (found by the model-based search, seed
    2744423497). With 40 records (20 transactions of 2, a commit marker after each on B), the group reads up
    to B offset 7 (A's record 5 is next) inside a span (A 2..7 at B 3..10): it resumes on A at or before 5.
    The reverse flow verifies and its planned failover back is not blocked."""
    from confluent_kafka import Consumer

    from mirrorflow.groups.checkpoint import emit_checkpoints
    from mirrorflow.groups.offset_sync import sync_group_offsets
    from tests.support import load_offset_map
    pfx = unique("fbg")
    group = f"{pfx}-g"
    cfg, fwd, rev, topic = failed_over_over_a_pruned_map(tmp_path, source, target, pfx, f"PGA{records}",
                                                         f"PGB{records}", records,
                                                         **{"sync.group.offsets.enabled": True})
    on_b = consume_all(target, topic)
    assert [r.value for r in on_b if r.offset < committed] == [f"v{i}".encode() for i in range(unread)]
    assert next(r.value for r in on_b if r.offset >= committed) == f"v{unread}".encode()
    c = Consumer({**target.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, committed)], asynchronous=False)  # read up to v{unread - 1} on B
    finally:
        c.close()
    rep = failback(cfg, fwd)
    assert rep.done and rep.seeds[0].pruned_below > 0, rep.render()
    assert bool(load_offset_map(cfg, rev, [(topic, 0)])[(topic, 0)].spans) == (records > 6)
    run = emit_checkpoints(cfg, rev)
    assert not run.errors, run.errors
    assert not sync_group_offsets(cfg, rev, store=run.store).errors
    c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        at = c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        c.close()
    nxt = next(r.offset for r in consume_all(source, topic) if r.value == f"v{unread}".encode())
    assert 0 <= at <= nxt, f"group {group} committed at {at} on A, past v{unread} at {nxt}, which it never read"
    verifies_and_fails_back_over(cfg, rev)


def test_a_failback_over_a_pruned_map_a_backfill_reordered_copies_none_of_the_old_sources_records_back(
    tmp_path, source, target, unique
):
    """A->B started at `latest`, copied six records, then a backfill copied the two older ones after them on B;
    the planned failover pruned A->B's map to its last 2 runs: the backfill's run (source offsets 0..1, the
    lowest) stays below the floor as a landmark, above the first run on B. The failback took every offset
    below that first run as A->B's and the rest from its runs only, so it named the backfill's two copies
    "written on B" and copied them back to A: duplicates (found by the model-based search, seed 2995648010).
    Now a landmark above the first run is A->B's exact write like a run: nothing to copy, A unchanged."""
    from mirrorflow.ops.backfill import backfill
    from mirrorflow.ops.dr.failover_commit import commit_failover
    from mirrorflow.ops.dr.failover_drain import Drain
    from mirrorflow.ops.dr.failover_preflight import plan_failover

    pfx = unique("fbr")
    topic = f"{pfx}.t"
    cfg, fwd, rev = identity_pair(tmp_path, source, target, pfx, "PRBA", "PRBB",
                                  both={"offset.map.max.runs": 2, "transaction.max.records": 2,
                                        "initial.position": "latest"})
    create_topic(source, topic, 1)
    create_topic(target, topic, 1)
    rec = [{"partition": 0, "key": f"k{i}".encode(), "value": f"v{i}".encode(), "timestamp": NOW + i} for i in range(8)]
    produce(source, topic, rec[:2])
    assert run_once(cfg, fwd, mode="direct").records == 0  # the flow starts at A's end: v0, v1 are not its
    produce(source, topic, rec[2:])
    assert run_once(cfg, fwd, mode="direct").records == 6
    assert backfill(cfg, fwd, "earliest", "start", mode="direct").ok
    assert [r.value for r in consume_all(target, topic)] == [f"v{i}".encode() for i in (2, 3, 4, 5, 6, 7, 0, 1)]
    pre = plan_failover(cfg, fwd, "planned", drain=Drain("direct"))
    assert pre.plan is not None and not pre.plan.blocked, pre.render()
    assert commit_failover(cfg, fwd, pre.plan, "tester", pre).done
    on_a = [content(r) for r in consume_all(source, topic)]
    rep = failback(cfg, fwd)
    assert rep.done and rep.to_copy == 0, rep.render()
    assert rep.seeds[0].pruned_below > 0, rep.render()
    run_once(cfg, rev, mode="direct")
    assert [content(r) for r in consume_all(source, topic)] == on_a


def test_holes_an_unplanned_failover_left_are_its_rpo_not_a_mismatch_and_stay_apart_after_the_failback(
    tmp_path, source, target, unique
):
    """A->B copied A's first ten records and a backfill its last ten: ten offsets between them not copied
    (a hole, verify fails) when A was lost and the flow failed over unplanned. The failover reports them
    not replicated; verify of the failed-over flow then names them so (its RPO: nothing copies them, the
    flow is stopped) and passes; the failback keeps them apart on A (divergence) and verify of both
    flows passes after it, and after the round trip A->B copies none of it. Verify called them `HOLES ... the
    next replicate run copies them` and failed (found by the model-based search, seed 711118659)."""
    from mirrorflow.replication.plan.run_options import RunOptions

    pfx = unique("fbh")
    t = f"{pfx}.orders"
    cfg, fwd, rev = identity_pair(tmp_path, source, target, pfx, "HOA", "HOB", topics=(t,))
    produce(source, t, batch(30, 1, "a0", NOW))
    assert run_once(cfg, fwd, mode="direct", options=RunOptions(partition_limit=10)).records == 10
    assert cli(cfg, "backfill", "--flow", "HOA->HOB", "--from", "offset:20", "--to", "offset:30", "--mode",
               "direct").returncode == 0
    hole = cli(cfg, "verify", "--flow", "HOA->HOB", check=False)
    assert hole.returncode == 1 and "HOLES: 10 source offsets below the copied ones are not on the target (10..20); " \
        "the next replicate run copies them" in hole.stdout, hole.stdout

    fo = failover(cfg, fwd)  # unplanned: A answers, its end is on record
    assert fo.done and [(p.replicated_to, p.not_replicated) for p in fo.plan.partitions] == [(10, 20)], fo.render()
    after = cli(cfg, "verify", "--flow", "HOA->HOB", check=False)
    assert after.returncode == 0, after.stdout
    assert "10 source offsets below the copied ones were not copied when the flow failed over (10..20): its " \
        "failover reported them not replicated" in after.stdout, after.stdout
    assert "HOLES" not in after.stdout and "next replicate run" not in after.stdout, after.stdout

    produce(target, t, batch(3, 1, "b0", NOW + 100))  # B's applications, after the failover
    fb = failback(cfg, fwd)
    assert fb.done, fb.render()
    assert [(d.topic, d.partition, d.ranges, d.records) for d in fb.divergence] == [(t, 0, ((10, 20),), 10)], \
        fb.render()
    assert run_once(cfg, rev, mode="direct").records == 3
    on_a = consume_all(source, t)
    assert [content(r) for r in on_a[30:]] == [content(r) for r in consume_all(target, t)[20:]]  # B's, after A's
    for flow in ("HOA->HOB", "HOB->HOA"):
        ver = cli(cfg, "verify", "--flow", flow, check=False)
        assert ver.returncode == 0, (flow, ver.stdout)
    assert len(consume_all(target, t)) == 23  # the divergence stays on A only

    # the round trip ends (B->A failed over planned, failed back): A->B copies what A gets from then on, and
    # none of the hole it kept apart
    assert failover(cfg, rev, mode="planned", copy_mode="direct").done
    assert failback(cfg, rev).done
    produce(source, t, batch(2, 1, "a1", NOW + 200))
    rep = run_once(cfg, fwd, mode="direct")
    assert rep.ok and rep.records == 2 and rep.partitions[0].lag == 0, rep.render()
    assert [content(r) for r in consume_all(target, t)[23:]] == [content(r) for r in consume_all(source, t)[-2:]]
    back = cli(cfg, "verify", "--flow", "HOB->HOA", check=False)  # failed over now: A->B's copies are not its own
    assert back.returncode == 0 and "not copied (failed over: the flow copies nothing more)" in back.stdout, back.stdout
    ver = cli(cfg, "verify", "--flow", "HOA->HOB", check=False)
    assert ver.returncode == 0 and "not the flow's to copy (before its origin, or kept apart on the source by a " \
        "failback): 10..20" in ver.stdout and "not copied yet" not in ver.stdout, ver.stdout


def test_a_reseed_of_a_failed_over_flow_is_refused_forced_or_not(tmp_path, source, target, unique):
    """A failed-over flow's progress is what its failback reads to tell its copies on B from what B's
    applications wrote after the failover. A re-seed of its topic (A's topic recreated while A was lost: a
    partition the flow's runs would stop, so the re-seed is no misclick) replaced it with a progress from A's
    log start, and the failback then took the flow's own copies for B's records; it is refused, forced or
    not, dry run and write alike, naming the failback, with nothing written. It went through before."""
    from tests.integration.test_topic_identity import recreate_topic
    from tests.support import read_progress

    pfx = unique("fbr")
    t = f"{pfx}.orders"
    cfg, fwd, _ = identity_pair(tmp_path, source, target, pfx, "RSA", "RSB", topics=(t,))
    produce(source, t, batch(10, 1, "a0", NOW))
    assert run_once(cfg, fwd, mode="direct").records == 10
    assert failover(cfg, fwd).done
    before = read_progress(cfg, fwd)
    recreate_topic(source, t)  # A comes back with the topic recreated: the flow's state no longer describes it
    produce(source, t, batch(4, 1, "a1", NOW + 100))
    for extra in ((), ("--yes",), ("--yes", "--force")):
        proc = cli(cfg, "reseed", "--flow", "RSA->RSB", "--topic", t, *extra, check=False)
        assert proc.returncode != 0 and proc.stdout == "", (extra, proc.stdout)
        assert "flow RSA->RSB was failed over to 'RSB': its progress tells its failback which records on 'RSB' it " \
            "copied from 'RSA'" in proc.stderr and "Nothing written. Next step: `mirrorflow failback --flow " \
            "RSA->RSB`" in proc.stderr, (extra, proc.stderr)
    assert read_progress(cfg, fwd) == before
    with FlowClients(cfg, fwd) as clients:
        assert [e.kind for e in read_history(clients)] == ["failover"]
