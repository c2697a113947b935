"""The collector's thresholds while copy tasks copy (replication.task.collector): set by the first task to
start, put back by the last to end, whichever thread each runs on."""

from __future__ import annotations

import gc
import threading

from mirrorflow.replication.task.collector import COPYING_THRESHOLDS, fewer_collections


def test_tasks_side_by_side_relax_the_collector_until_the_last_ends():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
        seen: dict[str, tuple[int, ...]] = {}

        def first():
            with fewer_collections():
                first_in.set()
                second_in.wait(10)
                seen["first, both copying"] = gc.get_threshold()
            first_out.set()

        def second():
            first_in.wait(10)
            with fewer_collections():
                second_in.set()
                first_out.wait(10)
                seen["second, after the first ended"] = gc.get_threshold()
            seen["after both"] = gc.get_threshold()

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert seen == {
            "first, both copying": COPYING_THRESHOLDS,
            "second, after the first ended": COPYING_THRESHOLDS,
            "after both": (700, 10, 10),
        }
    finally:
        gc.set_threshold(*before)


def test_a_task_that_fails_puts_the_thresholds_back():
    before = gc.get_threshold()
    try:
        with fewer_collections():
            assert gc.get_threshold() == COPYING_THRESHOLDS
            raise RuntimeError("the copy failed")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
