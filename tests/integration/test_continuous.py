"""Continuous runs (`replicate --continuous`): records produced while the run copies arrive exactly
once with their offsets, headers and timestamps; the run ends at its deadline, on a flow pause and
on SIGTERM with every transaction closed (committed or aborted, never open), and the next run goes
on without duplicates. Each test has its own source alias, so its flow (and its state) is its own."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.replication.run.runner import run_continuous, run_once
from mirrorflow.state.flow_state import set_flow_state
from mirrorflow.state.names import offset_map_topic, progress_topic
from tests.support import admin, consume_all, create_topic, end_transaction, load_offset_map, produce, write_config

NOW = int(time.time() * 1000) - 600_000
CLI = [os.path.join(os.path.dirname(sys.executable), "mirrorflow")]


def continuous_flow(tmp_path, source, target, alias: str, prefix: str, **props):
    """A config whose only flow is `<alias>->B` (topics `<prefix>.*`); its state is its own."""
    flow_props = {"topics": f"{prefix}\\..*", "tasks.max": 2, "state.topic.partitions": 2,
                  "heartbeats.replication.enabled": False, "lease.timeout.seconds": 10,
                  "continuous.state.check.seconds": 1, "continuous.poll.ms": 100, **props}
    cfg = write_config(tmp_path / f"mf-{uuid.uuid4().hex[:6]}.yaml", {alias: source, "B": target},
                       {f"{alias}->B": flow_props})
    return cfg, cfg.flow(f"{alias}->B")


def records(n: int, partitions: int, start: int = 0) -> list[dict]:
    return [{"partition": i % partitions, "key": f"key-{i % 7}".encode() if i % 5 else None,
             "value": f"value-{i}".encode() * (1 + i % 3),
             "headers": [("trace", f"t{i}".encode()), ("dup", b"1"), ("dup", b"2")] if i % 3 else None,
             "timestamp": NOW + i} for i in range(start, start + n)]


def produce_with_aborted(source, topic: str, start: int) -> None:
    """3 records in an aborted transaction, then 3 committed ones (gaps in the source offsets)."""
    p = Producer({**source.client_config(), "transactional.id": f"test-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    for commit in (False, True):
        p.begin_transaction()
        for r in records(3, 1, start + (3 if commit else 0)):
            p.produce(topic, r["value"], r["key"], partition=0, timestamp=r["timestamp"])
        end_transaction(p, commit)


def wait_for(target, topic: str, n: int, timeout: float = 180) -> None:
    """Until the target's read_committed readers see `n` records of `topic` (fails after timeout)."""
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:
        seen = len(consume_all(target, topic))
        if seen >= n:
            return
        time.sleep(0.5)
    raise AssertionError(f"{topic}: {seen} of {n} records on the target after {timeout} s")


def assert_exact(cfg, flow, source, target, topic: str, remote: str, partitions: int) -> int:
    """Every committed source record is on the target once, in order, byte-identical (key, value,
    headers, timestamp), and the offset map sends its source offset to its target offset."""
    src, dst = consume_all(source, topic), consume_all(target, remote)
    assert [r.content() for r in dst] == [r.content() for r in src]
    maps = load_offset_map(cfg, flow, [(topic, p) for p in range(partitions)])
    for rs, rd in zip(src, dst, strict=True):
        assert maps[(topic, rs.partition)].target_of(rs.offset) == rd.offset
    return len(src)


def assert_no_open_transaction(target, flow, remote: str, partitions: int) -> None:
    """No transaction is left open on the run's partitions: last stable offset == high watermark."""
    a = admin(target)
    tps = [TopicPartition(remote, p) for p in range(partitions)]
    tps += [TopicPartition(t, p) for t in (progress_topic(flow), offset_map_topic(flow)) for p in range(2)]

    def ends(level):
        fs = a.list_offsets({tp: OffsetSpec.latest() for tp in tps}, isolation_level=level, request_timeout=30)
        return {(tp.topic, tp.partition): f.result().offset for tp, f in fs.items()}

    assert ends(IsolationLevel.READ_COMMITTED) == ends(IsolationLevel.READ_UNCOMMITTED)


