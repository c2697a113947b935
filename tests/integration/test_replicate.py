"""Replication end to end on real brokers: spark-submit copy, exactly-once, crashes, gaps, errors."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
from confluent_kafka import Producer

from mirrorflow.clients import FlowClients
from mirrorflow.replication.task.faults import NO_FAULTS
from mirrorflow.replication.plan.run_plan import Unit
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.state_topics import ensure_state_topics
from tests.integration.replicate_helpers import (add_partitions, assert_copied, assert_map_exact, copy_unit,
                                                 delete_records, make_flow, mirror_topic, unit_slot)
from tests.support import consume_all, create_topic, end_transaction, load_offset_map, produce, read_progress

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000) - 3_600_000
BIG = {"max.message.bytes": "3000000"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = [sys.executable, "-m", "mirrorflow.cli"] if False else [os.path.join(os.path.dirname(sys.executable), "mirrorflow")]


def records(n: int, partitions: int, seed: str = "", big_every: int = 0) -> list[dict]:
    out = []
    for i in range(n):
        value = None if i % 11 == 5 else f"{seed}value-{i}".encode() * (1 + i % 3)
        if big_every and i % big_every == 0:
            value = bytes([i % 251]) * (1024 * 1024)
        out.append({"partition": i % partitions, "key": None if i % 13 == 7 else f"key-{i % 17}".encode(),
                    "value": value,
                    "headers": [("trace", f"t{i}".encode()), ("empty", None), ("dup", b"1"), ("dup", b"2")]
                    if i % 4 else None,
                    "timestamp": NOW + i * 10})
    return out


def cli(cfg, *args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*CLI, "--config", str(cfg.path), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def cli_after_crash(cfg, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`cli`, once the lease of a run killed just before has lapsed (exit 75: still held)."""
    for _ in range(20):
        proc = cli(cfg, *args, env=env, check=False)
        if proc.returncode != 75:
            return proc
        time.sleep(0.5)
    return proc


def test_spark_submit_copies_everything_exactly_and_second_run_copies_nothing(tmp_path, source, target, unique):
    pfx = unique("full")
    t1, t2 = f"{pfx}.orders", f"{pfx}.blobs"
    mirror_topic(source, target, t1, 3)
    mirror_topic(source, target, t2, 2, config=BIG, target_config=BIG)
    produce(source, t1, records(900, 3))
    produce(source, t2, records(12, 2, big_every=3))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"transaction.max.records": 200, "tasks.max": 3})
    rep = run_once(cfg, flow, mode="submit")
    assert rep.ok, rep.render()
    assert rep.records == 912
    assert rep.lag == 0
    src, dst = assert_copied(source, target, t1)
    assert any(r.value is None for r in dst) and any(r.headers for r in dst)
    assert_copied(source, target, t2)
    assert_map_exact(cfg, flow, source, target, t1, 3)
    assert_map_exact(cfg, flow, source, target, t2, 2)
    # progress on the target, one record per source partition
    prog = read_progress(cfg, flow, [(t1, p) for p in range(3)])
    assert {k: v.next for k, v in prog.items()} == {(t1, p): 300 for p in range(3)}
    # a second run (the CLI, --json) has nothing to copy
    out = json.loads(cli(cfg, "replicate", "--flow", "A->B", "--once", "--json").stdout)
    assert out["records"] == 0 and out["units"] == 0 and out["ok"]
    # new records are copied by the next run (the same job in an in-process SparkSession)
    produce(source, t1, records(30, 3, seed="more"))
    rep = run_once(cfg, flow, mode="inprocess")
    assert rep.records == 30, rep.render()
    assert_copied(source, target, t1)


def spark_job_of(run: psutil.Process) -> psutil.Process | None:
    """The run's spark-submit (the bash script, then the JVM it execs into), once started."""
    for child in run.children(recursive=True):
        try:
            if "mirrorflow-copy" in child.cmdline():  # --name mirrorflow-copy
                return child
        except psutil.Error:
            continue
    return None


