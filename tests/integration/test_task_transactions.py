"""One transaction per copy task, on real brokers: many partitions per transaction, one producer per
task slot kept across runs, and fencing that stays exact for every partition: a zombie of an older
run, a retried attempt of the same run, a layout change while a zombie of the old layout lives, a
record or a batch too large for the target."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.replication.task.copy_transaction import Claim
from mirrorflow.replication.task.faults import NO_FAULTS
from mirrorflow.replication.plan.planner import gather_inputs
from mirrorflow.replication.plan.run_plan import Unit
from mirrorflow.replication.run.runner import run_once, take_lease
from mirrorflow.replication.task.task_attempt import TaskAttempt
from mirrorflow.replication.task.task_copier import copy_task
from mirrorflow.replication.task.task_producer import CACHE
from mirrorflow.replication.task.task_succession import TaskSuccession
from mirrorflow.state.fencing import open_transactions
from mirrorflow.state.state_topics import ensure_state_topics
from mirrorflow.state.names import offset_map_topic, progress_topic
from mirrorflow.state.task_slots import claim_key, key_partition, read_layout
from tests.integration.test_broker_restart import high_watermark
from tests.integration.replicate_helpers import assert_copied, assert_map_exact, make_flow, mirror_topic
from tests.integration.test_replicate import _PauseAt as PauseAt
from tests.integration.test_replicate import records
from tests.support import consume_all, markers_written, produce, read_progress, write_config

pytestmark = pytest.mark.integration


class Count:
    """Faults seam: counts the commits a task makes (and the records in each)."""

    def __init__(self) -> None:
        self.commits: list[int] = []

    def reached(self, point: str, n: int = 0) -> None:
        if point == "before_commit":
            self.commits.append(n)


def planned(cfg, flow):
    """The flow's task (layout, slot, units) per slot, as a plan would cut them now."""
    with FlowClients(cfg, flow) as clients:
        ensure_state_topics(clients)
        inputs = gather_inputs(clients)
    return inputs


def test_a_task_commits_many_partitions_in_one_transaction_with_one_producer_kept_across_runs(
        tmp_path, source, target, unique):
    pfx = unique("onetxn")
    t = f"{pfx}.quiet"
    mirror_topic(source, target, t, 24)
    produce(source, t, [{"partition": p, "key": b"k", "value": f"first-{p}".encode()} for p in range(24)])
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 1, "task.partitions.in.flight": 4})
    inputs = planned(cfg, flow)
    units = [Unit(t, p, f"A.{t}", 0, 1) for p in range(24)]
    CACHE.clear()
    count = Count()
    with FlowClients(cfg, flow) as clients:
        results = copy_task(clients, inputs.layout, 0, units, TaskAttempt(faults=count))
    assert [r.status for r in results] == ["ok"] * 24 and sum(r.records for r in results) == 24
    assert count.commits == [24]  # 24 partitions, one record each: ONE transaction
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 24)
    (kept,) = [sp for _, sp in CACHE._idle.values()]  # the slot's producer, kept for the next run
    assert kept.transactional_id == inputs.layout.transactional_id(flow, 0) == (
        f"mirrorflow-{flow.client_name}-task/g{inputs.layout.generation}/0")

    produce(source, t, [{"partition": p, "key": b"k", "value": f"second-{p}".encode()} for p in range(0, 24, 2)])
    count = Count()
    with FlowClients(cfg, flow) as clients:
        again = copy_task(clients, inputs.layout, 0, [Unit(t, p, f"A.{t}", 1, 2) for p in range(0, 24, 2)],
                          TaskAttempt(faults=count))
    assert sum(r.records for r in again) == 12 and count.commits == [12]
    assert [sp for _, sp in CACHE._idle.values()] == [kept]  # the same producer: no init_transactions
    assert not kept.fresh
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 24)


