"""A replicate run rides through a broker restart and reports a slow source as
the transaction timeout it is, on real brokers.

The target here is a cluster of its own (alias R, one broker: a restart is an outage of the whole
cluster), so restarting it never disturbs another test's clusters.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import traceback

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

from mirrorflow.errors import ClusterError
from mirrorflow.replication.executors import copy_modes
from mirrorflow.replication.run.run_report import RunReport
from mirrorflow.replication.run.runner import run_once
from mirrorflow.replication.task import task_producer
from mirrorflow.state.names import offset_map_topic, progress_topic
from mirrorflow_dev.dev_cluster import DevCluster
from tests.integration.replicate_helpers import assert_copied, assert_map_exact, make_flow, mirror_topic
from tests.support import admin, consume_all, markers_written, produce

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000) - 3_600_000


@pytest.fixture(scope="module")
def restartable(kafka_pool) -> DevCluster:
    """Target cluster R: restarted by the tests of this module only."""
    return kafka_pool.get("R")


def many(n: int, partitions: int) -> list[dict]:
    return [
        {"partition": i % partitions, "key": f"k{i}".encode(), "value": f"value-{i:08d}".encode() * 6,
         "headers": [("n", str(i).encode())] if i % 5 == 0 else None, "timestamp": NOW + i}
        for i in range(n)
    ]


def high_watermark(cluster: DevCluster, topic: str, partitions: int) -> int:
    c = Consumer({**cluster.client_config(), "group.id": "mirrorflow-tests-hw"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        c.close()


def run_in_thread(cfg, flow) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def go() -> None:
        try:
            out["report"] = run_once(cfg, flow, mode="direct")
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            out["error"] = exc
            out["traceback"] = traceback.format_exc()

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, out


def leaders_back(cluster: DevCluster, topic: str, partitions: int) -> None:
    """Wait until every partition of `topic` has its leader again (a restarted broker loads its
    partitions after it answers; the test's own readers do not retry "not leader")."""
    deadline = time.monotonic() + 60
    while True:
        try:
            high_watermark(cluster, topic, partitions)
            return
        except KafkaException:
            assert time.monotonic() < deadline, f"{topic} on {cluster.alias} has no leader 60 s after the restart"
            time.sleep(0.5)


def settled(cluster: DevCluster, flow, remote: str, partitions: int) -> None:
    """Wait until the commit markers of the run's last transactions are on the target partition and
    the flow's progress and offset-map partitions (they follow commit_transaction; a restarted broker
    may write them late): read before that, a read_committed reader misses the last batches (a
    transaction really left open fails here, naming its offsets)."""
    markers_written(cluster, remote, partitions)
    md = admin(cluster).list_topics(timeout=30).topics
    for t in (progress_topic(flow), offset_map_topic(flow)):
        markers_written(cluster, t, len(md[t].partitions))


def wait_until_copying(t: threading.Thread, cluster: DevCluster, topic: str, partitions: int, least: int) -> None:
    """Block until the target holds at least `least` offsets of `topic` (the copy is under way)."""
    while t.is_alive() and high_watermark(cluster, topic, partitions) < least:
        time.sleep(0.2)
    assert t.is_alive(), "the run ended before the restart: copy more records"


def run_through_restart(cfg, flow, pool, hard: bool, down_s: float, copying=None) -> RunReport:
    """A replicate run in a thread while broker R restarts (SIGKILL with `hard`, else SIGTERM) and
    stays down `down_s`; with `copying` ((cluster, topic, partitions, least) for wait_until_copying)
    the restart waits until the copy is under way. The run must end by itself, without raising."""
    t, out = run_in_thread(cfg, flow)
    if copying is not None:
        wait_until_copying(t, *copying)
    pool.dev.restart("R", hard=hard, down_s=down_s, attached=True)
    back = time.monotonic()
    t.join(600)
    assert not t.is_alive()
    assert "error" not in out, (out.get("traceback"), broker_after(pool, "R", time.monotonic() - back))
    return out["report"]


def broker_after(pool, alias: str, since_s: float) -> str:
    """What a failure says of the restarted broker: alive or not, and its log's last lines. A full run
    (2026-12-01) saw the source's partitions without a leader for the whole outage bound (120 s) after a
    restart that had come back serving; the broker's side was gone with its directory."""
    from mirrorflow_dev.processes import alive, tail

    c = pool.dev.clusters().get(alias)
    pid = c.pid if c is not None else None
    logs = pool.dev.home / alias / "logs"
    return (f"broker {alias} (pid {pid}, {'alive' if alive(pid) else 'GONE'}) {since_s:.0f} s after the restart "
            f"returned; its log:\n{tail(logs / 'server.log', logs / 'stdout.log', n=60)}")


def diverge(src, dst) -> None:
    """Where the target's records first differ from the source's, per partition (for the message)."""
    problems = []
    for p in sorted({r.partition for r in src}):
        s = [r.content() for r in src if r.partition == p]
        d = [r.content() for r in dst if r.partition == p]
        if s != d:
            i = next((i for i, (x, y) in enumerate(zip(s, d, strict=False)) if x != y), min(len(s), len(d)))
            problems.append(f"partition {p}: {len(s)} source, {len(d)} target records, first difference at "
                            f"#{i}: source {s[i] if i < len(s) else None} target {d[i] if i < len(d) else None}; "
                            f"target {len(d) - len(set(d))} duplicates")
    assert not problems, "\n".join(problems)


def test_a_target_outage_longer_than_a_state_reads_timeout_is_ridden_through(
    tmp_path, source, restartable, kafka_pool, unique
):
    """The copy task's reads of the flow's state on the target (is the lease still the run's?) have
    their own timeout (admin.timeout.ms, 2 s here), shorter than the outage (30 s: the producer gives up its
    transaction in it) and than the bound.
    They are part of the outage: the task waits them out with the copy. A continuous run used to lose
    its copy tasks to a 5-minute target outage this way (the lease read's TransientError after 60 s)."""
    pfx = unique("statetimeout")
    topic, parts, n = f"{pfx}.orders", 2, 200_000
    remote = mirror_topic(source, restartable, topic, parts)
    produce(source, topic, many(n, parts))
    cfg, flow = make_flow(tmp_path, source, restartable, pfx, **{
        "transaction.max.records": 10_000, "tasks.max": 1, "admin.timeout.ms": 2000,
        "broker.outage.max.seconds": 120})
    rep = run_through_restart(cfg, flow, kafka_pool, True, 30.0, (restartable, remote, parts, 30_000))
    assert rep.ok and rep.records == n and rep.lag == 0, rep.render()
    settled(restartable, flow, remote, parts)
    src, dst = consume_all(source, topic), consume_all(restartable, remote)
    diverge(src, dst)
    assert len(dst) == n
    assert_map_exact(cfg, flow, source, restartable, topic, parts, records=(src, dst))


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_replicate_rides_through_a_target_restart(tmp_path, source, restartable, kafka_pool, unique, hard):
    pfx = unique("restart")
    topic, parts, n = f"{pfx}.orders", 4, 600_000
    remote = mirror_topic(source, restartable, topic, parts)
    produce(source, topic, many(n, parts))
    cfg, flow = make_flow(tmp_path, source, restartable, pfx,
                          **{"transaction.max.records": 20_000, "tasks.max": 2})
    rep = run_through_restart(cfg, flow, kafka_pool, hard, 20.0, (restartable, remote, parts, 60_000))
    assert rep.ok, rep.render()
    settled(restartable, flow, remote, parts)
    # the target first: a wrong count in the report must not hide what is (or is not) on the target
    src, dst = consume_all(source, topic), consume_all(restartable, remote)  # read once: 600,000 records
    diverge(src, dst)
    assert_copied(source, restartable, topic, records=(src, dst))
    assert len(dst) == n
    assert rep.records == n, rep.render()
    assert rep.lag == 0
    assert_map_exact(cfg, flow, source, restartable, topic, parts, records=(src, dst))
    if not hard:
        return
    # the next run starts while the target is killed: its first calls (the flow's state, the lease)
    # wait for the broker too (the chaos test's run under way exited 1 with "cannot reach")
    more = [{**r, "timestamp": NOW + n + i} for i, r in enumerate(many(2_000, parts))]
    produce(source, topic, more)
    rep = run_through_restart(cfg, flow, kafka_pool, True, 6.0)
    assert rep.ok and rep.records == 2_000 and rep.lag == 0, rep.render()
    leaders_back(restartable, remote, parts)
    diverge(consume_all(source, topic), consume_all(restartable, remote))
    assert_map_exact(cfg, flow, source, restartable, topic, parts)


def test_replicate_rides_through_a_source_restart(tmp_path, restartable, target, kafka_pool, unique):
    """The source cluster (R here, one broker) restarts with SIGTERM in the middle of a run's copy,
    then again while the next run plans: both runs wait for it and copy every record once."""
    pfx = unique("srcrestart")
    topic, parts, n = f"{pfx}.orders", 4, 400_000
    remote = mirror_topic(restartable, target, topic, parts)
    produce(restartable, topic, many(n, parts))
    cfg, flow = make_flow(tmp_path, restartable, target, pfx,
                          **{"transaction.max.records": 20_000, "tasks.max": 2,
                             "broker.outage.max.seconds": 120})
    rep = run_through_restart(cfg, flow, kafka_pool, False, 20.0, (target, remote, parts, 40_000))
    assert rep.ok, rep.render()
    leaders_back(restartable, topic, parts)
    src, dst = consume_all(restartable, topic), consume_all(target, remote)
    diverge(src, dst)
    assert len(dst) == n
    assert rep.records == n and rep.lag == 0, rep.render()
    # the next run starts while the source goes down: its plan (source metadata, offsets, topic
    # IDs) waits for the broker too (the chaos test's run under way exited 1 here)
    more = [{**r, "timestamp": NOW + n + i} for i, r in enumerate(many(2_000, parts))]
    produce(restartable, topic, more)
    rep = run_through_restart(cfg, flow, kafka_pool, False, 6.0)
    assert rep.ok and rep.records == 2_000 and rep.lag == 0, rep.render()
    leaders_back(restartable, topic, parts)
    src, dst = consume_all(restartable, topic), consume_all(target, remote)
    diverge(src, dst)
    assert len(dst) == n + 2_000
    assert_map_exact(cfg, flow, restartable, target, topic, parts, records=(src, dst))


def test_admin_clients_that_lost_every_broker_in_a_clean_restart_get_them_back(restartable, kafka_pool, unique):
    """A broker in its controlled shutdown answers metadata with no broker at all; librdkafka drops every broker
    the answer does not name, and a client under metadata.recovery.strategy=none (mirrorflow's admin clients)
    is left with none: every call failed after R was back ("No leaders found" for a run's whole outage bound in
    two full runs). Clean restarts of R, four of mirrorflow's admin clients asking for metadata all the while,
    until one of them has lost its brokers: each answers again within LOST_AFTER_S and a try of a new client."""
    from mirrorflow.kafka.connection import ClusterConnection
    from mirrorflow.kafka.lost_brokers import LOST_AFTER_S, PROBE_S
    from mirrorflow.kafka.topic_admin import list_offsets

    topic = unique("lost")
    conn = ClusterConnection("R", restartable.client_config())
    clients = [conn.admin() for _ in range(4)]
    clients[0].create_topics([NewTopic(topic, 2, 1)])[topic].result()
    answered = [0.0] * len(clients)
    doing: dict[str, tuple[str, float]] = {}  # each thread's call under way and since when, or its last failure
    stop = threading.Event()

    def ask(i: int) -> None:
        me = threading.current_thread().name
        while not stop.is_set():
            try:
                if i % 2:  # ListOffsets too: a lost client fails it with "No leaders found", its own verdict.
                    # Through the product's call, which asks for the topic's metadata after an answer of a stale
                    # leader epoch (FENCED_LEADER_EPOCH after every restart): the client's own ListOffsets kept
                    # its old epoch and failed for as long as the test asked
                    doing[me] = ("list_offsets", time.monotonic())
                    list_offsets(clients[i], conn, [(topic, 0)], OffsetSpec.latest(), committed=False, timeout=2)
                doing[me] = ("list_topics", time.monotonic())
                md = clients[i].list_topics(topic, timeout=2)
                if md.brokers and all(p.leader >= 0 for p in md.topics[topic].partitions.values()):
                    answered[i] = time.monotonic()
            except (KafkaException, ClusterError) as exc:
                doing[me] = (f"{doing[me][0]} failed: {exc}", time.monotonic())
            time.sleep(0.01)

    threads = [
        threading.Thread(target=ask, args=(i,), name=f"client {i} thread {j}", daemon=True)
        for i in range(len(clients))
        for j in range(2)
    ]
    for t in threads:
        t.start()
    try:
        for _ in range(10):
            kafka_pool.dev.restart("R", hard=False, down_s=1.0, attached=True)
            back = time.monotonic()
            deadline = back + LOST_AFTER_S * 2 + PROBE_S + 20  # the bound, a try that met the restart, slack
            while min(answered) < back and time.monotonic() < deadline:
                time.sleep(0.1)
            late = [i for i, t in enumerate(answered) if t < back]
            now = time.monotonic()
            what = {me: f"{call} ({now - since:.1f} s ago)" for me, (call, since) in sorted(doing.items())}
            assert not late, f"admin clients {late} not answered {deadline - back:.0f} s after R was back: {what}"
            if sum(c.replaced for c in clients):  # type: ignore[attr-defined]
                break
        assert sum(c.replaced for c in clients), "no client lost its brokers in 10 clean restarts"  # type: ignore[attr-defined]
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        leaders_back(restartable, topic, 2)


class SourceDownAfterInit:
    """Faults hook: the first time a copy task has initialised its producer, it waits (in the
    task's thread) until the test has stopped the source broker, then lets the task go on."""

    def __init__(self, port: int) -> None:
        self.port, self.at_init, self.fired = port, threading.Event(), False

    def reached(self, point: str, n: int = 0) -> None:
        if point != "after_init" or self.fired:
            return
        self.fired = True
        self.at_init.set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the broker refuses connections
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            except OSError:
                return
            time.sleep(0.1)


def test_a_copy_task_that_starts_while_the_source_is_down_waits_for_it(
    tmp_path, restartable, target, kafka_pool, unique, monkeypatch
):
    """The run planned against the source; the broker stops before the task's first source call and
    stays down longer than a one-off command's 10 s check. The task waits for it (the run reached
    the cluster: an outage, not a wrong address) and copies every record once; it used to fail its
    partitions at once with "cannot reach" (a full-suite run of the source-restart test above)."""
    pfx = unique("taskdown")
    topic, parts, n = f"{pfx}.orders", 2, 2_000
    remote = mirror_topic(restartable, target, topic, parts)
    produce(restartable, topic, many(n, parts))
    cfg, flow = make_flow(tmp_path, restartable, target, pfx, **{"tasks.max": 1, "broker.outage.max.seconds": 120})
    hook = SourceDownAfterInit(restartable.port)
    monkeypatch.setattr(copy_modes, "faults_from_env", lambda: hook)
    t, out = run_in_thread(cfg, flow)
    assert hook.at_init.wait(120), "the copy task never initialised its producer"
    kafka_pool.dev.restart("R", down_s=15.0, attached=True)
    t.join(300)
    assert not t.is_alive()
    assert "error" not in out, out.get("traceback")
    rep = out["report"]
    assert rep.ok and rep.records == n and rep.lag == 0, rep.render()
    leaders_back(restartable, topic, parts)
    src, dst = consume_all(restartable, topic), consume_all(target, remote)
    diverge(src, dst)
    assert len(dst) == n
    assert_map_exact(cfg, flow, restartable, target, topic, parts, records=(src, dst))


class StuckFetcher:
    """A lane consumer whose fetcher stays stopped, alive and silent: what librdkafka's did after a
    single-broker source restarted (confluentinc/librdkafka#5153; the two tests above, in a full run,
    read nothing for 120 s after the restart). Every partition it is assigned is paused."""

    def __init__(self, consumer) -> None:
        self.consumer = consumer

    def assign(self, partitions) -> None:
        self.consumer.assign(partitions)
        self.consumer.pause(partitions)

    def __getattr__(self, name: str):
        return getattr(self.consumer, name)


def lane_consumers(monkeypatch, stuck) -> list:
    """Every consumer made for a copy lane from now on (the pool emptied first), a StuckFetcher
    where `stuck(n)` says so for the n-th (0-based)."""
    made: list = []
    real = task_producer.ConsumerPool._new

    def new(clients, defaults, required):
        c = real(clients, defaults, required)
        made.append(StuckFetcher(c) if stuck(len(made)) else c)
        return made[-1]

    task_producer.LANES.clear()
    monkeypatch.setattr(task_producer.ConsumerPool, "_new", staticmethod(new))
    return made


def test_a_lane_whose_fetcher_stalls_reads_on_with_a_new_consumer(tmp_path, source, target, unique, monkeypatch,
                                                                   caplog):
    """The first lane's consumer never fetches. After a third of broker.outage.max.seconds (3 s of 9)
    without a record the lane reads on from the same offset with a new consumer, and every record
    is copied once; it used to fail the partitions after the bound, "no progress reading"."""
    pfx = unique("stall")
    topic, parts, n = f"{pfx}.orders", 2, 3_000
    remote = mirror_topic(source, target, topic, parts)
    produce(source, topic, many(n, parts))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 1, "broker.outage.max.seconds": 9})
    made = lane_consumers(monkeypatch, lambda i: i == 0)
    with caplog.at_level(logging.WARNING, logger="mirrorflow.replication.task.reader"):
        rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == n and rep.lag == 0, rep.render()
    renewals = [r.getMessage() for r in caplog.records if "with a new consumer" in r.getMessage()]
    assert len(renewals) == 1 and "reading on from offset 0 with a new consumer" in renewals[0], renewals
    assert isinstance(made[0], StuckFetcher) and len(made) >= 2
    src, dst = consume_all(source, topic), consume_all(target, remote)
    diverge(src, dst)
    assert len(dst) == n
    assert_map_exact(cfg, flow, source, target, topic, parts, records=(src, dst))