def test_a_killed_run_takes_its_spark_job_with_it(tmp_path, source, target, unique):
    """`kill -9` of the CLI (an Airflow worker's OOM kill) while its spark-submit starts: the job,
    in a session of its own, gets SIGTERM from the kernel (PR_SET_PDEATHSIG) instead of copying on
    as an orphan that renews the flow's lease. Killed while its JVM boots, it copies nothing; the
    next run gets the lease and copies every record once."""
    pfx = unique("orphan")
    t = f"{pfx}.events"
    mirror_topic(source, target, t, 2)
    produce(source, t, records(200, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    proc = subprocess.Popen([*CLI, "--config", str(cfg.path), "replicate", "--flow", "A->B", "--once",
                             "--mode", "submit"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    run, deadline = psutil.Process(proc.pid), time.monotonic() + 180
    while (job := spark_job_of(run)) is None:
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "the run never started spark-submit"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI's group; the job is not in it
    assert proc.wait(30) == -signal.SIGKILL
    _, alive = psutil.wait_procs([job], timeout=60)
    assert not alive, f"spark-submit {job.pid} outlived the run that started it"
    assert consume_all(target, f"A.{t}") == []
    again = cli_after_crash(cfg, "replicate", "--flow", "A->B", "--once", "--mode", "direct")
    assert again.returncode == 0, again.stderr[-3000:]
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 2)


CRASH_POINTS = ["after_init", "before_flush:150", "after_flush:100", "before_commit:100", "after_commit:1",
                "before_flush:1"]


def test_crashes_at_many_points_then_rerun_copies_each_record_once(tmp_path, source, target, unique):
    pfx = unique("crash")
    t = f"{pfx}.events"
    mirror_topic(source, target, t, 2)
    produce(source, t, records(3000, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"transaction.max.records": 250})
    for point in CRASH_POINTS:
        proc = cli_after_crash(cfg, "replicate", "--flow", "A->B", "--once", "--mode", "direct",
                               env={"MIRRORFLOW_TEST_CRASH": point})
        assert proc.returncode == -9, (point, proc.returncode, proc.stderr[-2000:])
        # what is visible after each crash is a prefix, never a duplicate
        dst = consume_all(target, f"A.{t}")
        src = consume_all(source, t)
        for p in range(2):
            d = [r.content() for r in dst if r.partition == p]
            assert d == [r.content() for r in src if r.partition == p][:len(d)], point
    # a Spark task killed mid-transaction: spark-submit fails, nothing half-written is visible
    proc = cli_after_crash(cfg, "replicate", "--flow", "A->B", "--once", env={"MIRRORFLOW_TEST_CRASH": "before_commit:10"})
    assert proc.returncode != 0 and "the Spark copy job failed" in proc.stderr, proc.stderr[-3000:]
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok, rep.render()
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 2)


def test_transactional_source_with_aborts_copies_only_committed(tmp_path, source, target, unique):
    pfx = unique("txn")
    t = f"{pfx}.payments"
    mirror_topic(source, target, t, 1)
    p = Producer({**source.client_config(), "transactional.id": f"src-{pfx}"})
    p.init_transactions(30)
    n = 0
    for i in range(12):
        p.begin_transaction()
        for _ in range(5 + i):
            p.produce(t, f"v{n}".encode(), f"k{n}".encode(), 0, timestamp=NOW + n)
            n += 1
        end_transaction(p, commit=i % 3 != 1)
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"transaction.max.records": 7})
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok, rep.render()
    src, dst = assert_copied(source, target, t)
    assert len(src) < n
    maps = assert_map_exact(cfg, flow, source, target, t, 1)
    assert maps[(t, 0)].covered == [(0, maps[(t, 0)].end)]
    # a trailing aborted transaction, then nothing: the run covers it without copying
    p.begin_transaction()
    p.produce(t, b"aborted", b"k", 0)
    end_transaction(p, commit=False)
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 0 and rep.lag == 0, rep.render()


def test_compacted_source_with_holes_maps_exactly(tmp_path, source, target, unique):
    pfx = unique("cmp")
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
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok, rep.render()
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 1)