def test_a_zombie_of_an_older_run_never_commits_after_a_newer_run_took_its_partitions(tmp_path, source, target,
                                                                                    unique):
    """The newer run's task takes the slot's producer from the cache, whose epoch is OLDER than the
    zombie's (the zombie initialised the slot afresh after it): establishing its epoch fails as
    fenced, its run holds the lease, no newer attempt of its run claimed the slot, so it
    re-initialises -- fencing the zombie -- and copies the rest; the zombie's commit then fails,
    and the zombie never re-initialises (its run lost the lease)."""
    pfx = unique("zombie")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 2)
    produce(source, t, records(2000, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{
        "tasks.max": 1, "transaction.max.records": 100, "task.partitions.in.flight": 2, "lease.timeout.seconds": 120})
    inputs = planned(cfg, flow)
    layout = inputs.layout
    CACHE.clear()
    # an earlier run leaves the slot's producer in the cache (epoch e0)
    with FlowClients(cfg, flow) as clients:
        first = copy_task(clients, layout, 0, [Unit(t, p, f"A.{t}", 0, 100) for p in range(2)])
    assert sum(r.records for r in first) == 200
    stale = dict(CACHE._idle)
    CACHE.clear()  # the zombie's worker has none: it initialises afresh (epoch e1 > e0)
    units = [Unit(t, p, f"A.{t}", 100, 1000) for p in range(2)]
    pause = PauseAt(commits=3)
    # owners of this test only: the flows on the session's clusters share the lease topic, where another
    # test's take-over fences its owner for good (test_lease.py takes over an "old-run")
    old_run, new_run = f"old-run-{pfx}", f"new-run-{pfx}"
    with FlowClients(cfg, flow) as clients, ThreadPoolExecutor(1) as pool:
        old = take_lease(clients, old_run, "the older run")
        zombie = pool.submit(lambda: _copy(cfg, flow, layout, units, pause, old_run))
        assert pause.paused.wait(120), zombie.result() if zombie.done() else "the zombie never reached its commit"
        old.stop_renewing()  # the old run is gone; a newer run takes the flow
        CACHE._idle.update(stale)  # the newer run's worker has the slot's older producer
        new = take_lease_when_free(clients, new_run, old_run)
        try:
            newer = _copy(cfg, flow, layout, units, NO_FAULTS, new_run)
        finally:
            pause.go.set()
            new.release()
        older = zombie.result()
    assert {r.status for r in newer} == {"ok"}, [(r.status, r.error) for r in newer]
    assert {r.status for r in older} == {"fenced"}, [(r.status, r.error) for r in older]
    # fenced by the newer run's producer (or, its transaction held open past transaction.timeout.ms on
    # a loaded machine, found to have lost the lease before it would initialise the slot again)
    assert all(f"fenced by another attempt (transactional.id {layout.transactional_id(flow, 0)}); it owns this "
               "partition now" in r.error or "this run no longer holds the flow's lease" in r.error for r in older)
    # the zombie's two committed transactions count, the newer run copied the rest: each record once
    assert sum(r.records for r in older) + sum(r.records for r in newer) == 1800
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 2)


