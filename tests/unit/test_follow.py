"""Continuous runs without brokers: a followed range (end OPEN_END) opens a batch only with a record,
commits what is there at an idle poll or after batch_s, ends with what it read when told to stop;
the stop watch's deadline and stop file."""

from __future__ import annotations

import time
from types import SimpleNamespace

from mirrorflow.replication.task.follow import FollowSpec, StopWatch
from mirrorflow.replication.task.reader import OPEN_END, Follow, RangeReader
from tests.unit.test_copier import NO_LIMITS, FakeConsumer, msg, read

LOG = [msg(o) for o in (0, 1, 2, 3, 4, 10, 11, 12)]  # 5..9: markers / aborted records


def reader(consumer: FakeConsumer, stop, batch_s: float = 60.0) -> RangeReader:
    return RangeReader(consumer, "t", 0, NO_LIMITS, follow=Follow(stop, batch_s))


def test_a_followed_range_commits_what_is_there_at_an_idle_poll_and_ends_when_told():
    c = FakeConsumer(LOG, per_poll=3)
    r = reader(c, lambda: c.i >= len(LOG) and c.polls >= 6)
    # one batch: everything up to the first idle poll; then no batch while idle, until the stop
    assert read(r, 0, OPEN_END) == [(0, 13, [0, 1, 2, 3, 4, 10, 11, 12], "time")]


def test_a_stop_while_records_flow_ends_the_batch_after_what_was_read():
    c = FakeConsumer(LOG, per_poll=3)
    r = reader(c, lambda: c.i >= 5)
    # the batch ends at the last record read (never at OPEN_END): the next run continues at 11
    assert read(r, 0, OPEN_END) == [(0, 11, [0, 1, 2, 3, 4, 10], "stop")]


def test_an_idle_partition_opens_no_batch():
    c = FakeConsumer([], end=0)
    r = reader(c, lambda: c.polls >= 3)
    assert read(r, 7, OPEN_END) == []


def test_batches_commit_at_least_every_batch_s():
    c = FakeConsumer(LOG[:3], per_poll=3)
    r = reader(c, lambda: c.i >= 3 and c.polls >= 3, batch_s=0.0)
    assert read(r, 0, OPEN_END) == [(0, 1, [0], "time"), (1, 2, [1], "time"), (2, 3, [2], "time")]


def test_a_bounded_range_is_read_as_before_when_following():
    c = FakeConsumer(LOG, per_poll=3)
    r = reader(c, lambda: True)  # the stop applies only to followed (open) ranges
    assert read(r, 0, 5) == [(0, 5, [0, 1, 2, 3, 4], "range")]


def test_stop_watch_deadline_and_stop_file(tmp_path):
    clients = SimpleNamespace(flow=SimpleNamespace(name="C->B"), admin_timeout=5)
    past = StopWatch(clients, FollowSpec(3600, 200, 3600.0, deadline=time.time() - 1))
    assert past() and past.why_stopped() is None  # the deadline: the run followed its whole window
    stop_file = tmp_path / "stop"
    spec = FollowSpec(3600, 200, 3600.0, str(stop_file))
    assert FollowSpec.from_dict(spec.to_dict()) == spec
    watch = StopWatch(clients, spec).start()
    try:
        assert not watch()
        stop_file.touch()
        for _ in range(100):
            if watch():
                break
            time.sleep(0.05)
        assert watch() and watch.reason == "flow C->B: stop requested (SIGTERM or SIGINT to the run)"
        assert watch.why_stopped() == watch.reason  # before the deadline: the report says why
    finally:
        watch.close()


def test_the_window_counts_from_when_the_copy_starts_not_from_the_plan():
    """A continuous plan carries how long to follow; the deadline is set when the copy hands out its
    tasks (Plan.head), once, so a copy that starts late still follows for its whole window and every
    task of the run stops together."""
    from mirrorflow.replication.plan.run_plan import Plan

    plan = Plan("C->B", None, [], follow=FollowSpec(45, 100, 1.0))
    plan = Plan.from_dict(plan.to_dict())  # through XCom / the plan file: still no deadline
    assert plan.follow == FollowSpec(45, 100, 1.0)
    before = time.time()
    head = plan.head()
    assert head.follow is not None and before + 45 <= head.follow.deadline <= time.time() + 45
    assert head.follow.started(time.time() + 100) == head.follow  # a later task keeps the run's deadline
    # a plan an earlier release wrote (a deadline, no seconds) keeps its deadline
    old = FollowSpec.from_dict({"deadline": before + 5, "batch_ms": 100, "check_s": 1.0, "stop_file": None})
    assert old.started(time.time() + 100).deadline == before + 5