def test_byte_bounded_transactions_copy_every_record(tmp_path, source, target, unique):
    # transaction.max.bytes ends batches in the middle of what one poll returned: nothing is skipped
    pfx = unique("bytes")
    t = f"{pfx}.lines"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(500, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"transaction.max.bytes": 2000})
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 500, rep.render()
    assert sum(p.transactions for p in rep.partitions) > 5, rep.render()
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 1)


def test_retention_truncation_is_reported_and_survived(tmp_path, source, target, unique):
    pfx = unique("ret")
    t = f"{pfx}.logs"
    mirror_topic(source, target, t, 2)
    produce(source, t, records(100, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 100
    produce(source, t, records(100, 2, seed="later"))
    delete_records(source, t, 0, 80)  # progress is 50: offsets 50..79 are gone before they were copied
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok, rep.render()
    assert "partition %s[0]: 30 offsets lost to source retention before they were copied" % t in rep.render()
    assert rep.records == 20 + 50
    prog = read_progress(cfg, flow, [(t, 0)])[(t, 0)]
    assert prog.lost == 30 and prog.next == 100 and prog.gaps == ((50, 80),)
    pm = load_offset_map(cfg, flow, [(t, 0)])[(t, 0)]
    tr = pm.translate(60)
    assert tr.status == "gap" and tr.missing == 20
    dst = consume_all(target, f"A.{t}", [0])
    assert len(dst) == 50 + 20


def test_new_source_partition_is_copied_after_sync(tmp_path, source, target, unique):
    pfx = unique("grow")
    t = f"{pfx}.clicks"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(20, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 20
    add_partitions(source, t, 3)
    produce(source, t, records(30, 3, seed="grown"))
    rep = run_once(cfg, flow, mode="direct")  # before sync: the target lacks the new partitions
    # a normal event, not a failure: partition 0 is copied, the new ones wait for the sync
    assert rep.ok and rep.records == 10, rep.render()
    assert [p.status for p in rep.partitions if p.topic == t] == ["ok", "waiting", "waiting"]
    assert f"waiting for sync: target topic 'A.{t}' has 1 partitions" in rep.render()
    from mirrorflow.metadata.sync import sync_flow

    assert sync_flow(cfg, flow, "topics").ok
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok, rep.render()
    assert_copied(source, target, t)


def test_a_producer_kept_from_an_earlier_run_writes_to_partitions_added_since(tmp_path, source, target, unique):
    """A copy task's producer is kept for its slot's next run in the process (a Spark Connect server's
    workers, direct mode). Partitions added on the source are in the flow's task layout at once (they
    wait for the sync), so the slot and its producer stay the same when the sync adds them on the
    target; the producer knew the target topic's partitions as they were, and librdkafka refuses one
    added since ("Local: Unknown partition") until its metadata refresh, minutes later: the first run
    after the sync failed them. Found by the two-hour model search (seed 109407102, its teardown's drain)."""
    pfx = unique("kept")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(20, 1))
    # one slot and one lane: the same producer settings in every run (they follow the partitions read at once)
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 1, "task.partitions.in.flight": 1})
    assert run_once(cfg, flow, mode="direct").records == 20
    add_partitions(source, t, 3)
    produce(source, t, records(30, 3, seed="grown"))
    rep = run_once(cfg, flow, mode="direct")  # the new partitions wait for the sync
    assert [p.status for p in rep.partitions] == ["ok", "waiting", "waiting"], rep.render()
    add_partitions(target, f"A.{t}", 3)  # what the sync does
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 20, rep.render()
    assert [(p.partition, p.records, p.status) for p in rep.partitions] == [(0, 0, "idle"), (1, 10, "ok"),
                                                                             (2, 10, "ok")], rep.render()
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 3)


class _PauseAt:
    """Faults seam: the copy stops before its `commits`-th commit until told to go on (another attempt
    of the same unit runs meanwhile, as a retried or speculative Spark task would)."""

    def __init__(self, commits: int) -> None:
        self.commits, self.seen = commits, 0
        self.paused, self.go = threading.Event(), threading.Event()

    def reached(self, point: str, n: int = 0) -> None:
        if point == "before_commit":
            self.seen += 1
            if self.seen == self.commits:
                self.paused.set()
                assert self.go.wait(120), "never told to go on"


