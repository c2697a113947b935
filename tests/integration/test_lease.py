"""One run of a flow at a time (state.lease): a second run stops at once naming the holder, a
crashed holder's lease expires, and two runs started together copy every record once."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.errors import LeaseError
from mirrorflow.observe.status import flow_status
from mirrorflow.replication.run.runner import run_once, take_lease
from mirrorflow.state.lease import current_holder
from tests.integration.replicate_helpers import assert_copied, make_flow, mirror_topic
from tests.integration.test_replicate import cli, records
from tests.support import consume_all, produce


def test_a_second_run_stops_at_once_naming_the_holder(tmp_path, source, target, unique):
    pfx = unique("lease")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 2)
    produce(source, t, records(50, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"lease.timeout.seconds": 120})
    with FlowClients(cfg, flow) as clients:
        held = take_lease(clients, "test-holder", "the test holding the lease")
        assert current_holder(clients).who == "the test holding the lease"
        running = flow_status(cfg, flow).running
        assert running is not None and running.startswith("the test holding the lease since 20")
        proc = cli(cfg, "replicate", "--flow", "A->B", "--once", "--mode", "direct", check=False)
        assert proc.returncode == 75, proc.stderr
        assert "flow A->B is being replicated by the test holding the lease since 20" in proc.stderr
        assert consume_all(target, f"A.{t}") == []
        held.release()
        assert current_holder(clients) is None
        assert flow_status(cfg, flow).running is None
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 50, rep.render()
    assert_copied(source, target, t)
    with FlowClients(cfg, flow) as clients:
        assert current_holder(clients) is None  # the run released its lease


HOLD = """
import sys, time
from mirrorflow import config
from mirrorflow.clients import FlowClients
from mirrorflow.replication.run.runner import take_lease
cfg = config.load(sys.argv[1])
with FlowClients(cfg, cfg.flow("A->B")) as clients:
    take_lease(clients, "crashing-holder", "a run that will crash").start_renewing()
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_crashed_holders_lease_expires(tmp_path, source, target, unique):
    pfx = unique("lease")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(20, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"lease.timeout.seconds": 4})
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(cfg.path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        time.sleep(5)  # longer than the ttl: only renewals keep the lease
        with pytest.raises(LeaseError, match="being replicated by a run that will crash"):
            run_once(cfg, flow, mode="direct")
    finally:
        holder.kill()  # SIGKILL: no release
        holder.wait()
    killed = time.monotonic()
    with pytest.raises(LeaseError, match="a run that will crash"):
        run_once(cfg, flow, mode="direct")
    while time.monotonic() - killed < 4.5:
        time.sleep(0.5)
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 20, rep.render()
    assert_copied(source, target, t)


HOLD_LOCAL = HOLD.replace(
    '"crashing-holder", "a run that will crash"', '*local_owner("a CLI run that will crash")'
).replace("import take_lease", "import take_lease\nfrom mirrorflow.state.lease import local_owner")


def test_a_killed_cli_runs_lease_is_taken_at_once_a_living_ones_is_not(tmp_path, source, target, unique):
    """A CLI run SIGKILLed (an OOM kill) holding a 120 s lease: its process is provably gone (same
    host, kernel and pid namespace), so the next run breaks the lease at once instead of waiting
    out lease.timeout.seconds. While the holder lives, the lease is never broken."""
    pfx = unique("lease")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 2)
    produce(source, t, records(300, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"lease.timeout.seconds": 120,
                                                            "transaction.max.records": 50})
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCAL, str(cfg.path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = cli(cfg, "replicate", "--flow", "A->B", "--once", "--mode", "direct", check=False)
        assert proc.returncode == 75, proc.stderr[-2000:]  # alive: refused, never broken
        assert "being replicated by a CLI run that will crash" in proc.stderr
    finally:
        holder.kill()
        holder.wait()
    # a run killed mid-copy (SIGKILL after its first committed batch) holds the lease for 120 s
    crashed = cli(cfg, "replicate", "--flow", "A->B", "--once", "--mode", "direct",
                  env={"MIRRORFLOW_TEST_CRASH": "after_commit:50"}, check=False)
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    with FlowClients(cfg, flow) as clients:
        held = current_holder(clients)
        assert held is not None and held.who.startswith("mirrorflow replicate --mode direct by ")
    again = cli(cfg, "replicate", "--flow", "A->B", "--once", "--mode", "direct", check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "its process no longer exists on this host: breaking its lease" in again.stderr
    assert_copied(source, target, t)


def test_two_runs_started_together_copy_every_record_once(tmp_path, source, target, unique):
    pfx = unique("lease")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 2)
    produce(source, t, records(20_000, 2))
    # a lease that cannot lapse between two renewals on a loaded machine (make_flow's is 1 s)
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"exactly.once": False, "transaction.max.records": 500,
                                                            "lease.timeout.seconds": 30})
    start = threading.Barrier(2)
    outcomes: list[object] = []

    def run() -> None:
        start.wait()
        try:
            outcomes.append(run_once(cfg, flow, mode="direct"))
        except LeaseError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    errors = [o for o in outcomes if isinstance(o, LeaseError)]
    reports = [o for o in outcomes if not isinstance(o, LeaseError)]
    assert len(outcomes) == 2 and all(r.ok for r in reports), outcomes
    if errors:  # the runs overlapped: the second was refused, naming the first
        assert "flow A->B is being replicated by mirrorflow replicate --mode direct by " in str(errors[0])
    # else one ended before the other began (a thread late on a loaded machine: the copy takes < 1 s);
    # either way one run copied every record and no run copied one twice
    assert sorted(r.records for r in reports) in ([20_000], [0, 20_000]), outcomes
    assert_copied(source, target, t)  # at-least-once mode, yet no record twice