def test_a_consumer_left_stalled_by_a_failed_read_is_never_handed_to_the_next_run(
    tmp_path, source, target, unique, monkeypatch
):
    """Every lane consumer stalls: the run fails its partitions after the bound, naming it, and
    closes those consumers instead of keeping them for the next run (the second test above failed
    on a consumer the first had left stuck); the next run, with working consumers, copies all."""
    pfx = unique("stalled")
    topic, parts, n = f"{pfx}.orders", 2, 1_000
    remote = mirror_topic(source, target, topic, parts)
    produce(source, topic, many(n, parts))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 1, "broker.outage.max.seconds": 6})
    made = lane_consumers(monkeypatch, lambda i: True)
    rep = run_once(cfg, flow, mode="direct")
    assert not rep.ok and rep.records == 0, rep.render()
    assert [p.status for p in rep.partitions] == ["failed"] * parts, rep.render()
    assert "no progress reading offsets 0..500 for" in rep.render(), rep.render()
    kept = [c for v in task_producer.LANES._idle.values() for _, c in v]
    assert made and not any(c in kept for c in made), "a stalled consumer was kept for the next run"
    monkeypatch.undo()
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == n and rep.lag == 0, rep.render()
    src, dst = consume_all(source, topic), consume_all(target, remote)
    diverge(src, dst)
    assert len(dst) == n