def test_a_task_of_a_run_that_lost_the_lease_writes_nothing_not_even_its_claim(tmp_path, source, target, unique):
    """A copy task of a run whose lapsed lease a failover took starts only after the failover fenced
    the slot (a Spark task scheduled late; a run cut off from the target while the failover ran, as the
    model-based search found): its producer is new, so the fencing does not reach it. It asks whether
    its run holds the lease after its epoch and before it writes anything: it ends fenced, naming the
    holder, and the target's topic, progress and offset map are as the failover left them (it used to
    commit its claim first)."""
    pfx = unique("lateclaim")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 2)
    produce(source, t, records(200, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{
        "tasks.max": 1, "lease.timeout.seconds": 2, "state.namespace": pfx})
    watched = {name: 2 for name in [remote, progress_topic(flow), offset_map_topic(flow)]}
    late, before, after = copy_after_a_failover_took_the_lease(
        cfg, flow, pfx, [Unit(t, p, f"A.{t}", 0, 100) for p in range(2)], target, watched)
    assert {r.status for r in late} == {"fenced"}, [(r.status, r.error) for r in late]
    assert all("this run no longer holds the flow's lease (mirrorflow failover holds it since " in r.error
               for r in late), [r.error for r in late]
    assert after == before  # not a claim, not an aborted record: nothing


def copy_after_a_failover_took_the_lease(cfg, flow, pfx, units, target, watched):
    """A late copy task of `units` (slot 0) of a run whose lapsed lease a failover took (the failover's lease
    fences the flow's copies; the task's worker has no producer of the slot: it initialises afresh): its
    results, and the summed high watermarks of `watched` (topic -> partitions) on the target before and after."""
    layout = planned(cfg, flow).layout
    old_run = f"old-run-{pfx}"
    with FlowClients(cfg, flow) as clients:
        old = take_lease(clients, old_run, "the older run")
        old.stop_renewing()  # cut off: its renewals never arrive
        time.sleep(3)  # its lease lapses
        taker = take_lease(clients, f"failover-{pfx}", "mirrorflow failover")  # fences the flow's copies
        try:
            before = {name: high_watermark(target, name, n) for name, n in watched.items()}
            CACHE.clear()
            late = _copy(cfg, flow, layout, units, NO_FAULTS, old_run)
            after = {name: high_watermark(target, name, n) for name, n in watched.items()}
        finally:
            taker.release()
    return late, before, after


def _copy(cfg, flow, layout, units, faults, owner, attempt=0):
    with FlowClients(cfg, flow) as clients:
        return copy_task(clients, layout, 0, units, TaskAttempt(owner=owner, number=attempt, faults=faults))


def take_lease_when_free(clients, owner, old_run):
    import time

    from mirrorflow.errors import LeaseError
    from mirrorflow.state.lease import FlowLease

    deadline = time.monotonic() + 60
    while True:
        try:
            return FlowLease(clients, owner, owner, ttl_s=120).acquire()
        except LeaseError:
            assert time.monotonic() < deadline
            # the old run's lease: released as its process would be found gone
            FlowLease(clients, old_run, "the older run").release()


def test_a_retried_attempt_of_the_same_run_wins_over_the_zombie_attempt(tmp_path, source, target, unique):
    """Spark retries a task (attempt 1) while attempt 0 still lives. Attempt 1 claimed the slot;
    attempt 0, starting late with a cached producer that attempt 1's init fenced, finds the newer
    attempt's claim and stops fenced without re-initialising (which would fence attempt 1)."""
    pfx = unique("retry")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(300, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 1, "lease.timeout.seconds": 120})
    layout = planned(cfg, flow).layout
    CACHE.clear()
    with FlowClients(cfg, flow) as clients:  # a producer of the slot in attempt 0's worker (older epoch)
        copy_task(clients, layout, 0, [Unit(t, 0, f"A.{t}", 0, 100)])
    stale = dict(CACHE._idle)
    CACHE.clear()
    units = [Unit(t, 0, f"A.{t}", 100, 300)]
    with FlowClients(cfg, flow) as clients:
        lease = take_lease(clients, "run-1", "the run")
        try:
            retried = _copy(cfg, flow, layout, units, NO_FAULTS, "run-1", attempt=1)  # fresh producer, newer epoch
            CACHE._idle.update(stale)
            late = _copy(cfg, flow, layout, units, NO_FAULTS, "run-1", attempt=0)
        finally:
            lease.release()
    assert [(r.status, r.records) for r in retried] == [("ok", 200)]
    assert [(r.status, r.records) for r in late] == [("fenced", 0)], [(r.status, r.error) for r in late]
    assert_copied(source, target, t)


def test_what_the_slot_left_open_on_its_claims_partition_does_not_hold_back_its_zombie_check(
        tmp_path, source, target, unique):
    """An attempt that rode out a target outage asks whether a newer attempt claimed its slot before
    it initialises the slot's producer again. A SIGKILLed target can leave the slot's transaction of
    before the outage pending on the claim's partition, and only that initialisation ends it: read
    read_committed, the question waited for its own answer until broker.outage.max.seconds (a full run's
    `test_broker_restart.py::test_replicate_rides_through_a_target_restart[sigkill]` failed so, both tasks
    stopped 300 s on the progress partition). It reads uncommitted: at once, and a newer attempt's claim
    counts even before it commits; the next epoch then ends what was pending."""
    pfx = unique("openclaim")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(200, 1))
    # a read_committed read of the claim waits at most admin.timeout.ms, then fails as an outage (20 s: an
    # answer on a loaded machine takes seconds, and the bound below tells the two apart)
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 1, "admin.timeout.ms": 20000})
    layout = planned(cfg, flow).layout
    tid = layout.transactional_id(flow, 0)
    topic = progress_topic(flow)
    CACHE.clear()
    with FlowClients(cfg, flow) as clients:
        lease = take_lease(clients, "run-1", "the run")
        try:
            first = copy_task(clients, layout, 0, [Unit(t, 0, f"A.{t}", 0, 100)], TaskAttempt(owner="run-1"))
            assert [(r.status, r.records) for r in first] == [("ok", 100)]  # attempt 0's claim committed
            CACHE.clear()
            where = (topic, key_partition(claim_key(0), clients.partitions("target", topic)))
            # an epoch of the slot cut off mid-transaction: its records pending on the claim's partition
            cut = clients.producer("target", {"transaction.timeout.ms": 600_000}, {"transactional.id": tid})
            cut.init_transactions(30)
            cut.begin_transaction()
            cut.produce(topic, b"pending", b"a round's record", partition=where[1])
            cut.flush(30)
            assert open_transactions(clients, [where]) == [where]
            asked = time.monotonic()
            assert TaskSuccession(clients, "run-1", 1, 0, tid).superseded() is None
            assert time.monotonic() - asked < 15  # not the read's timeout (20 s): an answer
            # a newer attempt's claim, not committed yet: attempt 1 is the zombie
            cut.produce(topic, Claim("run-1", 2).to_json(), claim_key(0), partition=where[1])
            cut.flush(30)
            why = TaskSuccession(clients, "run-1", 1, 0, tid).superseded()
            assert why is not None and why.startswith("fenced by attempt 2 of the same run"), why
            # the next epoch (attempt 3) fences the cut one, ends what it left pending and copies on
            rest = copy_task(clients, layout, 0, [Unit(t, 0, f"A.{t}", 100, 200)], TaskAttempt(owner="run-1", number=3))
            assert [(r.status, r.records) for r in rest] == [("ok", 100)], [(r.status, r.error) for r in rest]
            # nothing left pending (the last commit's markers follow its answer: waited for, up to 60 s)
            markers_written(target, topic, where[1] + 1)
        finally:
            lease.release()
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 1)


