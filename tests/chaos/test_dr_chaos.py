"""Disaster-recovery chaos: seeded random round trips of the runbook on real brokers, under producers
and consumer groups, checked against a ledger of every record any producer got acknowledged.

A round trip, as README "Disaster recovery" and docs/operations.md tell users to run it:

1. A->B runs (replicate and checkpoint passes, direct mode) while a producer writes on A and two
   consumer groups (one fast, one slow) read and commit on A. The group members leave just before
   the incident (a member killed with A would stay in the group until its session times out).
2. The incident, drawn from the seed:
   - `kill`: A SIGKILLed while its producer writes, unplanned failover;
   - `stop`: A stopped (SIGTERM) while its producer writes, unplanned failover;
   - `partition`: A is declared lost but stays up, and its producer writes on through the failover
     (split brain by the failover's time);
   - `planned`: A's producer and groups stopped, planned failover (drain, verify).
   The failover is the preflight (`plan_failover`) and then the commit of that plan
   (`commit_failover`), the CLI's way (the report passed on) or the DAG's (the plan through its
   JSON, as XCom carries it). A transactional producer (with aborted transactions) writes on B
   from the moment the plan is made: while the approval waits, and on after the commit. A
   producer is paused (everything it sent acknowledged) while a failback reads what to count and
   while the groups' positions are checked, so that the counts compared are exact.
3. The groups move to B (checked: each resumes exactly where the runbook says) and read on there.
   A restarts (kill, stop); with split brain a producer writes on A after it is back.
4. `failback` of A->B (B->A starts; its report checked: what it copies, the divergence and the split
   brain, exact counts per partition); B->A runs while B's producer and groups go on.
5. The move back: B's producer and groups stop, planned failover of B->A (the groups resume on A
   exactly), a producer and the groups start on A again, `failback` of B->A (A->B starts; checked
   the same way); they go on into the next round trip.

Both replication policies: identity (DA->DB with the standby DB->DA, the aliases suffixed per run; the
applications use the same topic names on both sides) and default (EA->EB / EB->EA: A's topics are
EA.<topic> on B, B's own are EB.<topic> on A, the groups read both on each side).

At the end A->B is drained and every acknowledged record is where the runbook says: on A once (its
own, and B's records copied back by B->A), on B once (B's own, and A's copied by A->B), except the
divergence and split brain of each failback, which are on A only; in each partition in the order
its producer wrote; aborted records nowhere; no record no producer wrote. A record whose produce
on A was in flight when A died is looked up on A after the restart: there once (a divergence) or
nowhere.

The model is independent of mirrorflow's state: it knows what the producers wrote (uid header),
what the groups committed, and reads both clusters. Where a group resumes is derived the way the
runbook describes it: at its latest checkpoint (MM2's guard: a checkpoint never moves back unless
the group rewound), which is the next record the group had not read on the other side, or, when
that record was not copied, right after the last copy; never behind where the group already is on
the new side. The first record read from the committed offset must be exactly that record.

Own cluster DA (restarted) as A, the session's B (never restarted) as B. The default run: 2 round
trips with the identity policy (a kill among them), 1 without a restart with the default policy;
`--long` (tests/chaos/conftest.py): 8 and 4. MIRRORFLOW_CHAOS_SEED repeats the choices (not the
threads' timing); $MIRRORFLOW_DR_CHAOS_REPORT.<policy> gets the figures as JSON.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.ops.dr.failback import failback
from mirrorflow.ops.dr.failover_commit import commit_failover
from mirrorflow.ops.dr.failover_drain import Drain
from mirrorflow.ops.dr.failover_plan import FailoverPlan
from mirrorflow.ops.dr.failover_preflight import plan_failover
from mirrorflow.ops.verify.verify import verify_flow
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.flow_state import read_control
from mirrorflow_dev.dev_cluster import DevCluster
from tests.support import Rec, consume_all, create_topic, end_transaction, markers_written, write_config

pytestmark = pytest.mark.chaos

KINDS = ("kill", "stop", "partition", "planned")
TOPICS = {"orders": 3, "audit": 1}  # topic suffix -> partitions
APPROVER = "chaos-approver"

TP = tuple[str, int]


@pytest.fixture(scope="module")
def dr_a(kafka_pool):
    """Cluster DA: this module's A, killed, stopped and restarted (no other test uses it; stopped after)."""
    yield kafka_pool.get("DA")
    kafka_pool.release("DA")


def now_ms() -> int:
    return int(time.time() * 1000)


def uid_of(r: Rec) -> str:
    return dict(r.headers)["uid"].decode()


@dataclass(frozen=True)
class Written:
    """A record a producer wrote (acknowledged), as the ledger knows it."""

    uid: str
    side: str  # "A" or "B": where it was produced
    topic: str
    partition: int
    offset: int  # on its own cluster; -1 while unknown (in flight when A died)
    ts: int
    round: int
    writer: str