def test_fencing_two_copies_of_the_same_unit(tmp_path, source, target, unique):
    """The first attempt has committed 3 transactions and holds a 4th open when a second attempt of
    the same unit starts: the second fences it, copies the rest from its progress, and the first one's
    commit then fails as fenced. Ordered by a seam, not by timing."""
    pfx = unique("fence")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(4000, 1))
    # the first attempt's open transaction waits while the second copies 3,850 records: under the helpers'
    # 15 s transaction timeout the broker aborted it first in a loaded full run (the second took 43 s), and the
    # first attempt, told so, retried rightly and found its unit done ("ok" where this test expects "fenced")
    cfg, flow = make_flow(tmp_path, source, target, pfx,
                          **{"transaction.max.records": 50, "producer.transaction.timeout.ms": 180_000})
    with FlowClients(cfg, flow) as clients:
        ensure_state_topics(clients)
    unit = Unit(t, 0, f"A.{t}", 0, 4000)
    layout, slot = unit_slot(cfg, flow, unit)
    from concurrent.futures import ThreadPoolExecutor

    def attempt(faults=NO_FAULTS):
        with FlowClients(cfg, flow) as clients:
            return copy_unit(clients, unit, faults, (layout, slot))

    pause = _PauseAt(commits=4)
    with ThreadPoolExecutor(1) as pool:
        f1 = pool.submit(attempt, pause)
        assert pause.paused.wait(120), f1.result() if f1.done() else "the first attempt never reached its 4th commit"
        try:
            r2 = attempt()
        finally:
            pause.go.set()
        r1 = f1.result()
    assert (r1.status, r2.status) == ("fenced", "ok"), (r1.status, r1.error, r2.status, r2.error)
    assert r1.error == (f"{t}[0]: fenced by another attempt (transactional.id {layout.transactional_id(flow, slot)}); "
                        "it owns this partition now"), r1.error
    assert r1.error_type == "FencedError"
    # the fenced attempt's committed transactions count, the other continued right after them
    assert (r1.records, r2.records) == (150, 3850)
    assert_copied(source, target, t)


class _FenceAt:
    """Faults seam: when the copy reaches `point`, a rival producer with the unit's transactional.id
    initialises, fencing the copy mid-step (as a retried or speculative Spark task would)."""

    def __init__(self, point: str, conf: dict, tid: str) -> None:
        self.point, self.conf, self.tid, self.done = point, conf, tid, False

    def reached(self, point: str, n: int = 0) -> None:
        if point == self.point and not self.done:
            self.done = True
            Producer({**self.conf, "transactional.id": self.tid}).init_transactions(30)


@pytest.mark.parametrize("point", ["after_init", "before_flush", "before_commit"])
def test_a_copy_fenced_at_any_step_reports_fenced_and_commits_nothing(tmp_path, source, target, unique, point):
    """Wherever the fencing lands (produce() then says only "Fatal error", flush or commit name it),
    the fenced copy ends `fenced`, not `failed`, with nothing committed; the next copy copies all."""
    pfx = unique("fenceat")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(3000, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"transaction.max.records": 3000})
    with FlowClients(cfg, flow) as clients:
        ensure_state_topics(clients)
    unit = Unit(t, 0, f"A.{t}", 0, 3000)
    layout, slot = unit_slot(cfg, flow, unit)
    rival = _FenceAt(point, {"bootstrap.servers": target.bootstrap_servers}, layout.transactional_id(flow, slot))
    with FlowClients(cfg, flow) as clients:
        r = copy_unit(clients, unit, rival, (layout, slot))
    assert rival.done
    assert (r.status, r.error_type, r.records) == ("fenced", "FencedError", 0), (r.status, r.error)
    with FlowClients(cfg, flow) as clients:
        again = copy_unit(clients, unit, at=(layout, slot))
    assert (again.status, again.records) == ("ok", 3000), (again.status, again.error)
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t)