class Background:
    """`run_continuous` in a thread: its report, or the exception it raised."""

    def __init__(self, *args, **kwargs) -> None:
        self.report, self.error = None, None
        self.thread = threading.Thread(target=self._run, args=args, kwargs=kwargs, daemon=True)
        self.thread.start()

    def _run(self, *args, **kwargs) -> None:
        try:
            self.report = run_continuous(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc

    def join(self, timeout: float = 300):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the continuous run did not end"
        if self.error is not None:
            raise self.error
        return self.report


def test_continuous_direct_run_copies_records_produced_while_it_runs_and_ends_at_its_deadline(
        tmp_path, source, target, unique):
    pfx = unique("cont")
    topic, remote = f"{pfx}.orders", f"C.{pfx}.orders"
    create_topic(source, topic, 2)
    create_topic(target, remote, 2)
    produce(source, topic, records(40, 2))  # before the run
    cfg, flow = continuous_flow(tmp_path, source, target, "C", pfx)

    run = Background(cfg, flow, mode="direct", seconds=20)
    wait_for(target, remote, 40)
    produce(source, topic, records(60, 2, start=40))  # while it runs
    wait_for(target, remote, 100)
    produce_with_aborted(source, topic, 100)  # aborted records and markers: gaps in the offsets
    produce(source, topic, records(50, 2, start=106))
    rep = run.join()  # ends by itself at its deadline

    assert rep.ok and rep.skipped is None and rep.stopped_early is None, rep.render()
    assert rep.records == 153
    assert [(p.partition, p.records, p.lag, p.status) for p in rep.partitions] == [(0, 78, 0, "ok"), (1, 75, 0, "ok")]
    assert assert_exact(cfg, flow, source, target, topic, remote, 2) == 153
    assert_no_open_transaction(target, flow, remote, 2)

    # the next run continues where this one ended: what came between the runs, once
    produce(source, topic, records(20, 2, start=200))
    rep = run_continuous(cfg, flow, mode="direct", seconds=3)
    assert rep.records == 20
    assert assert_exact(cfg, flow, source, target, topic, remote, 2) == 173


def planned_in_one_task(tmp_path, source, target, unique, seconds: float):
    """A continuous run of 30 records' flow, planned as the replicate DAG's plan task plans it:
    (config, flow, topic, remote, the plan handed on to the copy task)."""
    from mirrorflow.replication.run.run import ReplicationRun
    from mirrorflow.replication.run.run_kinds import Continuous

    pfx = unique("cont")
    topic, remote = f"{pfx}.orders", f"C.{pfx}.orders"
    create_topic(source, topic, 2)
    create_topic(target, remote, 2)
    produce(source, topic, records(30, 2))
    cfg, flow = continuous_flow(tmp_path, source, target, "C", pfx, **{"lease.timeout.seconds": 120})
    planned = ReplicationRun.local(cfg, flow, "the plan task", kind=Continuous(seconds=seconds))
    with FlowClients(cfg, flow) as clients:
        planned.begin(clients)
        planned.plan_for_handoff(clients)
    return cfg, flow, topic, remote, planned.handoff()


def copied_in_another(cfg, flow, run, scratch):
    """The DAG's copy and report tasks for `run` (rebuilt from what the plan task handed on)."""
    from mirrorflow.replication.run.scratch import Scratch

    with FlowClients(cfg, flow) as clients:
        results, _ = run.copy(clients, "direct", None, Scratch.of(flow, scratch))
        rep = run.report(clients, results)
        run.release_lease(clients)
    return rep


def test_a_continuous_copy_that_starts_late_still_follows_for_its_whole_window(tmp_path, source, target, unique):
    """The replicate DAG plans in one task and copies in another, which may start long after (a busy
    scheduler, a Spark job slow to start: a full CI run saw 45 s). The run follows for its seconds from
    when its copy starts: counted from the plan, the copy woke past its deadline, copied nothing, and
    the report said ok with the whole lag left."""
    from mirrorflow.replication.run.run import ReplicationRun

    cfg, flow, topic, remote, handed = planned_in_one_task(tmp_path, source, target, unique, 10)
    produce(source, topic, records(20, 2, start=30))  # between the plan and the copy
    time.sleep(11)  # the copy task starts after a window counted from the plan would have closed
    started = time.time()
    rep = copied_in_another(cfg, flow, ReplicationRun.from_handoff(cfg, handed), tmp_path / "runs")
    assert time.time() - started >= 10  # it followed for its window, counted from the copy's start
    assert rep.ok and rep.records == 50 and [(p.records, p.lag) for p in rep.partitions] == [(25, 0), (25, 0)], \
        rep.render()
    assert assert_exact(cfg, flow, source, target, topic, remote, 2) == 50
    assert_no_open_transaction(target, flow, remote, 2)


def test_a_continuous_task_that_begins_past_the_runs_deadline_fails_its_partitions_naming_why(
        tmp_path, source, target, unique):
    """On a Spark cluster with fewer task slots than the plan's tasks, a second wave of tasks begins
    once the first ends: for a continuous run, after its deadline. Such a task read nothing and its
    partitions said `ok` with their lag, run after run; they fail now, saying why, and the next run
    copies them (their progress untouched)."""
    from dataclasses import replace

    from mirrorflow.replication.run.run import ReplicationRun

    cfg, flow, topic, remote, handed = planned_in_one_task(tmp_path, source, target, unique, 30)
    run = ReplicationRun.from_handoff(cfg, handed)
    # the job's tasks were handed out 40 s ago; these begin now, 10 s past the run's deadline
    run.plan.follow = replace(run.plan.follow, deadline=time.time() - 10)
    rep = copied_in_another(cfg, flow, run, tmp_path / "runs")
    assert not rep.ok and rep.failed_units == 2 and rep.records == 0, rep.render()
    for p in rep.partitions:
        assert p.status == "failed" and p.lag == 15, rep.render()
        assert p.errors[0].startswith(f"{topic}[{p.partition}]: not read: its copy task began "), p.errors
        assert "after the continuous run's deadline" in p.errors[0] and "tasks.max (2)" in p.errors[0], p.errors
    assert consume_all(target, remote) == []

    rep = run_once(cfg, flow, mode="direct")  # the next run copies them, once
    assert rep.ok and rep.records == 30 and rep.lag == 0, rep.render()
    assert assert_exact(cfg, flow, source, target, topic, remote, 2) == 30


def test_flow_pause_ends_a_continuous_run_with_no_open_transaction(tmp_path, source, target, unique):
    pfx = unique("contp")
    topic, remote = f"{pfx}.orders", f"D.{pfx}.orders"
    create_topic(source, topic, 2)
    create_topic(target, remote, 2)
    cfg, flow = continuous_flow(tmp_path, source, target, "D", pfx)

    run = Background(cfg, flow, mode="direct", seconds=600)
    produce(source, topic, records(80, 2))
    wait_for(target, remote, 80)
    try:
        with FlowClients(cfg, flow) as clients:
            set_flow_state(clients, "paused", "test", "test")
        rep = run.join()  # long before its deadline: the copy tasks read the state every second
        assert rep.ok and rep.records == 80, rep.render()
        # the report says why it ended early (it used to look like a run that followed its whole window)
        assert rep.stopped_early.startswith("flow D->B is paused"), rep.render()
        assert "  stopped before its window ended: flow D->B is paused" in rep.render()
        assert_no_open_transaction(target, flow, remote, 2)
        produce(source, topic, records(30, 2, start=80))
        assert run_continuous(cfg, flow, mode="direct", seconds=2).skipped.startswith("flow D->B is paused")
    finally:
        with FlowClients(cfg, flow) as clients:
            set_flow_state(clients, "running", "test", "test")
    # the next run goes on from the committed progress: no duplicates, nothing skipped
    assert run_once(cfg, flow, mode="direct").records == 30
    assert assert_exact(cfg, flow, source, target, topic, remote, 2) == 110


def test_sigterm_ends_a_continuous_spark_submit_run_cleanly(tmp_path, source, target, unique):
    pfx = unique("conts")
    topic, remote = f"{pfx}.orders", f"E.{pfx}.orders"
    create_topic(source, topic, 3)
    create_topic(target, remote, 3)
    produce(source, topic, records(30, 3))
    cfg, flow = continuous_flow(tmp_path, source, target, "E", pfx)

    proc = subprocess.Popen([*CLI, "--config", str(cfg.path), "replicate", "--flow", "E->B", "--continuous",
                             "--seconds", "600", "--mode", "submit", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(target, remote, 30, timeout=240)  # spark-submit started and copies
        produce(source, topic, records(90, 3, start=30))
        wait_for(target, remote, 120)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    rep = json.loads(out)
    assert rep["records"] == 120 and rep["failed_units"] == 0, rep
    assert rep["stopped_early"].startswith("flow E->B: stop requested (SIGTERM or SIGINT to the run"), rep
    assert assert_exact(cfg, flow, source, target, topic, remote, 3) == 120
    assert_no_open_transaction(target, flow, remote, 3)
    # the lease was released: the next run starts at once and copies only the new records
    produce(source, topic, records(15, 3, start=120))
    assert run_once(cfg, flow, mode="direct").records == 15
    assert assert_exact(cfg, flow, source, target, topic, remote, 3) == 135


def test_continuous_cli_honours_dry_run_and_topics(tmp_path, source, target, unique):
    pfx = unique("contf")
    topics = [f"{pfx}.a", f"{pfx}.b"]
    for t in topics:
        create_topic(source, t, 2)
        create_topic(target, f"CF.{t}", 2)
        produce(source, t, records(30, 2))
    cfg, flow = continuous_flow(tmp_path, source, target, "CF", pfx)
    base = [*CLI, "--config", str(cfg.path), "replicate", "--flow", "CF->B", "--continuous", "--mode", "direct"]

    # a continuous dry run plans, says what it would follow and ends (not after its 600 s): nothing copied
    dry = subprocess.run([*base, "--dry-run", "--seconds", "600"], capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "dry run: would follow 4 partitions of CF->B, 60 offsets behind now; copying nothing" in dry.stderr
    assert [consume_all(target, f"CF.{t}") for t in topics] == [[], []]

    # --topics: only the matching topic is followed
    only_a = subprocess.run([*base, "--topics", re.escape(topics[0]), "--seconds", "3", "--json"],
                            capture_output=True, text=True, timeout=180)
    assert only_a.returncode == 0, only_a.stderr[-3000:]
    rep = json.loads(only_a.stdout)
    assert rep["records"] == 30 and {p["topic"] for p in rep["partitions"]} == {topics[0]}, rep
    assert consume_all(target, f"CF.{topics[1]}") == []
    # the dry run and the narrowed run left the rest to copy exactly once
    assert run_once(cfg, flow, mode="direct").records == 30
    for t in topics:
        assert assert_exact(cfg, flow, source, target, t, f"CF.{t}", 2) == 30