class Ledger:
    """Every record any producer wrote: acknowledged, in flight when its cluster died (unknown), or
    in an aborted transaction."""

    def __init__(self) -> None:
        self.acked: dict[str, Written] = {}
        self.unknown: dict[str, Written] = {}
        self.aborted: set[str] = set()
        self.lost: set[str] = set()  # in flight when A died and not on A after its restart
        self.lock = threading.Lock()

    def ack(self, w: Written) -> None:
        with self.lock:
            assert w.uid not in self.acked, f"{w.uid} acknowledged twice"
            self.acked[w.uid] = w

    def of(self, side: str, round_: int | None = None, writer: str | None = None) -> list[Written]:
        return [
            w
            for w in self.acked.values()
            if w.side == side and (round_ is None or w.round == round_) and (writer is None or w.writer == writer)
        ]


class Writer:
    """A producer writing small batches to random partitions of the topics until stopped: plain
    (idempotent, acks=all) on A, transactional with aborts on B. Each record carries a unique id
    (header `uid`) and an explicit CreateTime. `pause()` returns when everything sent is
    acknowledged and nothing more is sent until `resume()`."""

    def __init__(
        self,
        name: str,
        cluster: DevCluster,
        side: str,
        topics: dict[str, int],
        ledger: Ledger,
        round_: int,
        seed: str,
        transactional: bool = False,
    ) -> None:
        self.name, self.cluster, self.side, self.topics = name, cluster, side, topics
        self.ledger, self.round, self.transactional = ledger, round_, transactional
        self.rng = random.Random(seed)
        self.n = 0
        self.stopping = threading.Event()
        self.pausing = threading.Event()
        self.idle = threading.Event()
        self.errors: list[str] = []
        self.failure: BaseException | None = None
        self.sent: dict[str, Written] = {}  # sent, not yet acknowledged
        self.sent_ok: dict[str, Written] = {}  # acknowledged, not yet in the ledger (transactional: until the commit)
        self.thread = threading.Thread(target=self._guarded, name=f"writer-{name}", daemon=True)
        self.thread.start()

    def _record(self) -> tuple[str, Written, dict]:
        self.n += 1
        uid = f"{self.name}.{self.n}"
        topic = self.rng.choice(sorted(self.topics))
        part = self.rng.randrange(self.topics[topic])
        ts = now_ms()
        w = Written(uid, self.side, topic, part, -1, ts, self.round, self.name)
        kw = {
            "key": f"k{self.n % 7}".encode(),
            "value": f"{uid}:".encode() + b"x" * self.rng.randrange(40),
            "partition": part,
            "timestamp": ts,
            "headers": [("uid", uid.encode())],
        }
        return topic, w, kw

    def _delivered(self, w: Written, err, msg) -> None:
        """Delivery report of `w` (served by poll/flush in the writer's thread)."""
        self.sent.pop(w.uid, None)
        if err is not None:
            self.errors.append(f"{w.uid}: {err}")
            self.ledger.unknown[w.uid] = w
        else:
            self.sent_ok[w.uid] = Written(w.uid, w.side, w.topic, w.partition, msg.offset(), w.ts, w.round, w.writer)

    def _send(self, p: Producer, topic: str, w: Written, kw: dict) -> None:
        self.sent[w.uid] = w
        while True:
            try:
                p.produce(topic, on_delivery=lambda err, msg, w=w: self._delivered(w, err, msg), **kw)
                return
            except BufferError:
                p.poll(0.5)

    def _guarded(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.failure = exc
        finally:
            self.idle.set()

    def _loop(self) -> None:
        conf = {**self.cluster.client_config(), "linger.ms": 5, "acks": "all"}
        if self.transactional:
            p = Producer({**conf, "transactional.id": f"{self.name}-tx", "transaction.timeout.ms": 15000})
            p.init_transactions(30)
        else:
            p = Producer({**conf, "enable.idempotence": True, "message.timeout.ms": 6000})
        while not self.stopping.is_set():
            if self.pausing.is_set():
                self._settle(p)
                while self.pausing.is_set() and not self.stopping.is_set():
                    self.idle.set()  # again and again: a pause() right after a resume() waits for this
                    time.sleep(0.02)
                continue
            if self.transactional:
                self._transaction(p)
            else:
                for _ in range(self.rng.randint(1, 3)):
                    self._send(p, *self._record())
                p.poll(0)
                self._book()
            time.sleep(self.rng.uniform(0.05, 0.2))
        self._settle(p, final=True)

    def _transaction(self, p: Producer) -> None:
        p.begin_transaction()
        uids = []
        for _ in range(self.rng.randint(1, 4)):
            topic, w, kw = self._record()
            uids.append(w.uid)
            self._send(p, topic, w, kw)
        commit = self.rng.random() >= 0.2
        p.flush(30)  # every record acknowledged (its offset known) before the end of the transaction
        assert not self.sent, f"{self.name}: records of a transaction not acknowledged: {sorted(self.sent)}"
        end_transaction(p, commit)
        if commit:
            self._book()
        else:
            self.ledger.aborted.update(uids)
            for u in uids:
                self.sent_ok.pop(u, None)

    def _book(self) -> None:
        """Acknowledged records into the ledger (plain: as acknowledged; transactional: at commit)."""
        for uid in list(self.sent_ok):
            self.ledger.ack(self.sent_ok.pop(uid))

    def _settle(self, p: Producer, final: bool = False) -> None:
        if not self.transactional:
            left = p.flush(8 if final else 60)
            if left:  # the cluster is gone: what is still queued never got an answer
                p.purge()
                p.flush(0)
            self._book()

    def pause(self) -> None:
        self.idle.clear()
        self.pausing.set()
        assert self.idle.wait(120), f"writer {self.name} did not pause: {self.errors[-3:]}"
        self.check()

    def resume(self) -> None:
        self.pausing.clear()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(120)
        assert not self.thread.is_alive(), f"writer {self.name} did not stop: {self.errors[-3:]}"
        self.check()

    def check(self) -> None:
        assert self.failure is None, f"writer {self.name} failed: {self.failure!r}"


class Reader:
    """A consumer group member that reads and commits each record it read (synchronously, under
    `lock`, so a checkpoint pass can see exactly what the group committed). `slow` seconds per
    record keep a group behind the producers."""

    def __init__(
        self, cluster: DevCluster, side: str, group: str, topics: list[str], slow: float, lock: threading.Lock
    ) -> None:
        self.cluster, self.side, self.group, self.topics, self.slow, self.lock = (
            cluster,
            side,
            group,
            topics,
            slow,
            lock,
        )
        self.read = 0
        self.errors: list[str] = []
        self.failure: BaseException | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._guarded, name=f"reader-{group}-{side}", daemon=True)
        self.thread.start()

    def _guarded(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.failure = exc

    def _loop(self) -> None:
        c = Consumer(
            {
                **self.cluster.client_config(),
                "group.id": self.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
            }
        )
        c.subscribe(self.topics)
        try:
            while not self.stopping.is_set():
                m = c.poll(0.2)
                if m is None or m.error():
                    continue
                with self.lock:
                    self.read += 1
                    try:
                        c.commit(message=m, asynchronous=False)
                    except KafkaException as exc:  # ridden out: the model reads what the group committed
                        self.errors.append(str(exc))
                if self.slow:
                    time.sleep(self.slow)
        finally:
            c.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), f"reader {self.group} on {self.side} did not stop"
        assert self.failure is None, f"reader {self.group} on {self.side} failed: {self.failure!r}"


