"""No holes, on real brokers: every offset a flow owns is copied (or named lost), whatever cuts a
run short, and what an older release left behind is found and copied.

- A backlog longer than one unit, with a byte bound that cuts units short: the rest of a partition
  waits for the next run instead of becoming a hole behind the copied units (it used to: 1,176 of
  3,000 records reached the target and verify said all was well).
- Progress written by an earlier release with holes below its `next` (read as it is): verify fails
  on the holes, the next run copies them, or names them lost when the source no longer has them.
- A partition or topic that appears after a `latest` flow's first run is copied from its beginning
  (it used to start at its end: 5 of 105 records reached the target).
"""

from __future__ import annotations

import json
import time

import pytest

from mirrorflow.replication.plan.run_options import RunOptions
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.names import progress_topic
from mirrorflow.state.records import Progress
from mirrorflow.state.state_topics import state_key, state_partition
from tests.integration.replicate_helpers import add_partitions, delete_records, make_flow, mirror_topic
from tests.integration.test_backfill import assert_each_once_via_map, backfill_flow, cli
from tests.support import admin, consume_all, create_topic, produce, producer, read_progress, wait_for_topic

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000) - 60_000


def kib_records(n: int, partitions: int = 1, seed: str = "") -> list[dict]:
    return [
        {"partition": i % partitions, "key": f"k{i}".encode(), "value": f"{seed}{i:08d}".encode() * 128,
         "timestamp": NOW + i}
        for i in range(n)
    ]


def test_a_backlog_many_units_long_cut_short_by_bytes_is_copied_whole_with_no_hole(tmp_path, source, target, unique):
    pfx = unique("backlog")
    topic = f"{pfx}.orders"
    remote = mirror_topic(source, target, topic, 1)
    produce(source, topic, kib_records(3_000))  # 3 units of 1,000; each cut at ~390 records by bytes
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"unit.max.records": 1_000, "unit.max.bytes": 400_000})
    copied, runs = 0, 0
    while runs < 12:
        rep = run_once(cfg, flow, mode="direct")
        runs += 1
        assert rep.ok, rep.render()
        copied += rep.records
        prog = read_progress(cfg, flow)[(topic, 0)]
        # never a hole: every offset below `next` is copied, nothing above it
        assert prog.covered == ((0, copied),) and prog.next == copied, (prog, rep.render())
        [part] = rep.partitions
        assert part.lag == 3_000 - copied, rep.render()
        on_target = consume_all(target, remote)
        assert len(on_target) == copied
        if copied < 3_000:
            assert part.status == "partial", rep.render()
            assert f"unit.max.bytes reached at source offset {copied}" in rep.render()
            rc, out, _ = cli(cfg, "verify", "--flow", "A->B")
            assert rc == 0, out  # the rest is "not copied yet", not a hole
        else:
            break
    assert copied == 3_000 and 6 <= runs <= 9, runs
    assert_each_once_via_map(cfg, flow, source, target, topic, remote, 1)
    assert run_once(cfg, flow, mode="direct").records == 0
    rc, out, _ = cli(cfg, "verify", "--flow", "A->B")
    assert rc == 0, out


def progress_partitions(target, flow) -> int:
    """The partition count of the flow's progress topic on the target, as it is: the state topics of flow A->B
    are shared by the tests of one worker, and the first to create them set it (1, 2 or 16)."""
    return len(admin(target).list_topics(progress_topic(flow), timeout=10).topics[progress_topic(flow)].partitions)


def write_old_progress(target, flow, prog: Progress) -> None:
    """A progress record as a release before this one wrote it: no `origin`, `next` past its holes. Into the
    partition the flow's own records of the key are in: a full run (2026-12-02) wrote it where 2 partitions would
    put it, the run's new progress went to the key's partition of 16, and the read back took the old record."""
    d = json.loads(prog.to_json())
    d.pop("origin")
    p = producer(target)
    p.produce(progress_topic(flow), json.dumps(d).encode(), state_key(prog.topic, prog.partition),
              state_partition(prog.topic, prog.partition, progress_partitions(target, flow)))
    assert p.flush(30) == 0, "the old progress record was not delivered in 30 s"


def progress_history(target, flow, topic: str, partition: int) -> str:
    """Every progress record of one source partition on the target, committed or not, in log order (what
    a failure says)."""
    key, n = state_key(topic, partition), state_partition(topic, partition, progress_partitions(target, flow))
    committed = {r.offset for r in consume_all(target, progress_topic(flow), [n]) if r.key == key}
    lines = [f"  offset {r.offset} ({'committed' if r.offset in committed else 'NOT committed'}, ts {r.timestamp}): "
             f"{(r.value or b'').decode()[:220]}"
             for r in consume_all(target, progress_topic(flow), [n], isolation="read_uncommitted") if r.key == key]
    return f"progress records of {topic}[{partition}] in {progress_topic(flow)}[{n}]:\n" + "\n".join(lines)


