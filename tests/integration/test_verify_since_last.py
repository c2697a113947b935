"""Verify since the last verify, on real brokers: a planned failover's verify records per partition
how far it matched ('verified up to', on the target) and the next one compares only what was copied
since (the ranges and record counts its report names), still finding a record planted in that new
range; a mark that no longer describes its partition (ahead of what is copied, a target topic with
another ID) is not trusted: that partition is verified from the start, and the report says why."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from confluent_kafka import Producer

from mirrorflow.clients import FlowClients
from mirrorflow.ops.dr.failover_drain import Drain
from mirrorflow.ops.dr.failover_preflight import plan_failover
from mirrorflow.ops.verify.verify import verify_flow
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.verified import read_marks, write_marks
from tests.integration.replicate_helpers import make_flow, mirror_topic
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, markers_written, produce, read_progress

pytestmark = pytest.mark.integration


def scope(rep) -> dict[int, tuple]:
    """Per partition what a verify compared: (checked from the mark, window start, ranges, source
    records, matched, 'verified up to' recorded)."""
    return {p.partition: (p.since, p.window[0], [(r.src_from, r.src_to) for r in p.ranges], p.source_records,
                          p.matched, p.verified_to) for p in rep.partitions}


def test_a_verify_since_the_last_one_checks_only_what_was_copied_since_and_stays_exact(
        tmp_path, source, target, unique):
    pfx = unique("vsl")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 2)
    produce(source, t, records(40, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"groups": f"{pfx}-.*"})
    assert run_once(cfg, flow, mode="direct").records == 40

    # 1. the first planned failover's preflight verifies everything and records how far
    first = plan_failover(cfg, flow, "planned", drain=Drain("direct")).verify
    assert first.ok and first.since_last and first.recorded == 2, first.render()
    assert scope(first) == {0: (None, 0, [(0, 20)], 20, 20, 20), 1: (None, 0, [(0, 20)], 20, 20, 20)}

    # 2. the next one (its drain copies 10 new records) compares only those
    produce(source, t, records(10, 2, seed="new"))
    second = plan_failover(cfg, flow, "planned", drain=Drain("direct")).verify
    assert second.ok and second.recorded == 2, second.render()
    assert scope(second) == {0: (20, 20, [(20, 25)], 5, 5, 25), 1: (20, 20, [(20, 25)], 5, 5, 25)}
    assert "(from the last verify to latest): MATCH" in second.render()
    assert "since the last verify (" in second.render() and "verified up to 20 then, checked from there" in \
        second.render()

    # 3. a record written into B's topic by hand after that verify, then more copies: found, and
    # that partition's mark stays where it was
    rogue = Producer(target.client_config())
    rogue.produce(remote, b"not-a-copy", b"rogue", partition=0)
    assert rogue.flush(15) == 0
    produce(source, t, records(6, 2, seed="late"))
    assert run_once(cfg, flow, mode="direct").records == 6
    proc = cli(cfg, "verify", "--flow", "A->B", "--since-last", "--json", check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    third = json.loads(proc.stdout)
    by_p = {p["partition"]: p for p in third["partitions"]}
    assert (by_p[0]["ok"], by_p[0]["counts"], by_p[0]["since"], by_p[0]["verified_to"]) == (
        False, {"extra": 1}, 25, None), by_p[0]
    assert [(r["src_from"], r["src_to"], r["source_records"]) for r in by_p[0]["ranges"]] == [(25, 28, 3)]
    assert by_p[0]["first_mismatch"]["kind"] == "extra"
    assert (by_p[1]["ok"], by_p[1]["since"], by_p[1]["source_records"], by_p[1]["verified_to"]) == (True, 25, 3, 28)
    assert third["recorded"] == 1

    # 4. marks that no longer describe their partition are not trusted: verified from the start
    with FlowClients(cfg, flow) as clients:
        mark = read_marks(clients, [(t, 1)])[(t, 1)]
        assert (mark.src_from, mark.to) == (0, 28)
        nxt = read_progress(cfg, flow, [(t, 1)])[(t, 1)].next
        for planted, why in ((replace(mark, to=nxt + 100), f"it is ahead of what is copied (the flow's progress is "
                                                           f"at {nxt})"),
                             (replace(mark, target_topic_id="AAAAAAAAAAAAAAAAAAAAAA"),
                              "the target topic was recreated since (topic ID AAAAAAAAAAAAAAAAAAAAAA -> ")):
            write_marks(clients, [planted])
            rep = verify_flow(clients, topics=t, since_last=True)
            p1 = next(p for p in rep.partitions if p.partition == 1)
            assert (p1.ok, p1.since, p1.window[0], [(r.src_from, r.src_to) for r in p1.ranges], p1.matched) == (
                True, None, 0, [(0, 28)], 28), rep.render()
            assert any(n.startswith(f"the stored 'verified up to' {planted.to} is not trusted ({why}")
                       for n in p1.notes), p1.notes
            assert p1.verified_to is None  # record was not asked for


def test_a_mark_of_no_copy_checks_the_next_copies_from_the_first_not_from_the_targets_start(
        tmp_path, source, target, unique):
    """A verify over source offsets the flow covers without a copy (an aborted transaction's) records a
    mark with no place on the target (`tgt_end` -1). The next verify reads the target from the first copy
    it checks, as a verify from the start: records the target got before the flow's copies (here by hand;
    in the search, records a failback kept and records written before the flow) are not taken for extra.
    It read them from the target's start as extra and refused the planned failover (model-based search,
    seed 3017673022)."""
    pfx = unique("vnocopy")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 1)
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 0  # anchored at 0
    produce(target, remote, [{"partition": 0, "key": b"before", "value": f"theirs-{i}".encode()} for i in range(2)])
    aborted = Producer({**source.client_config(), "transactional.id": f"{pfx}-aborted"})
    aborted.init_transactions(30)
    aborted.begin_transaction()
    for i in range(3):
        aborted.produce(t, f"aborted-{i}".encode(), b"k", partition=0)
    aborted.flush(30)
    aborted.abort_transaction(30)
    produce(source, t, [{"partition": 0, "key": b"k", "value": b"copied-0"}])
    markers_written(source, t)  # the abort's marker follows its answer: until then a read_committed read ends below
    [first_record] = consume_all(source, t)  # above the aborted records and their marker
    assert run_once(cfg, flow, mode="direct").records == 1
    with FlowClients(cfg, flow) as clients:
        first = verify_flow(clients, end=f"offset:{first_record.offset}", since_last=True, record=True)
        mark = read_marks(clients, [(t, 0)])[(t, 0)]
    assert first.ok and first.recorded == 1, first.render()
    assert (mark.to, mark.records, mark.tgt_end) == (first_record.offset, 0, -1), mark

    produce(source, t, [{"partition": 0, "key": b"k", "value": f"copied-{i}".encode()} for i in range(1, 4)])
    assert run_once(cfg, flow, mode="direct").records == 3
    with FlowClients(cfg, flow) as clients:
        since = verify_flow(clients, since_last=True)
        whole = verify_flow(clients)
    assert whole.ok, whole.render()
    assert since.ok, since.render()
    [p] = since.partitions
    assert (p.since, p.source_records, p.matched) == (first_record.offset, 4, 4), since.render()