def test_a_first_run_anchors_more_fresh_partitions_than_the_producers_queue_holds(tmp_path, source, target, unique):
    """Anchors ride in a task's round: one task anchoring 60 fresh empty partitions and copying 3 records
    writes 120 state records in one transaction; with a producer queue of 10 messages the state writes
    wait for deliveries instead of failing the round (BufferError)."""
    pfx = unique("anchorq")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 60)
    produce(source, t, [{"partition": 7, "key": b"k", "value": f"v-{i}".encode()} for i in range(3)])
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 1,
                                                          "producer.queue.buffering.max.messages": 10})
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 3, rep.render()
    progress = read_progress(cfg, flow)
    assert progress[(t, 7)].next == 3
    assert sorted(p for (topic, p), pr in progress.items() if topic == t and pr.next == 0) == \
        [p for p in range(60) if p != 7]
    assert_copied(source, target, t)


def test_fresh_partitions_are_anchored_in_the_tasks_transactions_and_an_old_anchor_never_overrides_a_copy(
        tmp_path, source, target, unique):
    """A first run anchors the partitions with nothing to copy in its tasks' round transactions (no
    unit of their own, no transactional.id of theirs: fenced with the task's records); their next
    records are copied from the anchor. An anchor record of an earlier release (its own key, written
    unfenced) landing after a copy's progress changes nothing: the copy's progress wins, nothing is
    copied twice, the map stays exact."""
    from mirrorflow.state.names import progress_topic
    from mirrorflow.state.records import Progress
    from mirrorflow.state.state_topics import anchor_key, state_partition

    pfx = unique("anchor")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 4)
    produce(source, t, [{"partition": 0, "key": b"k", "value": f"first-{i}".encode()} for i in range(5)])
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 2})
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 5, rep.render()
    by_p = {p.partition: p for p in rep.partitions}
    assert by_p[0].transactions >= 1 and [by_p[p].transactions for p in (1, 2, 3)] == [1, 1, 1], rep.render()
    assert [by_p[p].records for p in (1, 2, 3)] == [0, 0, 0], rep.render()
    progress = read_progress(cfg, flow)
    assert progress[(t, 0)].next == 5
    assert [(progress[(t, p)].next, progress[(t, p)].tgt_end) for p in (1, 2, 3)] == [(0, 0)] * 3
    # a late anchor of partition 0 as an earlier release wrote it (a zombie's plan) after its copy's progress
    with FlowClients(cfg, flow) as clients:
        nprog = clients.partitions("target", progress_topic(flow))
    late = Progress.empty(t, 0).advanced(0, 0, 0, 0, -1)
    produce(target, progress_topic(flow), [{"partition": state_partition(t, 0, nprog), "key": anchor_key(t, 0),
                                            "value": late.to_json()}])
    assert read_progress(cfg, flow, [(t, 0)])[(t, 0)].next == 5
    produce(source, t, [{"partition": p, "key": b"k", "value": f"next-{p}-{i}".encode()} for p in range(4)
                        for i in range(3)])
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 12, rep.render()
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 4)
    progress = read_progress(cfg, flow)
    assert [progress[(t, p)].next for p in range(4)] == [8, 3, 3, 3]


def test_oversized_record_and_missing_topic_fail_clearly(tmp_path, source, target, unique):
    pfx = unique("err")
    t, missing = f"{pfx}.big", f"{pfx}.nowhere"
    mirror_topic(source, target, t, 1, config=BIG, target_config={"max.message.bytes": "200000"})
    create_topic(source, missing, 1)
    produce(source, missing, records(3, 1))
    produce(source, t, [{"partition": 0, "key": b"a", "value": b"small", "timestamp": NOW},
                        {"partition": 0, "key": b"b", "value": b"x" * 600_000, "timestamp": NOW + 1},
                        {"partition": 0, "key": b"c", "value": b"after", "timestamp": NOW + 2}])
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    rep = run_once(cfg, flow, mode="direct")
    text = rep.render()
    assert not rep.ok and rep.failed_units == 1
    assert f"record {t}[0] offset 1 (600001 bytes) is larger than target topic 'A.{t}'" in text, text
    # a topic the sync has not created yet is a normal event: the partition waits, with a note
    assert (f"partition {missing}[0]: waiting for sync: target topic 'A.{missing}' does not exist yet "
            "(the sync DAG or `mirrorflow sync --flow A->B` creates it)") in text, text
    assert [p.status for p in rep.partitions if p.topic == missing] == ["waiting"]
    prog = read_progress(cfg, flow, [(t, 0)]).get((t, 0))
    assert prog is None or prog.next <= 1
    assert consume_all(target, f"A.{t}") == [] or [r.value for r in consume_all(target, f"A.{t}")] == [b"small"]