@pytest.mark.parametrize("lost", [False, True])
def test_holes_an_earlier_release_left_are_found_copied_or_named_lost(tmp_path, source, target, unique, lost):
    """State as the unit-jump of earlier releases left it: offsets 100..200 of 300 never copied,
    `next` at 300. Verify fails naming the hole; the next run copies it (or, when source retention
    took part of it since, names that part lost and copies the rest); verify then passes."""
    pfx = unique("oldholes")
    topic = f"{pfx}.orders"
    remote = mirror_topic(source, target, topic, 1)
    produce(source, topic, kib_records(300))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"unit.max.records": 100})
    assert run_once(cfg, flow, mode="direct", options=RunOptions(partition_limit=100)).records == 100
    # the third hundred copied above the progress (a backfill), then the progress rewritten as the old
    # releases would have left it: next jumped over 100..200
    rc, out, _ = cli(cfg, "backfill", "--flow", "A->B", "--from", "offset:200", "--to", "offset:300",
                     "--mode", "direct")
    assert rc == 0, out
    now = read_progress(cfg, flow)[(topic, 0)]
    assert now.next == 100 and now.covered == ((0, 100), (200, 300))  # this release: no jump
    write_old_progress(target, flow, Progress(topic, 0, 300, now.covered, now.tgt_end, records=200,
                                           topic_id=now.topic_id, target_topic=remote,
                                           target_topic_id=now.target_topic_id))
    assert read_progress(cfg, flow)[(topic, 0)].next == 100  # read as it is: the hole is below
    rc, out, _ = cli(cfg, "verify", "--flow", "A->B")
    assert rc == 1 and "HOLES: 100 source offsets below the copied ones are not on the target (100..200)" in out, out
    rc, out, _ = cli(cfg, "status", "--flow", "A->B", "--json")
    [st] = [x for x in json.loads(out)[0]["partitions"] if x["topic"] == topic]
    assert rc == 0 and (st["next"], st["lag"]) == (100, 100), out
    if lost:
        delete_records(source, topic, 0, 150)
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == (50 if lost else 100) and rep.lost == (50 if lost else 0), rep.render()
    assert rep.partitions[0].lag == 0, rep.render()
    prog = read_progress(cfg, flow)[(topic, 0)]
    assert prog.next == 300 and prog.holes() == [] and prog.lost == (50 if lost else 0), (
        f"read back: {prog}\n{progress_history(target, flow, topic, 0)}\nthe run: {rep.render()}")
    src, dst = consume_all(source, topic), consume_all(target, remote)
    assert len(dst) == (250 if lost else 300)
    # every record the source still has is on the target once; the hole's land after the others
    assert len({r.content() for r in dst}) == len(dst)
    assert {r.content() for r in src} <= {r.content() for r in dst}
    hole = [r.content() for r in src if (150 if lost else 100) <= r.offset < 200]
    assert [r.content() for r in dst[200:]] == hole
    rc, out, _ = cli(cfg, "verify", "--flow", "A->B")
    assert rc == 0, out


def test_partitions_and_topics_born_after_a_latest_start_are_copied_from_their_beginning(
    tmp_path, source, target, unique
):
    pfx = unique("latestnew")
    topic, later = f"{pfx}.orders", f"{pfx}.payments"
    remote = f"L.{topic}"
    create_topic(source, topic, 1)
    create_topic(target, remote, 1)
    produce(source, topic, kib_records(5, seed="old"))
    # a source alias of its own: the flow's state is its own (its first run is its first run)
    cfg, flow = backfill_flow(tmp_path, source, target, pfx, alias="L", **{"unit.max.records": 1_000})
    assert flow.props["initial.position"] == "latest"
    assert run_once(cfg, flow, mode="direct").records == 0  # anchored at the end: latest
    # a partition added on the source, written to before any run planned it (and before its remote
    # partition exists), then a whole new topic, written before the sync creates its remote copy
    add_partitions(source, topic, 2)
    wait_for_topic(source, topic, 2)
    produce(source, topic, [{**r, "partition": 1} for r in kib_records(100, seed="p1")])
    create_topic(source, later, 1)
    produce(source, later, kib_records(30, seed="new"))
    rep = run_once(cfg, flow, mode="direct")
    waiting = {(p.topic, p.partition) for p in rep.partitions if p.status == "waiting"}
    assert rep.records == 0 and waiting == {(topic, 1), (later, 0)}, rep.render()
    rc, out, _ = cli(cfg, "sync", "--flow", "L->B")
    assert rc == 0, out
    produce(source, topic, [{**r, "partition": 1} for r in kib_records(5, seed="after")])
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 135 and rep.lag == 0, rep.render()
    p1 = [r for r in consume_all(target, remote) if r.partition == 1]
    assert [r.content() for r in p1] == [r.content() for r in consume_all(source, topic) if r.partition == 1]
    assert len(p1) == 105
    assert [r.content() for r in consume_all(target, f"L.{later}")] == [
        r.content() for r in consume_all(source, later)
    ]
    # the partition that existed at the first run still started at its end
    assert [r for r in consume_all(target, remote) if r.partition == 0] == []


