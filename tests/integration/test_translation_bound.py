"""No consumer group is moved past a record it has not read, however long the flow runs and whatever
the offset map's bound (`offset.map.max.runs`): real copies cross a lowered bound, then checkpoints,
group sync, `translate` and an unplanned failover put every group at its next unread record (idle and
active groups exactly), or earlier with the status saying how much it reads again. Each test fails
its flow over, so each has a source alias (and state) of its own."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.groups.offset_sync import sync_group_offsets
from mirrorflow.observe.status_page import flow_page
from mirrorflow.replication.run.runner import run_once
from tests.integration.test_continuous import Background
from tests.integration.test_replicate import cli
from tests.support import consume_all, create_topic, load_offset_map, produce, write_config

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000) - 600_000


def bound_flow(tmp_path, source, target, pfx: str, **props):
    """A flow of its own (alias, state) over `<pfx>.*` with a low offset-map bound."""
    alias = f"T{uuid.uuid4().hex[:6]}"
    flow_props = {
        "topics": f"{pfx}\\..*",
        "groups": f"{pfx}-.*",
        "state.topic.partitions": 1,
        "transaction.max.records": 5,
        "offset.map.max.runs": 4,
        "sync.group.offsets.enabled": True,
        "heartbeats.replication.enabled": False,
        "lease.timeout.seconds": 2,
        **props,
    }
    cfg = write_config(tmp_path / f"{alias}.yaml", {alias: source, "B": target}, {f"{alias}->B": flow_props})
    return cfg, cfg.flow(f"{alias}->B"), alias


def batch(tag: str, n: int, partitions: int = 1, start: int = 0) -> list[dict]:
    return [
        {"partition": i % partitions, "key": f"k{i}".encode(), "value": f"{tag}-{i}".encode(), "timestamp": NOW + i}
        for i in range(start, start + n)
    ]


def commit(cluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    c.close()


def committed_on(cluster, group: str, topic: str, partition: int) -> int:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        return c.committed([TopicPartition(topic, partition)], timeout=10)[0].offset
    finally:
        c.close()


class Landing:
    """Where each source record of a partition landed on the target (matched by content)."""

    def __init__(self, source, target, topic: str, remote: str, partition: int) -> None:
        self.src = consume_all(source, topic, [partition])
        where = {r.content(): r.offset for r in consume_all(target, remote, [partition])}
        self.at = {r.offset: where[r.content()] for r in self.src}

    def next_unread(self, g: int) -> int:
        """The target offset of the first record at or after source offset g (records after it on
        the target follow it: this flow copies in source order)."""
        return min(t for s, t in self.at.items() if s >= g)

    def read_again(self, g: int, resume: int) -> int:
        """Records below g (already read) a consumer resuming at `resume` reads again."""
        return sum(1 for s, t in self.at.items() if s < g and t >= resume)


def reader(cluster, group: str, topic: str, partitions: int) -> Consumer:
    """A consumer of `group` reading `topic` from its start (assigned: it commits what it read)."""
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    return c


def drain(consumer, seconds: float) -> None:
    """Read what is there for `seconds` (a consumer keeping up with its partitions)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.consume(1000, 0.1)