def snapshot(cluster: DevCluster, topics: dict[str, int]) -> dict[TP, list[Rec]]:
    """Every committed record of the topics on `cluster`, per partition in offset order."""
    out: dict[TP, list[Rec]] = {(t, p): [] for t, n in topics.items() for p in range(n)}
    for t in topics:
        for r in consume_all(cluster, t, timeout=60):
            out[(t, r.partition)].append(r)
    return out


def committed(cluster: DevCluster, group: str, tps: list[TP]) -> dict[TP, int | None]:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(t, p) for t, p in tps], timeout=30)
    finally:
        c.close()
    return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in got}


def first_at(records: list[Rec], offset: int | None) -> str | None:
    """The uid of the first record at or after `offset` (None: none, or no offset)."""
    if offset is None:
        return None
    return next((uid_of(r) for r in records if r.offset >= offset), None)


def translate(src: list[Rec], offset: int, dst: list[Rec]) -> int:
    """Where a group at `offset` of a source partition resumes on the target partition, by the
    runbook: at the copy of the first record it had not read that is on the target; when none is,
    right after the last record there (the end of what the flow wrote). Normalised to the offset of
    a record (or the end), so that positions that differ only by transaction markers compare equal."""
    on_dst = {uid_of(r): r.offset for r in dst}
    for r in src:
        if r.offset >= offset and uid_of(r) in on_dst:
            return on_dst[uid_of(r)]
    return dst[-1].offset + 1 if dst else 0


@dataclass
class Figures:
    """What the run did: printed at the end and written to $MIRRORFLOW_DR_CHAOS_REPORT."""

    seed: int = 0
    round_trips: list[str] = field(default_factory=list)
    records_a: int = 0
    records_b: int = 0
    aborted_b: int = 0
    lost_in_flight: int = 0
    in_flight_at_loss: int = 0
    in_flight_found_on_a: int = 0
    kills: int = 0
    stops: int = 0
    divergence: int = 0
    split_brain: int = 0
    copied_back: int = 0
    group_moves: int = 0
    consumed: int = 0  # records the groups read (and committed one by one)
    replicate_runs: int = 0
    checkpoint_passes: int = 0
    seconds: float = 0.0
    steps: dict[str, float] = field(default_factory=dict)


