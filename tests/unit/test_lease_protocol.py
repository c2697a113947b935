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


def test_a_break_frees_only_the_holder_it_names():
    h = replay([rec("claim", "a", 10)])
    brk = LeaseRecord("break", "b", "run b", 100, 20, target="a")
    assert replay([brk, rec("claim", "b", 21)], h) == Holder("b", "run b", 21, 121)
    # two runs found the holder gone: the second break names a holder that is no longer there
    late = LeaseRecord("break", "c", "run c", 100, 22, target="a")
    assert replay([brk, rec("claim", "b", 21), late, rec("claim", "c", 23)], h) == Holder("b", "run b", 21, 121)
    # a break naming someone else changes nothing
    assert replay([LeaseRecord("break", "c", "run c", 100, 20, target="x")], h) == h


def test_the_claimers_process_stays_with_the_lease_through_unstamped_renewals():
    claim = LeaseRecord("claim", "a", "run a", 100, 10, proc="h|b|ns|42|7")
    h = replay([claim, rec("renew", "a", 50)])  # the run's Spark job renews from another process
    assert h == Holder("a", "run a", 10, 150, "h|b|ns|42|7")
    # a lease taken afresh after it lapsed keeps no stamp it was not given
    assert replay([rec("claim", "a", 500)], h) == Holder("a", "run a", 500, 600, "")
    r = LeaseRecord.from_json(LeaseRecord("break", "b", "run b", 5, 0, target="a").to_json(), 9)
    assert r is not None and (r.kind, r.target) == ("break", "a")


def test_a_take_over_wins_at_once_and_its_victim_never_holds_the_lease_again():
    h = replay([rec("claim", "a", 10), rec("renew", "a", 40)])
    fenced: set[str] = set()
    take = LeaseRecord("takeover", "f", "failover f", 100, 50, target="a")
    h = replay([take, rec("renew", "a", 60)], h, fenced)  # a's renewal after the take-over: refused
    assert h == Holder("f", "failover f", 50, 150) and fenced == {"a"}
    # released, or lapsed: a claim by the owner taken over still never counts; anyone else's does
    h = replay([rec("release", "f", 70), rec("claim", "a", 71)], h, fenced)
    assert h is None
    assert replay([rec("claim", "a", 500), rec("claim", "b", 501)], h, fenced) == Holder("b", "run b", 501, 601)
    # a take-over of a free lease fences nobody
    assert replay([LeaseRecord("takeover", "g", "g", 100, 5)], None, fenced) == Holder("g", "g", 5, 105)