def test_records_timed_out_behind_a_refused_one_fail_the_partition_clearly_not_as_an_outage(
        tmp_path, source, target, unique):
    # after the target refuses a record as too large, the partition's records behind it wait until
    # they time out (message.timeout.ms follows transaction.timeout.ms: 3 s here); their "Message timed
    # out" is the refusal's consequence, never a broker outage to ride out for broker.outage.max.seconds
    pfx = unique("refused")
    t = f"{pfx}.big"
    mirror_topic(source, target, t, 1, config=BIG, target_config={"max.message.bytes": "200000"})
    produce(source, t, [{"partition": 0, "key": b"a", "value": b"small", "timestamp": NOW},
                        {"partition": 0, "key": b"b", "value": b"x" * 600_000, "timestamp": NOW + 1},
                        {"partition": 0, "key": b"c", "value": b"after", "timestamp": NOW + 2}])
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"producer.transaction.timeout.ms": 3000,
                                                            "broker.outage.max.seconds": 20})
    rep = run_once(cfg, flow, mode="direct")
    text = rep.render()
    assert not rep.ok and rep.failed_units == 1
    assert f"record {t}[0] offset 1 (600001 bytes) is larger than target topic 'A.{t}'" in text, text
    assert "unavailable" not in text and "broker.outage.max.seconds" not in text, text
    prog = read_progress(cfg, flow, [(t, 0)]).get((t, 0))
    assert prog is None or prog.next <= 1
    assert [r.value for r in consume_all(target, f"A.{t}")] in ([], [b"small"])


def test_at_least_once_mode_copies_everything_with_an_exact_map(tmp_path, source, target, unique):
    pfx = unique("alo")
    t = f"{pfx}.metrics"
    mirror_topic(source, target, t, 2)
    produce(source, t, records(600, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"exactly.once": False, "transaction.max.records": 100})
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 600 and not rep.exactly_once, rep.render()
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 2)
    assert run_once(cfg, flow, mode="direct").records == 0


def test_initial_position_latest_then_only_new_records(tmp_path, source, target, unique):
    pfx = unique("late")
    t = f"{pfx}.feed"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(40, 1))
    # state of its own: initial.position applies at a flow's first run only
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"initial.position": "latest", "state.namespace": pfx})
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 0, rep.render()
    produce(source, t, records(7, 1, seed="new"))
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 7, rep.render()
    dst = consume_all(target, f"A.{t}")
    assert [r.value for r in dst] == [r.value for r in consume_all(source, t)][40:]
    tr = load_offset_map(cfg, flow, [(t, 0)])[(t, 0)].translate(10)
    assert tr.status == "before" and tr.missing == 30 and tr.target_offset == dst[0].offset


def test_sasl_source_secrets_reach_executors_from_env_not_the_plan(tmp_path, sasl_cluster, target, unique):
    from tests.support import write_config

    pfx = unique("sasl")
    t = f"{pfx}.secure"
    create_topic(sasl_cluster, t, 2)
    create_topic(target, f"S.{t}", 2)
    produce(sasl_cluster, t, records(50, 2))
    cfg = write_config(tmp_path / "sasl.yaml", {"S": sasl_cluster, "B": target},
                       {"S->B": {"topics": f"{pfx}.*", "state.topic.partitions": 2}})
    flow = cfg.flow("S->B")
    assert "${env:" in cfg.path.read_text()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rep = run_once(cfg, flow, mode="submit", directory=run_dir)
    assert rep.ok and rep.records == 50, rep.render()
    password = sasl_cluster.client_config()["sasl.password"]
    for f in run_dir.iterdir():
        assert password not in f.read_text(), f
    src = consume_all(sasl_cluster, t)
    assert [r.content() for r in consume_all(target, f"S.{t}")] == [r.content() for r in src]
