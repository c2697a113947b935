"""Chaos: many SIGKILLs of the copy, broker restarts, producers throughout.

A source with three kinds of topic (transactional with aborted transactions, compacted with holes,
plain) is written to by producers for the whole test while `mirrorflow replicate --once` runs again
and again and is SIGKILLed: mostly from outside after a random delay (the run's process group; its
spark-submit, in a session of its own, gets SIGTERM as its parent dies), sometimes from inside at a crash point
(MIRRORFLOW_TEST_CRASH), once inside a Spark task (an executor). Mid-run the target broker is
SIGKILLed and restarted, later the source broker is stopped (SIGTERM) and restarted. Afterwards
every committed source record is on the target exactly once and in order (read_committed), the
offset map translates every source offset exactly, verify finds nothing and the status says lag 0.

The clusters are this module's own (aliases XS and XT), so no other test's brokers restart.
`--long` scales the run up (tests/chaos/conftest.py).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from mirrorflow.clients import FlowClients
from mirrorflow.observe.status import flow_status
from mirrorflow.ops.verify.verify import verify_flow
from mirrorflow_dev.dev_cluster import DevCluster
from tests.integration.replicate_helpers import assert_copied, assert_map_exact, make_flow, mirror_topic
from tests.support import consume_all, end_transaction, produce

pytestmark = pytest.mark.chaos

CLI = os.path.join(os.path.dirname(sys.executable), "mirrorflow")
NOW = int(time.time() * 1000) - 3_600_000
COMPACT = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "100",
    "min.compaction.lag.ms": "0",
}
CRASH_POINTS = ["after_init", "before_flush:1", "after_flush:1", "before_commit:1", "after_commit:1"]
LEASE_HELD = 75  # EX_TEMPFAIL: the lease of a run killed just before has not lapsed yet
LEASE_LAPSE_S = 2.5  # longer than the flow's lease.timeout.seconds (make_flow: 1)
SETTLE_S = 15.0  # after a broker restart ends, a run may still fail on stale connections


@pytest.fixture(scope="module")
def chaos_source(kafka_pool):
    yield kafka_pool.get("XS")
    kafka_pool.release("XS")


@pytest.fixture(scope="module")
def chaos_target(kafka_pool):
    yield kafka_pool.get("XT")
    kafka_pool.release("XT")


@dataclass
class Figures:
    """What the run did: printed at the end and written to $MIRRORFLOW_CHAOS_REPORT."""

    records: dict[str, int] = field(default_factory=dict)
    aborted_transactions: int = 0
    committed_transactions: int = 0
    runs: int = 0
    kills_external: int = 0
    kills_crash_point: int = 0
    kills_spark: int = 0
    lease_held: int = 0
    completed_runs: int = 0
    failed_runs_near_restart: int = 0
    restarts: list[str] = field(default_factory=list)
    producer_errors: int = 0
    lost: int = 0
    duplicated: int = 0
    seconds: float = 0.0

    @property
    def kills(self) -> int:
        return self.kills_external + self.kills_crash_point + self.kills_spark


class SourceWriters:
    """Writes to the source for the whole test: transactions (some aborted) on `txn`, plain records
    on `plain`, records with fresh keys on the compacted topic. Errors (a source broker restart) are
    counted and ridden out; what counts is what the source holds at the end."""

    def __init__(self, cluster: DevCluster, topics: dict[str, str], batch: int, seed: int) -> None:
        self.cluster, self.topics, self.batch = cluster, topics, batch
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.committed = self.aborted = 0
        self.n = 0
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._guarded, name="chaos-writers", daemon=True)
        self.txid = f"chaos-src-{seed}"

    def _txn_producer(self) -> Producer:
        """A transactional producer (init_transactions also aborts what a lost one left open)."""
        for _ in range(120):  # the source broker may be restarting: it is back well within a minute
            p = Producer(
                {
                    **self.cluster.client_config(),
                    "transactional.id": self.txid,
                    "transaction.timeout.ms": 20000,
                    "linger.ms": 5,
                }
            )
            try:
                p.init_transactions(30)
                return p
            except KafkaException as exc:
                self.errors.append(f"init_transactions: {exc}")
                time.sleep(0.5)
        raise AssertionError(f"no transactional producer on the source: {self.errors[-3:]}")

    def _record(self, key: str, tombstones: bool = True) -> dict:
        """A record; some are null values, but not on the compacted topic: the cleaner would drop
        those tombstones on both sides after the copy, leaving holes where the map points."""
        self.n += 1
        value = None if tombstones and self.n % 23 == 0 else f"v{self.n}-".encode() * (1 + self.n % 4)
        return {
            "key": key.encode(),
            "value": value,
            "timestamp": NOW + self.n,
            "headers": [("n", str(self.n).encode())] if self.n % 3 else None,
        }

    def _produce(self, p: Producer, topic: str, partition: int, r: dict) -> None:
        p.produce(topic, r["value"], r["key"], partition, timestamp=r["timestamp"], headers=r["headers"])

    def _guarded(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.failure = exc

    def _loop(self) -> None:
        txp = self._txn_producer()
        plain = Producer({**self.cluster.client_config(), "linger.ms": 5, "enable.idempotence": True})
        while not self.stop.is_set():
            try:
                txp.begin_transaction()
                for _ in range(self.rng.randint(1, 2 * self.batch)):
                    self._produce(txp, self.topics["txn"], self.rng.randrange(3), self._record(f"t{self.n % 50}"))
                commit = self.rng.random() >= 0.3
                end_transaction(txp, commit)
                self.committed += commit
                self.aborted += not commit
            except KafkaException as exc:
                self.errors.append(f"transaction: {exc}")
                try:
                    txp.abort_transaction(10)
                except KafkaException:
                    txp = self._txn_producer()  # fences the old one and aborts its open transaction
            try:
                for _ in range(self.batch):
                    self._produce(plain, self.topics["plain"], self.rng.randrange(3), self._record(f"p{self.n % 40}"))
                self._produce(plain, self.topics["compact"], 0, self._record(f"fresh-{self.n}", tombstones=False))
                plain.poll(0)
            except (KafkaException, BufferError) as exc:
                self.errors.append(f"plain: {exc}")
            time.sleep(0.05)
        plain.flush(60)
        txp.flush(30)

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(180)
        assert not self.thread.is_alive(), f"the source writers did not stop; last errors: {self.errors[-5:]}"
        assert self.failure is None, f"the source writers failed: {self.failure!r}"


def compacted_with_holes(cluster: DevCluster, topic: str) -> None:
    """Write keys k0..k9 six times over and wait until the cleaner has left one record per key: the
    topic has holes, and as the writers only add fresh keys later, compaction removes nothing more
    (so the target, which keeps what it copied, can be compared with the source at the end)."""
    for round_ in range(6):
        produce(
            cluster,
            topic,
            [
                {
                    "partition": 0,
                    "key": f"k{i % 10}".encode(),
                    "value": f"r{round_}-{i}".encode(),
                    "timestamp": NOW + round_ * 100 + i,
                }
                for i in range(50)
            ],
        )
        time.sleep(0.3)
    deadline, nudge = time.monotonic() + 90, 0
    while time.monotonic() < deadline:
        keyed = [r for r in consume_all(cluster, topic) if r.key and r.key.startswith(b"k")]
        if len(keyed) == 10:
            return
        nudge += 1  # a record in a new segment lets the cleaner take the previous one
        produce(
            cluster, topic, [{"partition": 0, "key": f"nudge-{nudge}".encode(), "value": b"n", "timestamp": NOW + 9999}]
        )
        time.sleep(1)
    pytest.fail(f"the source topic {topic} was never fully compacted")


@dataclass
class Restart:
    """One broker restart, done while a copy run is under way."""

    alias: str
    hard: bool
    pid_before: int | None
    pid_after: int | None
    ended_at: float
    run_exit: int

    def describe(self) -> str:
        how = "SIGKILL" if self.hard else "SIGTERM"
        return f"{self.alias} {how} pid {self.pid_before} -> {self.pid_after}, the run under way exited {self.run_exit}"


def restart_mid_run(kafka_pool, alias: str, hard: bool, proc: subprocess.Popen, rng: random.Random) -> Restart:
    """Restart a broker while `proc` copies. In the test's own thread: `attached=True` ties the
    new broker to the thread that starts it (PR_SET_PDEATHSIG), so a helper thread's broker would
    die with the thread."""
    before = kafka_pool.dev.clusters()[alias].pid
    time.sleep(rng.uniform(0.5, 1.5))
    kafka_pool.dev.restart(alias, hard=hard, down_s=4.0, attached=True)
    after = kafka_pool.dev.clusters()[alias].pid
    assert after and after != before, f"{alias} still runs the broker of before the restart ({before})"
    return Restart(alias, hard, before, after, time.monotonic(), proc.wait(600))


def start_run(cfg, mode: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    """`mirrorflow replicate --once` in a session of its own. spark-submit runs in another session;
    killing the run sends it SIGTERM (PR_SET_PDEATHSIG, mirrorflow.process)."""
    out = open(log, "w")  # noqa: SIM115 - the child writes it; closed when the run ends
    try:
        return subprocess.Popen(
            [CLI, "--config", str(cfg.path), "replicate", "--flow", "A->B", "--once", "--mode", mode],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )
    finally:
        out.close()


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2500:]


def copy_until_done(cfg, flow, fig: Figures, logs: Path) -> None:
    """The last, undisturbed runs: until one ends with ok (the lease of the last killed run lapses)."""
    for i in range(40):
        log = logs / f"final-{i}.log"
        proc = start_run(cfg, "direct", {}, log)
        rc = proc.wait(600)
        fig.runs += 1
        if rc == 0:
            fig.completed_runs += 1
            return
        assert rc == LEASE_HELD, f"the final run failed (exit {rc}):\n{tail(log)}"
        fig.lease_held += 1
        time.sleep(0.5)
    pytest.fail("the final run never got the lease")


def test_chaos_kills_and_restarts_lose_and_duplicate_nothing(
    tmp_path, chaos_source, chaos_target, kafka_pool, unique, chaos_size
):
    began = time.monotonic()
    seed = int(os.environ.get("MIRRORFLOW_CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"\nchaos seed {seed} (MIRRORFLOW_CHAOS_SEED={seed} repeats the choices)")
    pfx = unique("chaos")
    topics = {"txn": f"{pfx}.payments", "plain": f"{pfx}.events", "compact": f"{pfx}.profiles"}
    parts = {"txn": 3, "plain": 3, "compact": 1}
    for kind, t in topics.items():
        conf = COMPACT if kind == "compact" else None
        mirror_topic(chaos_source, chaos_target, t, parts[kind], config=conf, target_config=conf)
    compacted_with_holes(chaos_source, topics["compact"])
    cfg, flow = make_flow(tmp_path, chaos_source, chaos_target, pfx, **{"transaction.max.records": 40, "tasks.max": 3})
    logs = tmp_path / "runs"
    logs.mkdir()

    writers = SourceWriters(chaos_source, topics, chaos_size["batch"], seed)
    writers.start()
    fig = Figures()
    kills = chaos_size["kills"]
    restarts: list[Restart] = []
    unexpected: list[str] = []
    try:
        # until enough kills, most of them from outside: whether a kill lands mid-copy depends on how fast
        # the machine copies (a full run on a quiet machine: 8 of 20 from outside, 28 runs finished first)
        while fig.kills_external + fig.kills_crash_point < kills or fig.kills_external < kills // 2:
            assert fig.runs < 8 * kills, f"{fig.runs} runs and only {fig.kills_external} killed from outside mid-copy"
            done = fig.kills_external + fig.kills_crash_point
            due = [("XT", True)] if not restarts and done >= kills // 3 else []
            due += [("XS", False)] if len(restarts) == 1 and done >= 2 * kills // 3 else []
            for alias, hard in due:  # the target crashes (SIGKILL), later the source stops (SIGTERM)
                log = logs / f"restart-{alias}.log"
                time.sleep(LEASE_LAPSE_S)  # the run under way must get the lease of the run killed just before
                restarts.append(restart_mid_run(kafka_pool, alias, hard, start_run(cfg, "direct", {}, log), rng))
                fig.runs += 1
            crash = rng.random() < 0.25
            env = {"MIRRORFLOW_TEST_CRASH": rng.choice(CRASH_POINTS)} if crash else {}
            log = logs / f"run-{fig.runs}.log"
            proc = start_run(cfg, "direct", env, log)
            fig.runs += 1
            try:
                rc = proc.wait(rng.uniform(0.3, 4.0))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait(60)
                if rc == -signal.SIGKILL:  # else it ended just before the kill: counted below
                    fig.kills_external += 1
                    continue
            if rc == -signal.SIGKILL:
                assert crash, f"a run without a crash point died of SIGKILL:\n{tail(log)}"
                fig.kills_crash_point += 1
            elif rc == LEASE_HELD:
                fig.lease_held += 1
                time.sleep(0.3)
            elif rc == 0:
                fig.completed_runs += 1
            elif restarts and time.monotonic() - restarts[-1].ended_at < SETTLE_S:
                fig.failed_runs_near_restart += 1
            else:
                unexpected.append(f"run {fig.runs - 1} exit {rc}:\n{tail(log)}")
        # Spark: the driver (spark-submit and its JVM) killed from outside while it copies, then a
        # task killed inside an executor (the job fails, nothing half-written shows)
        for i in range(chaos_size["spark_kills"]):
            log = logs / f"spark-{i}.log"
            for _ in range(40):
                proc = start_run(cfg, "submit", {}, log)
                fig.runs += 1
                try:
                    rc = proc.wait(rng.uniform(6.0, 14.0))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    rc = proc.wait(60)
                    if rc == -signal.SIGKILL:
                        fig.kills_spark += 1
                        break
                if rc != LEASE_HELD:
                    fig.completed_runs += rc == 0
                    if rc != 0:
                        unexpected.append(f"spark run exit {rc}:\n{tail(log)}")
                    break
                fig.lease_held += 1
                time.sleep(0.5)
        log = logs / "spark-executor.log"
        for _ in range(40):
            proc = start_run(cfg, "submit", {"MIRRORFLOW_TEST_CRASH": "before_commit:1"}, log)
            rc = proc.wait(600)
            fig.runs += 1
            if rc != LEASE_HELD:
                break
            fig.lease_held += 1
            time.sleep(0.5)
        out = log.read_text(errors="replace")  # the job's own output follows the message
        if rc != 0:  # rc 0: the task found nothing to copy (writers are slow) and never reached the point
            assert "the Spark copy job failed" in out, (rc, out[-2500:])
            fig.kills_spark += 1
    finally:
        writers.finish()
    fig.restarts = [r.describe() for r in restarts]
    assert not unexpected, "\n\n".join(unexpected)

    copy_until_done(cfg, flow, fig, logs)
    fig.seconds = round(time.monotonic() - began, 1)
    fig.aborted_transactions, fig.committed_transactions = writers.aborted, writers.committed
    fig.producer_errors = len(writers.errors)

    # every committed source record exactly once and in order; offsets map exactly; verify; lag 0
    for kind, t in topics.items():
        src = consume_all(chaos_source, t)
        dst = consume_all(chaos_target, f"A.{t}")
        s, d = [r.content() for r in src], [r.content() for r in dst]
        fig.records[kind] = len(src)
        fig.lost += len(set(s) - set(d))
        fig.duplicated += len(d) - len(set(d))
        assert_copied(chaos_source, chaos_target, t, records=(src, dst))
        assert_map_exact(cfg, flow, chaos_source, chaos_target, t, parts[kind], records=(src, dst))
        holes = [
            bool(pr) and len(pr) < pr[-1].offset + 1
            for pr in ([r for r in src if r.partition == p] for p in range(parts[kind]))
        ]
        if kind != "plain":  # markers and aborted records (txn), the cleaner (compact): holes in the source
            assert all(holes), f"{t} has a partition without holes: {holes}"
    with FlowClients(cfg, flow) as clients:
        rep = verify_flow(clients)
    assert rep.ok, rep.render()
    st = flow_status(cfg, flow)
    assert st.lag == 0, st

    summary = {**asdict(fig), "kills": fig.kills, "seed": seed}
    print("chaos figures: " + json.dumps(summary))
    if os.environ.get("MIRRORFLOW_CHAOS_REPORT"):
        Path(os.environ["MIRRORFLOW_CHAOS_REPORT"]).write_text(json.dumps(summary, indent=2) + "\n")
    # not vacuous: records of every kind, the kills delivered, both restarts done, aborts happened
    assert all(fig.records[k] > 0 for k in topics), fig.records
    assert fig.kills_external + fig.kills_crash_point >= kills >= 20
    assert fig.kills_external >= kills // 2, "most kills must come from outside, mid-copy"
    assert fig.kills_spark >= chaos_size["spark_kills"]
    assert len(fig.restarts) == 2
    assert writers.aborted > 0 and writers.committed > 0
    assert fig.lost == 0 and fig.duplicated == 0