class DrChaos:
    """The test's state: clusters, flows, producers, groups, the ledger and the checkpoint model."""

    def __init__(self, kafka_pool, a: DevCluster, b: DevCluster, cfg, pfx: str, rng: random.Random, seed: int):
        self.pool, self.a, self.b, self.cfg, self.pfx, self.rng, self.seed = kafka_pool, a, b, cfg, pfx, rng, seed
        self.fwd = next(f for f in cfg.flows.values() if not f.props.get("standby"))
        self.rev = next(f for f in cfg.flows.values() if f.props.get("standby"))
        self.alias = {"A": self.fwd.source, "B": self.fwd.target}
        self.identity = self.fwd.props["replication.policy.class"].startswith("Identity")
        self.topics = {f"{pfx}.{t}": n for t, n in TOPICS.items()}  # the applications' own, on both sides
        self.groups = {f"{pfx}-fast": (sorted(self.topics), 0.0), f"{pfx}-slow": ([f"{pfx}.orders"], 0.15)}
        self.ledger = Ledger()
        self.lock = threading.Lock()  # readers commit under it; a checkpoint pass takes it
        self.readers: list[Reader] = []
        # the checkpoint model, per flow and (group, topic, partition): (source offset, target position)
        self.ckpt: dict[str, dict[tuple[str, str, int], tuple[int, int]]] = {self.fwd.name: {}, self.rev.name: {}}
        self.kept: set[str] = set()  # divergence and split brain of every failback: on A only
        self.fig = Figures(seed=seed)
        self.began = time.monotonic()
        self.writers: list[Writer] = []  # every one started (stopped in the end, also on a failure)

    # -- parts --------------------------------------------------------------------------------
    def cluster(self, side: str) -> DevCluster:
        return self.a if side == "A" else self.b

    def remote(self, origin: str, topic: str) -> str:
        """The name on the other side of `origin`'s own topic: the same (identity policy), else
        MM2's remote name `<origin alias>.<topic>`."""
        return topic if self.identity else f"{self.alias[origin]}.{topic}"

    def on(self, side: str) -> dict[str, int]:
        """Every topic the applications use on `side`: their own and (default policy) the other
        side's under its remote name."""
        other = "B" if side == "A" else "A"
        return {**self.topics, **{self.remote(other, t): n for t, n in self.topics.items()}}

    def where(self, w: Written, side: str) -> str:
        return w.topic if w.side == side else self.remote(w.side, w.topic)

    def snap(self, side: str) -> dict[TP, list[Rec]]:
        return snapshot(self.cluster(side), self.on(side))

    def tps(self, group: str, side: str) -> list[TP]:
        mine = self.groups[group][0]
        topics = mine if self.identity else [*mine, *(self.remote("B" if side == "A" else "A", t) for t in mine)]
        return [(t, p) for t in topics for p in range(self.on(side)[t])]

    def committed(self, side: str) -> dict[str, dict[TP, int | None]]:
        return {g: committed(self.cluster(side), g, self.tps(g, side)) for g in self.groups}

    def writer(self, side: str, round_: int, what: str) -> Writer:
        name = f"{side}{round_}{what}{len(self.writers) + 1}"
        w = Writer(name, self.cluster(side), side, self.topics, self.ledger, round_, f"{self.seed}-{name}", side == "B")
        self.writers.append(w)
        return w

    def halt(self) -> None:
        """Stop every producer and group member still running (the end, or a failure)."""
        for t in [*self.writers, *self.readers]:
            t.stopping.set()
        for t in [*self.writers, *self.readers]:
            t.thread.join(30)

    def start_readers(self, side: str) -> None:
        self.readers = [
            Reader(self.cluster(side), side, g, sorted({t for t, _ in self.tps(g, side)}), slow, self.lock)
            for g, (_, slow) in self.groups.items()
        ]

    def stop_readers(self) -> None:
        for r in self.readers:
            r.stop()
            self.fig.consumed += r.read
        self.readers = []

    def timed(self, step: str, began: float) -> None:
        took = time.monotonic() - began
        self.fig.steps[step] = round(self.fig.steps.get(step, 0.0) + took, 1)
        print(f"  {time.monotonic() - self.began:6.1f}s {step} ({took:.1f}s)", flush=True)

    def replicate(self, flow) -> int:
        began = time.monotonic()
        rep = run_once(self.cfg, flow, mode="direct")
        assert rep.ok and not rep.skipped, rep.render()
        self.fig.replicate_runs += 1
        self.timed("replicate", began)
        return rep.lag

    # -- checkpoints: the product's pass and the model's ----------------------------------------
    def checkpoint(self, flow, src: str, dst: str) -> None:
        """A checkpoint pass of `flow` (`src` -> `dst`) while the groups read on `src`: under the
        readers' lock, so the model knows exactly the offsets it translated."""
        began = time.monotonic()
        with self.lock:
            offsets = self.committed(src)
            run = emit_checkpoints(self.cfg, flow)
        assert not run.errors, run.errors
        self.model_checkpoint(flow, src, offsets, self.snap(src), self.snap(dst))
        self.fig.checkpoint_passes += 1
        self.timed("checkpoint", began)

    def model_checkpoint(self, flow, src: str, offsets, src_snap, dst_snap) -> None:
        """The model's checkpoint of each group offset on a topic the flow replicates (`src`'s own),
        kept by MM2's guard (CheckpointStore.decide): unless it would move the target position back
        while the group did not rewind. Keyed by the topic on the target."""
        store = self.ckpt[flow.name]
        for g, offs in offsets.items():
            for (t, p), off in offs.items():
                if off is None or t not in self.topics:
                    continue
                to = self.remote(src, t)
                pos = translate(src_snap[(t, p)], off, dst_snap[(to, p)])
                prev = store.get((g, to, p))
                if prev is None or off < prev[0] or pos > prev[1]:
                    store[(g, to, p)] = (off, pos)

    def check_resume(self, flow, dst: str, before: dict[str, dict[TP, int | None]], what: str) -> None:
        """Each group's committed offset on `dst` (the new side, whose producers are paused) points at
        exactly the record the runbook says: at the group's latest checkpoint of `flow`, never behind
        the offset the group already had on `dst` (`before`); where `flow` has no checkpoint (default
        policy: `dst`'s own topics), at that offset; none when neither exists."""
        snap = self.snap(dst)
        now = self.committed(dst)
        wrong = []
        for g in self.groups:
            for tp in self.tps(g, dst):
                cp = self.ckpt[flow.name].get((g, *tp))
                got = now[g][tp]
                pos = max([p for p in (cp[1] if cp else None, before[g][tp]) if p is not None], default=None)
                want, actual = first_at(snap[tp], pos), first_at(snap[tp], got)
                if actual != want or (pos is None) != (got is None):
                    wrong.append(
                        f"{g} {tp[0]}[{tp[1]}]: committed {got} (first record {actual}), expected at {pos} "
                        f"(first record {want}; checkpoint {cp}, before {before[g][tp]})"
                    )
        assert not wrong, f"{what}: groups do not resume where the runbook says:\n" + "\n".join(wrong)
        self.fig.group_moves += 1

    # -- the failover, the way the CLI and the DAG run it ----------------------------------------
    def fail_over(self, flow, mode: str, during_approval) -> dict:
        """plan_failover, `during_approval()` (producers move), commit_failover of exactly that
        plan; the CLI's way (its report) or the DAG's (the plan through JSON, as XCom holds it)."""
        began = time.monotonic()
        t0 = now_ms()
        pre = plan_failover(self.cfg, flow, mode, drain=Drain("direct"))
        t1 = now_ms()
        assert pre.plan is not None and not pre.plan.blocked, pre.render()
        assert not [g.group for g in pre.plan.groups if g.action == "left-alone"], pre.render()
        if mode == "planned":
            assert pre.verify is not None and pre.verify.ok, pre.render()
        during_approval()
        if self.rng.random() < 0.5:
            rep = commit_failover(self.cfg, flow, pre.plan, APPROVER, pre, via="cli")
        else:
            plan = FailoverPlan.from_dict(json.loads(json.dumps(pre.plan.to_dict())))
            rep = commit_failover(self.cfg, flow, plan, APPROVER, via="airflow")
        assert rep.done, rep.render()
        with FlowClients(self.cfg, flow) as fc:
            record = read_control(fc, "failover")
        assert record is not None and record["plan"] == pre.plan.id and record["approved_by"] == APPROVER, record
        # the failover's time is when its plan was made (docs/state.md): it splits divergence and split brain
        assert t0 <= int(record["at"]) <= t1, (t0, record["at"], t1)
        self.timed(f"failover {mode}", began)
        return record

    # -- the failback and its report against the ledger ------------------------------------------
    def check_failback(self, rep, expect_kept: dict[str, list[Written]], copies: list[Written]) -> None:
        where = {uid_of(r): r.offset for (t, _), recs in self.snap("A").items() if t in self.topics for r in recs}
        for name, got, want in (
            ("divergence", rep.divergence, expect_kept["divergence"]),
            ("split brain", rep.split_brain, expect_kept["split brain"]),
        ):
            counts = {(d.topic, d.partition): d.records for d in got if d.records}
            model: dict[TP, int] = {}
            for w in want:
                model[(w.topic, w.partition)] = model.get((w.topic, w.partition), 0) + 1
            assert counts == model, f"{name}: failback reports {counts}, the ledger says {model}\n{rep.render()}"
            ranges = {(d.topic, d.partition): d.ranges for d in got}
            outside = [w.uid for w in want if not any(a <= where[w.uid] < b for a, b in ranges[(w.topic, w.partition)])]
            assert not outside, f"{name}: records outside the reported ranges: {outside}\n{rep.render()}"
        model = {(t, p): 0 for t, n in self.topics.items() for p in range(n)}
        for w in copies:
            model[(w.topic, w.partition)] += 1
        got_copy = {(s.topic, s.partition): s.to_copy for s in rep.seeds}
        assert got_copy == model, f"to copy: failback reports {got_copy}, the ledger says {model}\n{rep.render()}"

    def kept_now(self, failover: dict) -> dict[str, list[Written]]:
        """A's records that are not on B and no earlier failback kept: checked to be the tail of
        each partition's records in A's order (A->B copies in order, without holes), split into the
        divergence and the split brain where A's end was when the failover's plan was made (the
        failover record's `source_ends`; a partition it does not name was born after), or, when A did
        not answer then (killed, stopped), at the failover's time by the records' timestamps."""
        on_b = {uid_of(r) for recs in self.snap("B").values() for r in recs}
        mine = sorted(
            (w for w in self.ledger.of("A") if w.uid not in self.kept), key=lambda w: (w.topic, w.partition, w.offset)
        )
        for tp in self.topics_parts():
            seq = [w.uid in on_b for w in mine if (w.topic, w.partition) == tp]
            assert seq == sorted(seq, reverse=True), f"{tp}: A's records on B are not a prefix of A's: {seq}"
        kept = [w for w in mine if w.uid not in on_b]
        ends, at = failover.get("source_ends") or {}, int(failover["at"])

        def after(w: Written) -> bool:
            if ends:
                return w.offset >= ends.get(f"{w.topic}:{w.partition}", -1)
            return w.ts >= at

        return {"divergence": [w for w in kept if not after(w)], "split brain": [w for w in kept if after(w)]}

    def topics_parts(self) -> list[TP]:
        return [(t, p) for t, n in self.topics.items() for p in range(n)]

    def resolve_in_flight(self) -> None:
        """Records whose produce on A got no answer before A died: on A after the restart (then
        they are A's, at that offset) or nowhere."""
        if not self.ledger.unknown:
            return
        found = {uid_of(r): r.offset for (t, _), recs in self.snap("A").items() if t in self.topics for r in recs}
        for uid, w in list(self.ledger.unknown.items()):
            self.fig.in_flight_at_loss += 1
            if uid in found:
                self.fig.in_flight_found_on_a += 1
                self.ledger.ack(Written(w.uid, w.side, w.topic, w.partition, found[uid], w.ts, w.round, w.writer))
            else:
                self.ledger.lost.add(uid)  # never written: must be nowhere
            del self.ledger.unknown[uid]

    # -- one round trip ---------------------------------------------------------------------------
    def round_trip(self, r: int, kind: str, split: bool, steady_runs: int, a_writer: Writer) -> Writer:
        """One round trip from A back to A (module docstring), under `a_writer` and the groups
        reading on A; returns the producer writing on A at its end (the groups read on A)."""
        rng = self.rng
        self.fig.round_trips.append(f"{r}:{kind}" + ("+split" if split else ""))
        print(f"round trip {self.fig.round_trips[-1]}", flush=True)
        ticks = 0
        for i in range(steady_runs):
            self.replicate(self.fwd)
            if rng.random() < 0.5 or (i == steady_runs - 1 and not ticks):
                self.checkpoint(self.fwd, "A", "B")
                ticks += 1
            time.sleep(rng.uniform(0.2, 1.0))
        time.sleep(rng.uniform(0.0, 1.5))  # the groups read on after the last pass
        self.stop_readers()  # the applications on A lose A (or are stopped for the planned move)
        b_writer: list[Writer] = []

        drained: list[tuple] = []

        def approval() -> None:  # applications move to B while the approval waits
            if kind == "planned":  # what the drain's last checkpoint pass saw (B is written to from now on)
                drained.append((self.snap("A"), self.snap("B")))
            b_writer.append(self.writer("B", r, "w"))
            time.sleep(rng.uniform(0.5, 2.5))

        before_b = self.committed("B")
        if kind in ("kill", "stop"):
            time.sleep(rng.uniform(0.1, 0.8))  # the producer writes on A up to the loss
            dev = self.pool.dev
            if kind == "kill":
                dev.kill("DA")
                self.fig.kills += 1
            else:
                dev.stop("DA")
                self.fig.stops += 1
            a_writer.stop()
            failover = self.fail_over(self.fwd, "unplanned", approval)
        elif kind == "partition":  # A up and written to through the failover: split brain
            failover = self.fail_over(self.fwd, "unplanned", approval)
            time.sleep(rng.uniform(0.3, 1.5))
            a_writer.stop()
        else:  # planned: A's producers stopped first (the runbook's step), the drain checkpoints last
            a_writer.stop()
            offsets = self.committed("A")
            failover = self.fail_over(self.fwd, "planned", approval)
            # the drain's last checkpoint pass translated exactly these offsets (B writes only after the plan)
            self.model_checkpoint(self.fwd, "A", offsets, *drained[0])
        bw = b_writer[0]
        bw.pause()
        self.check_resume(self.fwd, "B", before_b, f"round {r}: failover A->B ({kind})")
        bw.resume()
        self.start_readers("B")
        time.sleep(rng.uniform(1.0, 3.0))

        if kind in ("kill", "stop"):
            began = time.monotonic()
            self.pool.dev.restart("DA", attached=True)
            self.timed("restart A", began)
            self.resolve_in_flight()
        if split and kind != "partition":  # producers that still write to A now that it is back
            w = self.writer("A", r, "split")
            time.sleep(rng.uniform(0.5, 2.0))
            w.stop()

        kept = self.kept_now(failover)
        bw.pause()
        began = time.monotonic()
        rep = failback(self.cfg, self.fwd)
        self.timed("failback", began)
        assert rep.done, rep.render()
        self.check_failback(rep, kept, self.ledger.of("B", r))
        bw.resume()
        self.kept |= {w.uid for ws in kept.values() for w in ws}
        self.fig.divergence += len(kept["divergence"])
        self.fig.split_brain += len(kept["split brain"])
        self.fig.copied_back += rep.to_copy

        for _ in range(rng.randint(2, 3)):  # B->A runs while B's producer and groups go on
            self.replicate(self.rev)
            if rng.random() < 0.4:
                self.checkpoint(self.rev, "B", "A")
            time.sleep(rng.uniform(0.2, 1.0))

        # the move back: stop B's producers and applications, planned failover of B->A
        bw.stop()
        time.sleep(rng.uniform(0.0, 1.0))
        self.stop_readers()
        offsets, before_a = self.committed("B"), self.committed("A")
        self.fail_over(self.rev, "planned", lambda: None)
        # the drain's last checkpoint pass translated exactly these offsets
        self.model_checkpoint(self.rev, "B", offsets, self.snap("B"), self.snap("A"))
        self.check_resume(self.rev, "A", before_a, f"round {r}: failover back B->A")

        back = self.writer("A", r, "back")  # the applications are on A again
        self.start_readers("A")
        time.sleep(rng.uniform(0.5, 2.0))
        back.pause()
        began = time.monotonic()
        rep = failback(self.cfg, self.rev)
        self.timed("failback", began)
        assert rep.done and not rep.divergence and not rep.split_brain, rep.render()
        self.check_failback(rep, {"divergence": [], "split brain": []}, self.ledger.of("A", r, back.name))
        back.resume()
        return back

    # -- the end: where every record must be --------------------------------------------------------
    def drain(self) -> None:
        """A->B until nothing is left to copy (all producers stopped)."""
        for _ in range(10):
            if self.replicate(self.fwd) == 0:
                return
        pytest.fail("A->B did not reach lag 0 in 10 runs with every producer stopped")

    def check_everything(self) -> None:
        """Every acknowledged record where the runbook says, exactly once, in its producer's order,
        unchanged; the kept ones (divergence, split brain) on A only; nothing else anywhere."""
        for side in ("A", "B"):  # no transaction left open anywhere
            for t, n in self.on(side).items():
                markers_written(self.cluster(side), t, n)
        acked = self.ledger.acked
        want = {"A": set(acked), "B": set(acked) - self.kept}
        assert not self.ledger.unknown, self.ledger.unknown
        for side in ("A", "B"):
            snap = self.snap(side)
            seen: dict[str, Rec] = {}
            dup, stray, moved, changed = [], [], [], []
            for (t, p), recs in snap.items():
                for r in recs:
                    u = uid_of(r)
                    w = acked.get(u)
                    if u in seen:
                        dup.append(u)
                    elif w is None:
                        stray.append(u)  # aborted, never written, or nobody's
                    elif (self.where(w, side), w.partition) != (t, p):
                        moved.append(f"{u} in {t}[{p}], written to {w.topic}[{w.partition}] on {w.side}")
                    elif r.timestamp != w.ts or not (r.value or b"").startswith(f"{u}:".encode()):
                        changed.append(u)
                    seen[u] = r
            # in each partition, the records of each producing side in the order they were written there
            disorder = []
            for (t, p), recs in snap.items():
                for origin in ("A", "B"):
                    offs = [
                        acked[uid_of(r)].offset for r in recs if uid_of(r) in acked and acked[uid_of(r)].side == origin
                    ]
                    if offs != sorted(offs):
                        disorder.append(f"{t}[{p}] records of {origin}")
            missing = sorted(want[side] - set(seen))
            kept_there = sorted(set(seen) & self.kept) if side == "B" else []
            problems = {
                "duplicated": dup,
                "not written by any producer (or aborted)": stray,
                "in another partition": moved,
                "changed": changed,
                "missing": missing,
                "kept by a failback, yet here": kept_there,
                "out of order": disorder,
            }
            bad = {k: v[:20] for k, v in problems.items() if v}
            assert not bad, f"cluster {side}: " + json.dumps(bad, indent=1)
        for flow in (self.fwd, self.rev):  # the whole history, as an operator runs it: kept records are no mismatch
            with FlowClients(self.cfg, flow) as clients:
                rep = verify_flow(clients)
            assert rep.ok, rep.render()