def test_an_idle_group_is_never_moved_past_its_first_unread_record(tmp_path, source, target, unique):
    pfx = unique("idle")
    topic = f"{pfx}.orders"
    idle, late = f"{pfx}-idle", f"{pfx}-late"
    cfg, flow, alias = bound_flow(tmp_path, source, target, pfx)
    remote = f"{alias}.{topic}"
    create_topic(source, topic, 1)
    create_topic(target, remote, 1)
    produce(source, topic, batch("a", 20))
    assert run_once(cfg, flow, mode="direct").records == 20
    commit(source, idle, {(topic, 0): 7})  # read 0..6, then went idle: 7 is the first record it has not read
    emit_checkpoints(cfg, flow)
    assert sync_group_offsets(cfg, flow).committed == {idle: 1}
    # hours of operation, compressed: 36 more copy transactions cross the bound of 4 runs twice
    for tag, n in (("b", 100), ("c", 80)):
        produce(source, topic, batch(tag, n))
        assert run_once(cfg, flow, mode="direct").records == n
        run = emit_checkpoints(cfg, flow)
        assert run.offset_map.error is None and run.offset_map.pruned, run.offset_map
        sync_group_offsets(cfg, flow)
    out = json.loads(cli(cfg, "checkpoint", "--flow", flow.name, "--json").stdout)
    landing = Landing(source, target, topic, remote, 0)
    want = landing.next_unread(7)

    # checkpoint, group sync: exactly at record 7, never at the floor's record
    assert committed_on(target, idle, remote, 0) == want
    pm = load_offset_map(cfg, flow, [(topic, 0)])[(topic, 0)]
    assert len(pm.runs) == 4 and pm.floor > 150 and pm.pins == (7,)  # the bound raised the floor far past 7
    (row,) = [r for r in out["checkpoints"]["offsets"] if r["group"] == idle]
    assert (row["target_offset"], row["status"], row["reread"]) == (want, "exact", 0)
    # translate, live and from the checkpoints alone
    (tr,) = json.loads(cli(cfg, "translate", "--flow", flow.name, "--group", idle, "--json").stdout)
    assert (tr["target_offset"], tr["status"], tr["reread"]) == (want, "exact", 0)
    (cp,) = json.loads(
        cli(cfg, "translate", "--flow", flow.name, "--group", idle, "--from-checkpoints", "--json").stdout
    )
    assert cp["target_offset"] == want

    # a group moved by hand to where the map kept no run (it did not exist when the map was pruned):
    # an earlier known position, and the status says how much it reads again
    g = next(o for o in range(8, pm.floor) if pm.translate(o).status == "reread")
    commit(source, late, {(topic, 0): g})
    (tr,) = json.loads(cli(cfg, "translate", "--flow", flow.name, "--group", late, "--json").stdout)
    assert tr["status"] == "reread" and tr["target_offset"] < landing.next_unread(g)
    assert 0 < landing.read_again(g, tr["target_offset"]) <= tr["reread"]
    text = cli(cfg, "translate", "--flow", flow.name, "--group", late).stdout
    assert "reread: the offset map no longer knows" in text
    cli(cfg, "checkpoint", "--flow", flow.name, "--no-sync")
    (cp,) = json.loads(cli(cfg, "translate", "--flow", flow.name, "--group", late, "--from-checkpoints",
                           "--json").stdout)  # from the target alone, as when the source is lost
    assert (cp["target_offset"], cp["reread"]) == (tr["target_offset"], tr["reread"])
    note = f"(earlier: re-reads at most {tr['reread']:,} record(s) it had read, skips none)"
    # the status page, the drill and the failover's plan (what Required Actions shows) say so
    page = flow_page(cfg, flow)
    rows = {r.group: r for r in page.groups}
    assert (rows[idle].resume_at, rows[idle].resume) == (want, "")
    assert (rows[late].resume_at, rows[late].resume) == (tr["target_offset"], note.strip("()"))
    drilled = cli(cfg, "drill", "--flow", flow.name).stdout
    assert f"{late} would resume {remote}[0] at {tr['target_offset']} {note}" in drilled
    assert f"{idle} would resume {remote}[0] at {want}\n" in drilled
    dry = cli(cfg, "failover", "--flow", flow.name, "--dry-run").stdout
    assert f"{late} resumes {remote}[0] at {tr['target_offset']} {note}" in dry

    # an unplanned failover commits both: idle exactly, late at its earlier position, and says so
    rep = json.loads(cli(cfg, "failover", "--flow", flow.name, "--yes", "--json").stdout)
    assert rep["done"] is True, rep
    parts = {g["group"]: g["partitions"][0] for g in rep["groups"]["groups"]}
    assert (parts[idle]["checkpoint_offset"], parts[idle]["reread"]) == (want, 0)
    assert (parts[late]["checkpoint_offset"], parts[late]["action"]) == (tr["target_offset"], "write")
    assert parts[late]["reread"] == tr["reread"]
    assert committed_on(target, idle, remote, 0) == want
    assert committed_on(target, late, remote, 0) == tr["target_offset"]
    text = cli(cfg, "failover", "--flow", flow.name, "--dry-run").stdout  # already failed over: says so
    assert "was already failed over" in text


