"""`mirrorflow verify` on real brokers: an exact match after clean copies (plain, transactional with
aborts, compacted with holes), and the two ways a Kafka target can stop matching its source: a
record written into the remote topic by hand between two copies (extra), and records gone from the
target (delete_records below copied offsets, a recreated target topic)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from confluent_kafka import Producer

from mirrorflow.clients import FlowClients
from mirrorflow.ops.verify.verify import VerifyReport, verify_flow
from mirrorflow.replication.run.runner import run_once
from tests.integration.replicate_helpers import delete_records, make_flow, mirror_topic
from tests.integration.test_replicate import NOW, cli, records
from tests.integration.test_topic_identity import recreate_topic
from tests.support import consume_all, end_transaction, load_offset_map, produce

pytestmark = pytest.mark.integration


def verify(cfg, flow, topics=None, start=None, end=None) -> VerifyReport:
    with FlowClients(cfg, flow) as clients:
        return verify_flow(clients, topics, start, end)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def test_clean_copy_matches_exactly_and_reports_what_is_not_copied(tmp_path, source, target, unique):
    pfx = unique("vok")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 3)
    produce(source, t, records(300, 3))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"transaction.max.records": 40})
    assert run_once(cfg, flow, mode="direct").records == 300
    produce(source, t, records(30, 3, seed="later"))  # on the source, not copied yet

    rep = verify(cfg, flow)
    assert rep.ok, rep.render()
    assert [(p.topic, p.partition) for p in rep.partitions] == [(t, 0), (t, 1), (t, 2)]
    for p in rep.partitions:
        assert (p.source_records, p.target_records, p.matched, p.mismatches) == (100, 100, 100, 0), p
        assert len(p.ranges) == 1 and (p.ranges[0].src_from, p.ranges[0].src_to) == (0, 100)
        assert p.ranges[0].source_checksum == p.ranges[0].target_checksum != ""
        first = consume_all(target, f"A.{t}", [p.partition])[0].offset  # after the unit's aborted transaction
        assert p.ranges[0].tgt_from == first and p.ranges[0].tgt_to > first + 100  # markers between transactions
        assert p.not_copied == [(100, 110)] and p.first_mismatch is None and p.error is None

    # a window in offsets, and one in time (records() stamps NOW + 10 ms per record, round robin)
    rep = verify(cfg, flow, start="offset:20", end="offset:50")
    assert rep.ok and [p.matched for p in rep.partitions] == [30, 30, 30], rep.render()
    assert rep.partitions[0].not_copied == [] and rep.partitions[0].window == (20, 50)
    rep = verify(cfg, flow, start=iso(NOW + 300), end=iso(NOW + 600))
    assert rep.ok and [p.window for p in rep.partitions] == [(10, 20)] * 3, rep.render()
    assert [p.matched for p in rep.partitions] == [10, 10, 10]

    proc = cli(cfg, "verify", "--flow", "A->B", "--json")
    out = json.loads(proc.stdout)
    assert out["ok"] is True and out["records"] == 300 and out["matched"] == 300 and out["mismatched_partitions"] == 0
    text = cli(cfg, "verify", "--flow", "A->B", "--topics", f"{pfx}\\.ord.*").stdout
    assert "MATCH: every copied record is on the target, exactly" in text, text
    assert f"{t}[0] -> A.{t}[0]: ok, 100 of 100 source records match" in text
    assert "not copied yet: 100..110" in text
    bad = cli(cfg, "verify", "--flow", "A->B", "--from", "yesterday", check=False)
    assert bad.returncode == 2 and "--from: expected earliest (source log start), latest (source end), start" in bad.stderr


def test_a_record_written_into_the_remote_topic_between_copies_is_extra(tmp_path, source, target, unique):
    pfx = unique("vextra")
    t = f"{pfx}.events"
    remote = mirror_topic(source, target, t, 1)
    produce(source, t, records(50, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"transaction.max.records": 20})
    assert run_once(cfg, flow, mode="direct").records == 50
    produce(target, remote, [{"partition": 0, "key": b"k", "value": b"by hand", "timestamp": NOW}])
    produce(source, t, records(20, 1, seed="second"))
    assert run_once(cfg, flow, mode="direct").records == 20
    hand = next(r.offset for r in consume_all(target, remote) if r.value == b"by hand")

    rep = verify(cfg, flow)
    assert not rep.ok
    p = rep.partitions[0]
    assert p.counts == {"extra": 1} and p.matched == 70 and p.source_records == 70 and p.target_records == 71
    m = p.first_mismatch
    assert (m.kind, m.source_offset, m.target_offset) == ("extra", None, hand), m
    assert p.ranges[0].source_checksum != p.ranges[0].target_checksum
    proc = cli(cfg, "verify", "--flow", "A->B", check=False)
    assert proc.returncode == 1, proc.stderr
    assert "MISMATCH in 1 of 1 partition(s)" in proc.stdout and f"first: extra at source offset - / target offset {hand}" in proc.stdout
    # the range before the hand-written record still matches on its own
    assert verify(cfg, flow, end="offset:50").ok


def test_copies_deleted_on_the_target_are_named_not_checkable(tmp_path, source, target, unique):
    """The target's retention or delete-records took copies the source still holds: the target's segments
    roll apart from the source's, so its retention does this in every long-lived mirror. verify says which
    source offsets and how many copies (not checkable, as below the source's log start), checks the rest,
    and passes; a planned failover is not refused for it. A copy gone above the log start stays `missing`
    (test_verify_walk)."""
    pfx = unique("vdel")
    t = f"{pfx}.ledger"
    remote = mirror_topic(source, target, t, 1)
    produce(source, t, records(60, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 60
    first = consume_all(target, remote)[0].offset  # one transaction wrote the 60 records from here
    delete_records(target, remote, 0, first + 10)

    rep = verify(cfg, flow)
    p = rep.partitions[0]
    assert rep.ok and p.counts == {} and p.matched == 50 and p.source_records == 50, rep.render()
    assert p.unchecked == [
        f"source offsets 0..10: 10 copied records deleted on the target since (below its log start {first + 10}: "
        "retention, delete-records), not checkable"
    ]
    proc = cli(cfg, "verify", "--flow", "A->B", check=False)
    assert proc.returncode == 0 and "not checkable" in proc.stdout, proc.stdout + proc.stderr
    assert verify(cfg, flow, start="offset:10").partitions[0].unchecked == []  # what is left matches


def test_a_recreated_target_topic_is_a_mismatch(tmp_path, source, target, unique):
    pfx = unique("vrec")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 2)
    produce(source, t, records(40, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 40
    recreate_topic(target, remote, 2)
    produce(target, remote, [{"partition": 0, "key": b"other", "value": f"v{i}".encode(), "timestamp": NOW}
                             for i in range(5)])

    rep = verify(cfg, flow)
    assert not rep.ok and len(rep.mismatched) == 2, rep.render()
    p0, p1 = rep.partitions
    # the map places source offset 0 where the first copy was (after its aborted transaction); the
    # recreated topic holds other records there
    assert p0.first_mismatch.kind == "key" and p0.first_mismatch.source_offset == 0
    at = load_offset_map(cfg, flow, [(t, 0)])[(t, 0)].target_of(0)
    assert p0.first_mismatch.target_offset == at
    # the 5 other records sit at target offsets 0..4: those from `at` on differ, the rest is missing
    assert p0.counts == {"key": 5 - at, "missing": 15 + at} and p0.matched == 0
    assert p1.counts == {"missing": 20} and p1.target_records == 0
    assert all(any("the target topic was recreated since it was copied" in n for n in p.notes) for p in (p0, p1))


def test_transactional_source_with_aborts_matches_exactly(tmp_path, source, target, unique):
    pfx = unique("vtxn")
    t = f"{pfx}.payments"
    mirror_topic(source, target, t, 1)
    p = Producer({**source.client_config(), "transactional.id": f"src-{pfx}"})
    p.init_transactions(30)
    n = 0
    for i in range(10):
        p.begin_transaction()
        for _ in range(5 + i):
            p.produce(t, f"v{n}".encode(), f"k{n}".encode(), 0, timestamp=NOW + n, headers=[("h", str(n).encode())])
            n += 1
        end_transaction(p, commit=i % 3 != 1)
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"transaction.max.records": 7})
    assert run_once(cfg, flow, mode="direct").ok
    committed = consume_all(source, t)
    assert len(committed) < n

    rep = verify(cfg, flow)
    part = rep.partitions[0]
    assert rep.ok and part.matched == part.source_records == part.target_records == len(committed), rep.render()
    assert part.ranges[0].src_to == part.source_end  # the covered range runs through the aborted records


def test_compacted_source_with_holes_matches_exactly(tmp_path, source, target, unique):
    pfx = unique("vcmp")
    t = f"{pfx}.profiles"
    conf = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100", "min.compaction.lag.ms": "0"}
    mirror_topic(source, target, t, 1, config=conf)
    for round_ in range(6):
        produce(source, t, [{"partition": 0, "key": f"k{i % 10}".encode(), "value": f"r{round_}-{i}".encode(),
                             "timestamp": NOW + round_ * 100 + i} for i in range(50)])
        time.sleep(0.3)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        offs = [r.offset for r in consume_all(source, t)]
        if len(offs) < offs[-1] + 1:
            break
        produce(source, t, [{"partition": 0, "key": b"k0", "value": b"nudge", "timestamp": NOW + 9999}])
        time.sleep(1)
    else:
        pytest.fail("the source topic was never compacted")
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"transaction.max.records": 4})
    assert run_once(cfg, flow, mode="direct").ok
    copied = len(consume_all(target, f"A.{t}"))

    rep = verify(cfg, flow)
    part = rep.partitions[0]
    # the source may compact further after the copy: those records count as compacted, not as a mismatch
    assert rep.ok and part.matched + part.compacted == copied and part.matched > 0, rep.render()
    assert part.ranges[0].source_checksum == part.ranges[0].target_checksum


def test_records_deleted_by_source_retention_are_named_not_counted(tmp_path, source, target, unique):
    pfx = unique("vret")
    t = f"{pfx}.logs"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(50, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 50
    delete_records(source, t, 0, 20)  # after the copy: the target keeps what the source deleted

    rep = verify(cfg, flow)
    p = rep.partitions[0]
    assert rep.ok and p.matched == 30 and p.source_start == 20, rep.render()
    copy20 = [r.offset for r in consume_all(target, f"A.{t}")][20]  # the copy of source offset 20
    assert [(r.src_from, r.src_to, r.tgt_from) for r in p.ranges] == [(20, 50, copy20)]
    assert p.unchecked == ["source offsets 0..20: deleted by source retention, not checkable"]
    assert "source offsets 0..20: deleted by source retention, not checkable" in rep.render()


def test_holes_copied_after_an_island_below_a_pruned_floor_are_not_extra(tmp_path, source, target, unique):
    """A backfill's island copied first, the holes below it after it (Kafka appends: they land after
    the island on the target), then the offset map pruned above them (offset.map.max.runs): the map
    forgot which source record each of those copies is, so verify names them not checkable; it used to
    call them `extra` (records no copy wrote), as the model-based search found (seed 3306115912)."""
    from mirrorflow.groups.checkpoint import emit_checkpoints
    from mirrorflow.ops.backfill import backfill
    from mirrorflow.replication.plan.run_options import RunOptions

    pfx = unique("vfloor")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 1)
    produce(source, t, records(20, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"offset.map.max.runs": 2, "unit.max.records": 3,
                                                            "state.namespace": pfx})
    assert run_once(cfg, flow, mode="direct", options=RunOptions(partition_limit=3)).records == 3
    assert backfill(cfg, flow, "offset:12", "latest", mode="direct").ok  # the island 12..20
    for _ in range(5):  # the holes 3..12, after the island on the target
        run_once(cfg, flow, mode="direct")
    dst = consume_all(target, remote)
    src = {r.content(): r.offset for r in consume_all(source, t)}
    order = [src[r.content()] for r in dst]
    assert sorted(order) == list(range(20)) and order[:3] == [0, 1, 2] and order[3:11] == list(range(12, 20)), order
    produce(source, t, records(6, 1, seed="more"))
    for _ in range(4):  # more runs, each a map entry, and checkpoint passes that fold the map
        run_once(cfg, flow, mode="direct")
        emit_checkpoints(cfg, flow)
    pm = load_offset_map(cfg, flow)[(t, 0)]
    assert pm.first is not None and pm.floor > pm.first, (pm.first, pm.floor)  # pruned
    rep = verify(cfg, flow)
    assert rep.ok, rep.render()
    [p] = rep.partitions
    assert p.counts == {} and any("below the offset map's floor (pruned), not checkable" in u for u in p.unchecked), p