def test_a_slow_source_never_keeps_a_transaction_open_past_its_timeout(tmp_path, source, target, unique):
    """A source that hands out about two records a second (each fetch waits for bytes that
    never come; one record per fetch) against a 6 s transaction.timeout.ms. A batch used to stay
    open for the whole read, the broker aborted it and the unit was reported "fenced by another
    attempt"; now a batch commits after half the timeout with what it has."""
    pfx = unique("slow")
    topic, n = f"{pfx}.orders", 30
    mirror_topic(source, target, topic, 1)
    produce(source, topic, many(n, 1), **{"batch.num.messages": "1", "linger.ms": "0"})  # one record per batch
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{
        "producer.transaction.timeout.ms": 6000,
        "consumer.fetch.min.bytes": 100_000_000,  # never reached: every fetch waits fetch.wait.max.ms
        "consumer.fetch.wait.max.ms": 500,
        "consumer.max.partition.fetch.bytes": 1,  # one record batch (here: one record) per fetch
    })
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.fenced_units == 0, rep.render()
    assert rep.records == n and rep.lag == 0, rep.render()
    (part,) = rep.partitions
    assert part.status == "ok", rep.render()
    s, d = consume_all(source, topic), consume_all(target, f"A.{topic}")
    diverge(s, d)
    assert_map_exact(cfg, flow, source, target, topic, 1)


