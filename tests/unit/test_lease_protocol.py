"""The lease protocol's verdicts (state.lease.replay): pure, no brokers."""

from mirrorflow.state.lease import Holder, LeaseRecord, replay


def rec(kind: str, owner: str, ts: int, ttl: int = 100) -> LeaseRecord:
    return LeaseRecord(kind, owner, f"run {owner}", ttl, ts)


def test_first_claim_wins_and_a_second_claim_is_refused():
    h = replay([rec("claim", "a", 10), rec("claim", "b", 11)])
    assert h == Holder("a", "run a", 10, 110)


def test_renewal_extends_and_keeps_since():
    h = replay([rec("claim", "a", 10), rec("renew", "a", 60), rec("claim", "b", 120)])
    assert h == Holder("a", "run a", 10, 160)


def test_an_expired_lease_goes_to_the_next_claim():
    h = replay([rec("claim", "a", 10), rec("claim", "b", 110)])
    assert h == Holder("b", "run b", 110, 210)
    # the old holder's late renewal is refused: b holds it now
    assert replay([rec("renew", "a", 120)], h) == h


def test_release_frees_only_for_the_holder():
    h = replay([rec("claim", "a", 10), rec("release", "b", 20)])
    assert h is not None and h.owner == "a"
    assert replay([rec("release", "a", 30)], h) is None
    assert replay([rec("release", "a", 30), rec("claim", "b", 31)], h) == Holder("b", "run b", 31, 131)


def test_a_holder_that_renews_after_expiry_but_before_anyone_else_keeps_it_with_a_new_since():
    h = replay([rec("claim", "a", 10), rec("renew", "a", 500)])
    assert h == Holder("a", "run a", 500, 600)


def test_replay_is_incremental():
    records = [rec("claim", "a", 10), rec("claim", "b", 20), rec("release", "a", 30), rec("claim", "b", 40)]
    assert replay(records[2:], replay(records[:2])) == replay(records)


def test_unreadable_records_take_nothing():
    assert LeaseRecord.from_json(b"not json", 5) is None
    assert LeaseRecord.from_json(None, 5) is None
    r = LeaseRecord.from_json(rec("claim", "a", 0).to_json(), 7)
    assert r == rec("claim", "a", 7)
