"""The recovery point objective's verdict (observe.rpo.evaluate: pure) and when a notifier is told."""
from __future__ import annotations

from mirrorflow.observe.rpo import NOTHING_PENDING, RpoVerdict, evaluate, notify_due
from mirrorflow.observe.status import PartitionStatus

NOW = 1_800_000_000_000


def part(topic: str, partition: int, next_: int, end: int, stopped: bool = False, last_ts: int = -1):
    return PartitionStatus(topic, partition, next_, end, 0, 0, stopped=stopped, last_timestamp=last_ts)


def test_the_oldest_unreplicated_record_of_the_worst_partition_decides():
    parts = [part("orders", 0, 10, 10), part("orders", 1, 5, 9), part("audit", 0, 3, 4)]
    pending = {("orders", 1): NOW - 412_000, ("audit", 0): NOW - 20_000}
    v = evaluate("A->B", 300, parts, pending, NOW)
    assert (v.state, v.age_s, v.worst, v.unknown) == ("missed", 412.0, "orders[1]", ())
    assert v.line() == "RPO 300 s missed: oldest unreplicated record 412 s old (orders[1])"
    within = evaluate("A->B", 500, parts, pending, NOW)
    assert (within.state, within.missed) == ("met", False)
    assert within.line() == "RPO 500 s met: oldest unreplicated record 412 s old (orders[1])"
    # exactly at the objective is within it
    assert evaluate("A->B", 412, parts, pending, NOW).state == "met"


def test_not_the_newest_copied_record_a_quiet_partition_has_a_young_backlog():
    """A record copied an hour ago, one new record 2 s old: the objective is met (the status's
    lag_seconds, the age of the newest copied record, would say 3600 s)."""
    p = part("orders", 0, 7, 8, last_ts=NOW - 3_600_000)
    assert p.lag_seconds(NOW) == 3600.0
    v = evaluate("A->B", 60, [p], {("orders", 0): NOW - 2_000}, NOW)
    assert (v.state, v.age_s) == ("met", 2.0)


def test_caught_up_markers_only_and_no_partitions_are_met():
    assert evaluate("A->B", 60, [part("t", 0, 4, 4)], {}, NOW).line() == "RPO 60 s met: nothing waits to be replicated"
    # offsets left, but only transaction markers / aborted records: nothing waits
    assert evaluate("A->B", 60, [part("t", 0, 4, 6)], {("t", 0): NOTHING_PENDING}, NOW).age_s == 0.0
    assert evaluate("A->B", 60, [], {}, NOW).state == "met"


def test_unknown_is_never_guessed_but_a_known_miss_is_a_miss():
    stopped = part("t", 0, 4, 9, stopped=True)
    unread = part("t", 1, 0, 5)
    v = evaluate("A->B", 60, [stopped, unread, part("t", 2, 1, 1)], {}, NOW, why_unread="source unreachable")
    assert (v.state, v.age_s) == ("unknown", 0.0)
    assert v.line() == ("RPO 60 s unknown: t[0]: stopped; t[1]: its oldest unreplicated record could not be read "
                        "(source unreachable)")
    no_end = part("t", 3, 0, -1)  # the source did not tell its end
    assert evaluate("A->B", 60, [no_end], {}, NOW).age_s is None
    missed = evaluate("A->B", 60, [stopped, part("t", 4, 0, 3)], {("t", 4): NOW - 61_000}, NOW)
    assert (missed.state, missed.age_s, missed.unknown) == ("missed", 61.0, ("t[0]: stopped",))
    assert evaluate("A->B", 60, [part("t", 5, 0, 2)], {("t", 5): None}, NOW).state == "unknown"  # no timestamp


def test_a_notifier_is_told_of_the_first_miss_and_of_the_recovery_only():
    missed = RpoVerdict("A->B", 60, NOW, "missed", 90.0, "t[0]")
    met = RpoVerdict("A->B", 60, NOW, "met", 3.0, "t[0]")
    unknown = RpoVerdict("A->B", 60, NOW, "unknown", None)
    assert notify_due(None, missed) and not notify_due(None, met) and not notify_due(None, unknown)
    assert not notify_due({"state": "missed"}, missed)  # still missed: told already
    assert notify_due({"state": "missed"}, met)  # met again
    assert not notify_due({"state": "missed"}, unknown)
    assert not notify_due({"state": "met"}, met) and notify_due({"state": "met"}, missed)