class AfterCommits:
    """Faults hook: tells the test when a copy has committed `n` transactions, and holds every commit
    after those at `before_commit` until the test says `go` (the copy stays alive, mid-run, for as long
    as the test needs: a fast machine copied the whole backlog before the failover came)."""

    def __init__(self, n: int) -> None:
        self.n, self.commits, self.reached_n, self.go = n, 0, threading.Event(), threading.Event()

    def reached(self, point: str, n: int = 0) -> None:
        if point == "after_commit":
            self.commits += 1
            if self.commits >= self.n:
                self.reached_n.set()
        elif point == "before_commit" and self.commits >= self.n:
            self.go.wait(300)


def test_a_failover_after_a_target_outage_longer_than_the_lease_leaves_the_old_run_writing_nothing(
    tmp_path, source, restartable, kafka_pool, unique, monkeypatch
):
    """As an operator meets it: a copy under way, the target down 40 s (the run's 15 s lease lapses,
    its renewals fail), the target back, and an unplanned failover at once while the old run, still
    alive, rides out the outage (held at its next commit until the failover committed, so that it is still
    mid-copy whatever the machine's speed). The failover takes the lapsed lease and fences the old run's copies:
    from its commit on, the old run writes nothing to the target (it ends fenced, naming why), and what
    it committed before is on the target once."""
    from mirrorflow.ops.dr.failover_commit import commit_failover
    from mirrorflow.ops.dr.failover_plan import PlanMovedError
    from mirrorflow.ops.dr.failover_preflight import plan_failover

    pfx = unique("leaseout")
    topic, parts, n = f"{pfx}.orders", 2, 200_000
    remote = mirror_topic(source, restartable, topic, parts)
    produce(source, topic, many(n, parts))
    cfg, flow = make_flow(tmp_path, source, restartable, pfx, **{
        "transaction.max.records": 2_000, "tasks.max": 2, "lease.timeout.seconds": 15,
        "broker.outage.max.seconds": 120, "state.namespace": pfx})
    hook = AfterCommits(3)
    monkeypatch.setattr(copy_modes, "faults_from_env", lambda: hook)
    t, out = run_in_thread(cfg, flow)
    assert hook.reached_n.wait(180), "the copy never committed"
    kafka_pool.dev.restart("R", down_s=40.0, attached=True)
    leaders_back(restartable, remote, parts)
    committed = None
    for _ in range(5):  # the old run may still commit between a plan and its commit: plan again
        plan = plan_failover(cfg, flow).plan
        assert plan is not None and plan.blocked is None, plan
        try:
            committed = commit_failover(cfg, flow, plan, "the operator")
            break
        except PlanMovedError:
            continue
    assert committed is not None
    at_failover = high_watermark(restartable, remote, parts)
    hook.go.set()  # the old run, held at its next commit since the third, goes on
    t.join(300)
    assert not t.is_alive()
    assert "error" not in out, out.get("traceback")
    time.sleep(2)
    assert high_watermark(restartable, remote, parts) == at_failover  # nothing written since
    rep = out["report"]
    assert rep.records < n and {p.status for p in rep.partitions} <= {"fenced", "ok"}, rep.render()
    fenced = [p for p in rep.partitions if p.status == "fenced"]
    # the failover released the lease when it ended: the old run, going on after it, finds it free
    assert fenced and all("this run no longer holds the flow's lease" in e for p in fenced for e in p.errors), (
        rep.render())
    dst = consume_all(restartable, remote)
    assert 0 < len(dst) < n
    assert len({(r.partition, r.content()) for r in dst}) == len(dst)  # each once