def test_a_run_taken_over_copies_nothing_more_and_never_gets_the_lease_back(tmp_path, source, target, unique):
    """A take-over (a failover's --take-over) between a run's plan and its copy: every unit, once it
    has fenced its partition, finds its run no longer holds the lease and stops (fenced), copying
    nothing; the run's claims never count again, even once the lease is free."""
    from mirrorflow.replication.run.run import ReplicationRun
    from mirrorflow.replication.run.runner import copy_direct
    from mirrorflow.state.lease import FlowLease

    pfx = unique("lease")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 2)
    produce(source, t, records(30, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"lease.timeout.seconds": 120})
    with FlowClients(cfg, flow) as clients:
        old = take_lease(clients, "old-run", "the run taken over")
        run = ReplicationRun(cfg, flow, owner="old-run", who="the run taken over", lease=old)
        run.make_plan(clients)
        new = FlowLease(clients, "failover", "the failover")
        assert new.take_over().owner == "old-run"
        new.release()
        results = copy_direct(cfg, flow, run.plan)
        assert {r["status"] for r in results} == {"fenced"} and len(results) == 2, results
        assert all("this run no longer holds the flow's lease: it copies nothing more" in r["error"] for r in results)
        assert consume_all(target, f"A.{t}") == []
        with pytest.raises(LeaseError, match="lease not taken"):
            FlowLease(clients, "old-run", "the run taken over").acquire()
        assert current_holder(clients) is None
    rep = run_once(cfg, flow, mode="direct")  # any other run takes the flow as usual
    assert rep.ok and rep.records == 30, rep.render()


class TakeOverAfterCommit:
    """Faults hook: after the copy's second commit another run takes the flow's lease (as a run after
    a lapse does, without fencing the old one's copies), then the old task goes on past the interval
    at which a task asks, before a round, whether its run still holds the lease."""

    def __init__(self, cfg, flow) -> None:
        self.cfg, self.flow, self.commits, self.took = cfg, flow, 0, False

    def reached(self, point: str, n: int = 0) -> None:
        from mirrorflow.replication.task.task_succession import GUARD_EVERY_S
        from mirrorflow.state.lease import FlowLease

        if point != "after_commit":
            return
        self.commits += 1
        if self.commits == 2:
            with FlowClients(self.cfg, self.flow) as clients:
                assert FlowLease(clients, "next-run", "the next run").take_over() is not None
            self.took = True
            time.sleep(GUARD_EVERY_S + 0.5)


@pytest.mark.parametrize("eos", [True, False], ids=["exactly-once", "at-least-once"])
def test_a_run_whose_lease_was_taken_mid_copy_commits_nothing_more(tmp_path, source, target, unique, monkeypatch, eos):
    """A run copying in rounds of 50 loses its lease after its second commit, to a run that did not
    fence it (idempotent producers cannot be fenced at all): it writes no record of its next round
    and every partition ends `fenced`, naming the new holder; the target holds the two rounds,
    nothing more (the run used to go on committing until its last round)."""
    from mirrorflow.replication.executors import copy_modes

    pfx = unique("leaselost")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 1)
    produce(source, t, records(300, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{
        "lease.timeout.seconds": 120, "transaction.max.records": 50, "tasks.max": 1, "exactly.once": eos,
        "state.namespace": pfx})  # its own lease: the next run's holds this one's for 120 s
    hook = TakeOverAfterCommit(cfg, flow)
    monkeypatch.setattr(copy_modes, "faults_from_env", lambda: hook)
    rep = run_once(cfg, flow, mode="direct")
    assert hook.took and hook.commits == 2, hook.commits
    [part] = rep.partitions
    assert part.status == "fenced" and part.records == 100 and rep.fenced_units == 1, rep.render()
    assert any("this run no longer holds the flow's lease (the next run holds it since" in e
               for e in part.errors), rep.render()
    assert len(consume_all(target, remote)) == 100