def test_a_layout_change_fences_a_zombie_of_the_old_layout(tmp_path, source, target, unique):
    """tasks.max changes while a task of the old layout is paused mid-transaction: the next run
    fences every id of the old generation before it records the new one, so the zombie's commit
    fails and every record is on the target once."""
    pfx = unique("relayout")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 3)
    produce(source, t, records(1500, 3))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 1, "transaction.max.records": 100})
    old = planned(cfg, flow).layout
    pause = PauseAt(commits=2)
    units = [Unit(t, p, f"A.{t}", 0, 500) for p in range(3)]
    with ThreadPoolExecutor(1) as pool:
        zombie = pool.submit(lambda: _copy(cfg, flow, old, units, pause, None))
        assert pause.paused.wait(120), zombie.result() if zombie.done() else "the zombie never reached its commit"
        try:
            cfg3, flow3 = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 3, "transaction.max.records": 100})
            rep = run_once(cfg3, flow3, mode="direct")
        finally:
            pause.go.set()
        late = zombie.result()
    assert rep.ok, rep.render()
    with FlowClients(cfg3, flow3) as clients:
        new = read_layout(clients)
    assert (new.generation, new.slots) == (old.generation + 1, 3)
    assert {r.status for r in late} == {"fenced"}, [(r.status, r.error) for r in late]
    assert sum(r.records for r in late) + rep.records == 1500
    assert_copied(source, target, t)
    assert_map_exact(cfg3, flow3, source, target, t, 3)


def test_a_target_topic_with_a_small_max_message_bytes_gets_batches_below_it(tmp_path, source, target, unique):
    """The target topic accepts 20,000 bytes; every record has 1,000: producer batches stay below
    the topic's limit, so nothing is refused and no innocent record is blamed."""
    pfx = unique("smallmsg")
    t = f"{pfx}.lines"
    mirror_topic(source, target, t, 1, target_config={"max.message.bytes": "20000"})
    produce(source, t, [{"partition": 0, "key": f"k{i}".encode(), "value": b"v" * 1000} for i in range(400)])
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 400, rep.render()
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 1)