class ReadFailsInARound:
    """Faults hook of a copy task reading one partition at a time: as the first round commits, retention
    takes the first 50 records of partition 1 (still planned from 10, so its read, in the third round,
    fails: offset out of range); with `fence`, that third round's commit is then fenced, as a failover fences a
    flow's copies."""

    def __init__(self, cfg, flow, source, topic: str, fence: bool) -> None:
        self.cfg, self.flow, self.source, self.topic, self.fence = cfg, flow, source, topic, fence
        self.deleted, self.commits, self.fenced = False, 0, False

    def reached(self, point: str, n: int = 0) -> None:
        if point == "before_flush" and not self.deleted:
            self.deleted = True
            delete_records(self.source, self.topic, 1, 50)
        elif point == "before_commit":
            self.commits += 1
            if self.fence and self.commits == 3:
                from mirrorflow.clients import FlowClients
                from mirrorflow.state.fencing import fence_copies

                self.fenced = True
                with FlowClients(self.cfg, self.flow) as clients:
                    fence_copies(clients, [(self.topic, 0), (self.topic, 1)])


@pytest.mark.parametrize("fence", [False, True], ids=["round-commits", "round-fenced"])
def test_a_partition_whose_read_fails_is_failed_whatever_its_round_does(
    tmp_path, source, target, unique, monkeypatch, fence
):
    """After a first run copied 10 records of each partition, one task copies the two one after the
    other in rounds of 120 records; partition 1's read fails in the third round (retention took its
    planned start). It is `failed` with the reason, never `ok` with 0 records, whether that round then
    commits partition 0's last 50 or is fenced (it used to be reported `ok` when the round failed); the
    next run names the 40 lost offsets and copies the rest: every record the source holds, once."""
    from mirrorflow.replication.executors import copy_modes

    pfx = unique("readfail")
    topic = f"{pfx}.orders"
    remote = mirror_topic(source, target, topic, 2)
    produce(source, topic, [{**r, "partition": 0} for r in kib_records(300, seed="a")]
            + [{**r, "partition": 1} for r in kib_records(100, seed="b")])
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{
        "tasks.max": 1, "task.partitions.in.flight": 1, "transaction.max.records": 120})
    assert run_once(cfg, flow, mode="direct", options=RunOptions(partition_limit=10)).records == 20
    hook = ReadFailsInARound(cfg, flow, source, topic, fence)
    monkeypatch.setattr(copy_modes, "faults_from_env", lambda: hook)
    rep = run_once(cfg, flow, mode="direct")
    assert hook.deleted and hook.fenced == fence and hook.commits == 3, (hook.commits, rep.render())
    assert not rep.ok, rep.render()
    parts = {p.partition: p for p in rep.partitions}
    assert parts[1].status == "failed" and parts[1].records == 0, rep.render()
    assert any("offset 10 is no longer on the source" in e for e in parts[1].errors), rep.render()
    assert parts[1].lag == 90, rep.render()
    done = 250 if fence else 300  # the fenced round held partition 0's last 50
    assert parts[0].records == done - 10 and parts[0].lag == 300 - done, rep.render()
    assert parts[0].status == ("fenced" if fence else "ok"), rep.render()
    assert len(consume_all(target, remote)) == done + 10  # and partition 1's first 10
    monkeypatch.undo()
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.lost == 40 and rep.records == 50 + 300 - done, rep.render()
    assert rep.lag == 0, rep.render()
    src, dst = consume_all(source, topic), consume_all(target, remote)
    first10 = [r for r in dst if r.partition == 1][:10]  # copied before retention took them
    assert sorted(r.content() for r in dst) == sorted(r.content() for r in first10 + src) and len(dst) == 360