def test_a_long_continuous_run_crosses_the_bound_and_every_group_resumes_at_its_next_record(
    tmp_path, source, target, unique
):
    """Continuous mode compressed: micro-batches every 50 ms, a bound of 6 runs crossed again and again,
    checkpoint passes and group syncs in between, idle groups, an active one and a slow one far behind
    the copy, then an unplanned failover: every group resumes at or before its first unread record,
    the idle and active ones exactly, the slow one earlier by at most what its plan says."""
    pfx = unique("long")
    topic = f"{pfx}.events"
    cfg, flow, alias = bound_flow(
        tmp_path,
        source,
        target,
        pfx,
        **{
            "offset.map.max.runs": 6,
            "transaction.max.records": 50,
            "tasks.max": 2,
            "continuous.poll.ms": 50,
            "continuous.state.check.seconds": 1,
            "lease.timeout.seconds": 10,
        },
    )
    remote = f"{alias}.{topic}"
    create_topic(source, topic, 2)
    create_topic(target, remote, 2)
    produce(source, topic, batch("seed", 20, 2))
    run = Background(cfg, flow, mode="direct", seconds=24)

    stop = threading.Event()
    produced = [20]

    def producing() -> None:
        while not stop.is_set():
            produce(source, topic, batch("live", 6, 2, start=produced[0]))
            produced[0] += 6
            time.sleep(0.15)

    active = reader(source, f"{pfx}-active", topic, 2)  # keeps up with the producer
    slow = reader(source, f"{pfx}-slow", topic, 2)  # far behind the copy, further every second
    writer = threading.Thread(target=producing, daemon=True)
    writer.start()
    passes = []
    try:
        commit(source, f"{pfx}-idle-early", {(topic, 0): 5, (topic, 1): 3})
        deadline = time.monotonic() + 15
        n = 0
        while time.monotonic() < deadline:
            drain(active, 1.0)
            active.commit(asynchronous=False)
            slow.consume(8, 0.2)
            slow.commit(asynchronous=False)
            n += 1
            if n == 3:  # an idle group that stops in the middle of the run
                pos = {tp.partition: tp.offset for tp in active.position([TopicPartition(topic, p) for p in (0, 1)])}
                commit(source, f"{pfx}-idle-mid", {(topic, p): o for p, o in pos.items() if o >= 0})
            passes.append(emit_checkpoints(cfg, flow).offset_map)
            sync_group_offsets(cfg, flow)
    finally:
        stop.set()
        writer.join(30)
    rep = run.join(240)
    assert rep.ok, rep.render()
    assert run_once(cfg, flow, mode="direct").ok  # what came after its deadline (a slow machine), if anything
    drain(active, 3.0)  # the active group reads to the end and commits: exactly at the end
    active.commit(asynchronous=False)
    active.close()
    slow.consume(200, 2.0)  # the slow group moves on once more after the last fold pinned where it was
    slow.commit(asynchronous=False)
    slow.close()
    last = emit_checkpoints(cfg, flow)
    assert not last.errors, last.errors
    sync_group_offsets(cfg, flow)

    # the bound was crossed again and again while the run copied
    assert sum(1 for f in passes if f.pruned) >= 3, [f.line() for f in passes]

    fo = json.loads(cli(cfg, "failover", "--flow", flow.name, "--yes", "--json").stdout)
    assert fo["done"] is True, fo
    planned = {(g["group"], x["partition"]): x for g in fo["groups"]["groups"] for x in g["partitions"]}
    groups = [f"{pfx}-idle-early", f"{pfx}-idle-mid", f"{pfx}-active", f"{pfx}-slow"]
    for p in (0, 1):
        landing = Landing(source, target, topic, remote, p)
        for group in groups:
            g = committed_on(source, group, topic, p)
            if g < 0:
                continue
            want = landing.next_unread(g) if g <= max(landing.at) else max(landing.at.values()) + 1
            got = committed_on(target, group, remote, p)
            if group.endswith("slow"):  # never past its first unread record; what it re-reads, said
                assert got <= want, (group, p, g, got, want, fo["groups"])
                cp = last.store.for_group(group)[(remote, p)]
                assert cp.downstream_offset == got and planned[(group, p)]["checkpoint_offset"] == got
                assert landing.read_again(cp.upstream_offset, got) <= planned[(group, p)]["reread"]
            else:
                assert got == want, (group, p, g, got, want, fo["groups"])
    for r, action in last.rows:  # a translation that is not exact says what it re-reads, as the plan does
        if r.status == "reread" and action in ("new", "advanced"):
            assert r.reread > 0 and planned[(r.group, r.partition)]["reread"] == r.reread, r
    maps = load_offset_map(cfg, flow, [(topic, 0), (topic, 1)])
    for pm in maps.values():  # bounded: the runs of the last passes, and below the floor landmarks
        assert pm.floor > 0 and len(pm.runs) <= 6 + 6 and (pm.marks or pm.spans)