def test_a_record_too_large_fails_its_partition_alone_and_the_rest_of_the_transaction_commits(
        tmp_path, source, target, unique):
    pfx = unique("toolarge")
    t = f"{pfx}.mixed"
    mirror_topic(source, target, t, 2, config={"max.message.bytes": "3000000"},
                 target_config={"max.message.bytes": "200000"})
    produce(source, t, [{"partition": 0, "key": b"a", "value": b"small"},
                        {"partition": 0, "key": b"b", "value": b"x" * 600_000},
                        {"partition": 0, "key": b"c", "value": b"after"}]
            + [{"partition": 1, "key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(50)])
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 1})
    rep = run_once(cfg, flow, mode="direct")
    text = rep.render()
    assert not rep.ok and rep.failed_units == 1, text
    assert (f"record {t}[0] offset 1 (600001 bytes) is larger than target topic 'A.{t}' on cluster 'B' accepts "
            "(max.message.bytes 200000; ") in text, text
    assert "nothing from offset 0 on was marked copied" in text
    by_p = {p.partition: p for p in rep.partitions}
    assert (by_p[0].status, by_p[1].status, by_p[1].records) == ("failed", "ok", 50), text
    progress = read_progress(cfg, flow, [(t, 0), (t, 1)])
    assert (t, 0) not in progress and progress[(t, 1)].next == 50
    assert [r.partition for r in consume_all(target, f"A.{t}")] == [1] * 50
    src1 = [r.content() for r in consume_all(source, t) if r.partition == 1]
    assert [r.content() for r in consume_all(target, f"A.{t}")] == src1


def ran_before_slots(tmp_path, source, target, alias: str, pfx: str, partitions: tuple[int, int], n: int):
    """A flow `alias`->B over `pfx`.orders (`partitions`: on the source, on the target) that ran before task
    slots: progress of partition 0 on the target, no layout record. (cfg, flow, topic, progress partitions)."""
    from confluent_kafka import Producer

    from mirrorflow.state.names import progress_topic
    from mirrorflow.state.records import Progress
    from mirrorflow.state.state_topics import state_key, state_partition
    from tests.support import create_topic

    t = f"{pfx}.orders"
    cfg = write_config(tmp_path / "mf.yaml", {alias: source, "B": target},
                       {f"{alias}->B": {"topics": f"{pfx}\\..*", "state.topic.partitions": 2,
                                        "heartbeats.replication.enabled": False, "tasks.max": 2}})
    flow = cfg.flow(f"{alias}->B")
    create_topic(source, t, partitions[0])
    create_topic(target, f"{alias}.{t}", partitions[1])
    produce(source, t, records(n, partitions[0]))
    with FlowClients(cfg, flow) as clients:
        ensure_state_topics(clients)
        nprog = clients.partitions("target", progress_topic(flow))
    written = Producer({**target.client_config(), "enable.idempotence": True, "acks": "all"})
    written.produce(progress_topic(flow), Progress(t, 0, 0, (), -1).to_json(), state_key(t, 0),
                    state_partition(t, 0, nprog))
    assert written.flush(30) == 0  # each partition had its own transactional.id then
    return cfg, flow, t, nprog


def test_a_flow_copied_per_partition_before_slots_has_those_ids_fenced_once(tmp_path, source, target, unique):
    """A flow that ran before task slots (progress on the target, no layout record) with a copy of
    that version still holding a transaction open: the first run with slots fences every partition's
    old per-partition transactional.id, ends its transaction, and records the first generation."""
    from confluent_kafka import Producer

    from mirrorflow.state.names import progress_topic, transactional_id
    from mirrorflow.state.state_topics import state_key, state_partition

    cfg, flow, t, n = ran_before_slots(tmp_path, source, target, "KU", unique("upgrade"), (2, 2), 40)
    old = Producer({**target.client_config(), "transactional.id": transactional_id(flow, t, 1),
                    "transaction.timeout.ms": 600000})
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(f"KU.{t}", b"from-the-old-version", b"k", 1)
    old.produce(progress_topic(flow), b"half-written", state_key(t, 1), state_partition(t, 1, n))
    assert old.flush(30) == 0
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 40, rep.render()
    with pytest.raises(Exception):  # fenced by the first run with task slots: it can commit nothing now
        old.commit_transaction(30)
    with FlowClients(cfg, flow) as clients:
        layout = read_layout(clients)
    assert (layout.generation, layout.slots) == (1, 2)
    assert [r.content() for r in consume_all(target, f"KU.{t}")] == [r.content() for r in consume_all(source, t)]
    # init_transactions alone aborted the old version's open transaction: no aborted record of mirrorflow's
    # own (state.fencing.abort_pending) landed in the application's topic, not even on partition 1
    raw = consume_all(target, f"KU.{t}", isolation="read_uncommitted")
    assert [r for r in raw if r.key == b"mirrorflow-aborted"] == []
    assert [r.value for r in raw if r.partition == 1 and r.value == b"from-the-old-version"]  # what it aborted


def test_a_partition_added_on_the_source_and_not_synced_yet_does_not_stop_the_fencing(tmp_path, source, target, unique):
    """The first run with task slots of a flow that ran before them fences each partition's old id over its
    target partition; a source partition added since (the target has no such partition until the next sync)
    holds nothing pending there: the fencing goes on (it used to fail the whole run with "Local: Unknown
    partition" when the fencing producer knew the topic already: found by the model's `--long` search; the next
    test holds that path), the partitions the target has are copied, and the new one waits for the sync,
    named, its 10 records counted as lag."""
    # the target synced before partition 2 was added on the source
    cfg, flow, t, _ = ran_before_slots(tmp_path, source, target, "KN", unique("added"), (3, 2), 30)
    rep = run_once(cfg, flow, mode="direct")
    by_part = {(p.topic, p.partition): p for p in rep.partitions}
    assert [by_part[(t, q)].status for q in range(3)] == ["ok", "ok", "waiting"], rep.render()
    assert by_part[(t, 2)].errors == [f"waiting for sync: target topic 'KN.{t}' has 2 partitions (the sync DAG or "
                                      "`mirrorflow sync --flow KN->B` creates it)"]
    assert by_part[(t, 2)].lag == 10 and rep.lag == 10
    with FlowClients(cfg, flow) as clients:
        assert read_layout(clients).generation == 1
    src = [r.content() for r in consume_all(source, t) if r.partition < 2]
    assert [r.content() for r in consume_all(target, f"KN.{t}")] == src


def test_the_aborting_transaction_skips_a_partition_the_target_lacks_and_reaches_one_added_since(target, unique):
    """state.fencing.abort_pending with a producer whose metadata knows the topic at 2 partitions: a
    partition the target does not have is skipped (nothing can be pending there), one added since the
    producer last asked gets its abort marker (the producer asks again), and the transaction ends aborted."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions

    from mirrorflow.state.fencing import ABORTED_VALUE, abort_pending
    from tests.support import create_topic

    t = unique("abort") + ".orders"
    create_topic(target, t, 2)
    pr = Producer({**target.client_config(), "transactional.id": f"{t}-fence"})
    pr.init_transactions(30)
    pr.begin_transaction()
    pr.produce(t, b"v", b"k", 0)  # the producer's metadata: 2 partitions
    pr.commit_transaction(30)
    admin = AdminClient(target.client_config())
    admin.create_partitions([NewPartitions(t, 3)])[t].result(30)
    # the broker shows the new partition a moment after the answer (KRaft, a loaded machine): until then it
    # does not exist for anyone, and nothing can be pending there; the producer's own metadata stays stale
    deadline = time.monotonic() + 60
    while len(admin.list_topics(t, timeout=10).topics[t].partitions) < 3:
        assert time.monotonic() < deadline, "the target never showed the third partition"
        time.sleep(0.1)
    abort_pending(pr, [(t, 0), (t, 2), (t, 5)], lambda: pr.abort_transaction(30), "test", "B")
    markers_written(target, t, 3)  # the abort's markers follow its answer
    raw = consume_all(target, t, isolation="read_uncommitted")
    assert sorted((r.partition, r.key) for r in raw) == [(0, b"k"), (0, ABORTED_VALUE), (2, ABORTED_VALUE)]
    assert [r.value for r in consume_all(target, t)] == [b"v"]  # read_committed: the aborted markers are not seen


def test_a_task_of_a_run_that_lost_the_lease_anchors_nothing(tmp_path, source, target, unique):
    """The same late task with a fresh empty partition among its units (planned to be anchored: its first
    progress and offset-map entry, written without a transaction, which nothing fences): it asks whether
    its run holds the lease before anchoring, ends fenced for every unit, and the target's topics, progress
    and offset map are as the failover left them. It wrote the anchor after the failover before (found by
    the model-based search: a run cut off from the target while the flow failed over, then healed)."""
    from tests.support import admin

    pfx = unique("lateanchor")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 3)
    produce(source, t, records(200, 2))  # partitions 0 and 1; partition 2 stays empty
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{
        "tasks.max": 1, "lease.timeout.seconds": 2, "state.namespace": pfx})
    names = [remote, progress_topic(flow), offset_map_topic(flow)]
    watched = {n: len(admin(target).list_topics(n, timeout=10).topics[n].partitions) for n in names}
    units = [Unit(t, 0, remote, 0, 100), Unit(t, 1, remote, 0, 100), Unit(t, 2, remote, 0, 0)]
    late, before, after = copy_after_a_failover_took_the_lease(cfg, flow, pfx, units, target, watched)
    assert [(r.partition, r.status) for r in late] == [(0, "fenced"), (1, "fenced"), (2, "fenced")], \
        [(r.partition, r.status, r.error) for r in late]
    assert all("this run no longer holds the flow's lease (mirrorflow failover holds it since " in r.error
               for r in late), [r.error for r in late]
    assert after == before  # no anchor, no claim, no record