@pytest.mark.parametrize("policy", ["identity", "default"])
def test_dr_round_trips_keep_every_record_where_the_runbook_says(
    tmp_path, dr_a, target, kafka_pool, unique, dr_size, policy
):
    began = time.monotonic()
    seed = int(os.environ.get("MIRRORFLOW_CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"\ndr chaos ({policy} policy) seed {seed} (MIRRORFLOW_CHAOS_SEED={seed} repeats the choices)")
    pfx = unique("drc")
    # flows of their own on the shared B, new each run: a run that failed half-way (a flow left failed
    # over) never meets a later test of the worker under the same name
    tag = pfx.rsplit("-", 1)[-1][:4]
    a, b = (f"DA{tag}", f"DB{tag}") if policy == "identity" else (f"EA{tag}", f"EB{tag}")
    common = {
        "topics": f"{pfx}\\..*",
        "groups": f"{pfx}-.*",
        "replication.policy.class": f"{policy.capitalize()}ReplicationPolicy",
        "state.topic.partitions": 2,
        "lease.timeout.seconds": 2,
        "heartbeats.replication.enabled": False,
    }
    cfg = write_config(
        tmp_path / "mf.yaml", {a: dr_a, b: target}, {f"{a}->{b}": common, f"{b}->{a}": {**common, "standby": True}}
    )
    chaos = DrChaos(kafka_pool, dr_a, target, cfg, pfx, rng, seed)
    for t, n in chaos.topics.items():
        create_topic(dr_a, t, n)
        if policy == "default":  # B's own topics (its producers' after a failover), and their copies on A
            create_topic(target, t, n)
            create_topic(dr_a, chaos.remote("B", t), n)
    assert sync_flow(cfg, chaos.fwd, ["topics"]).ok

    size = dr_size[policy]
    n = size["round_trips"]
    kinds = rng.sample(KINDS, min(n, len(KINDS))) + [rng.choice(KINDS) for _ in range(n - len(KINDS))]
    if n == 1:  # the default run's second policy: one round trip without a restart (time)
        kinds = [rng.choice(("partition", "planned"))]
    elif "kill" not in kinds:
        kinds[rng.randrange(n)] = "kill"
    splits = [k == "partition" or rng.random() < 0.5 for k in kinds]  # split brain in that round trip
    if not any(splits):
        splits[rng.randrange(n)] = True
    try:
        a_writer = chaos.writer("A", 0, "w")
        chaos.start_readers("A")
        for r, (kind, split) in enumerate(zip(kinds, splits, strict=True), start=1):
            a_writer = chaos.round_trip(r, kind, split, rng.randint(2, size["steady_runs"]), a_writer)
        chaos.replicate(chaos.fwd)  # A->B goes on under the producer and the groups on A a moment
        time.sleep(rng.uniform(0.5, 1.5))
        a_writer.stop()
        chaos.stop_readers()
        chaos.drain()
        chaos.check_everything()
    finally:
        chaos.halt()
    fig = chaos.fig
    fig.seconds = round(time.monotonic() - began, 1)
    fig.records_a = len(chaos.ledger.of("A"))
    fig.records_b = len(chaos.ledger.of("B"))
    fig.aborted_b = len(chaos.ledger.aborted)
    fig.lost_in_flight = len(chaos.ledger.lost)
    print(f"dr chaos figures ({policy} policy): " + json.dumps(asdict(fig)))
    if os.environ.get("MIRRORFLOW_DR_CHAOS_REPORT"):
        report = Path(f"{os.environ['MIRRORFLOW_DR_CHAOS_REPORT']}.{policy}")
        report.write_text(json.dumps({"policy": policy, **asdict(fig)}, indent=2) + "\n")
    # not vacuous: records on both sides, losses of A, both categories kept, groups moved both ways
    assert fig.records_a and fig.records_b and fig.aborted_b
    assert fig.kills >= (n > 1) and fig.group_moves == 2 * n
    assert fig.split_brain > 0 and fig.copied_back > 0
