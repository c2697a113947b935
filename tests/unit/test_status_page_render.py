"""The status page without Kafka: problems in plain words, the chart's points, the HTML's numbers,
and the cache that keeps a refresh storm off the clusters."""
from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

from mirrorflow.observe.status import FlowStatus, PartitionStatus
from mirrorflow.observe.status_page import FlowPage, PageCache, _history, _problems
from mirrorflow.state.run_log import PartitionRun, RunRecord
from mirrorflow_airflow import status_html

NOW = 1_800_000_000_000


def _page(**kw) -> FlowPage:
    st = FlowStatus("A->B", True, True, [
        PartitionStatus("orders", 0, 100, 100, 100, 0, last_timestamp=NOW - 5_000),
        PartitionStatus("orders", 1, 40, 70, 40, 7, last_timestamp=NOW - 90_000),
    ])
    for k, v in kw.items():
        setattr(st, k, v)
    return FlowPage("A->B", st, NOW)


def _run(at: int, records: int, lag: int, ok: bool = True, copy_s: float = 2.0) -> RunRecord:
    part = PartitionRun("orders", 0, "A.orders", "ok", records, records * 10, lag, 0, (5, 10, 250), (1, 2, 3))
    return RunRecord("replicate", at, ok, 3.0, copy_s, records, records * 10, lag, 0, 0 if ok else 1,
                     errors=[] if ok else ["orders[1]: broker said no"], partitions=[part])


def test_lag_seconds_latency_and_problems_in_plain_words():
    page = _page()
    clients = SimpleNamespace()
    import mirrorflow.observe.status_page as sp

    runs = [_run(NOW - 60_000, 100, 30), _run(NOW - 30_000, 0, 30, copy_s=0), _run(NOW - 10_000, 40, 30, ok=False)]
    orig = sp.run_log.recent
    sp.run_log.recent = lambda c, last: runs  # type: ignore[assignment]
    try:
        _history(clients, page)
    finally:
        sp.run_log.recent = orig  # type: ignore[assignment]
    assert [(p.lag, p.records, p.rate, p.ok) for p in page.chart] == [(30, 100, 50.0, True), (30, 0, 0.0, True),
                                                                      (30, 40, 20.0, False)]
    assert page.lag_seconds == 90.0  # the worst partition: its newest copied record is 90 s old
    assert page.latency_ms == 250 and page.window_records == 140 and page.window_bytes == 1400
    problems = _problems(page)
    assert problems == [
        "7 record(s) were deleted by the source's retention before they could be copied (they are gone; the copy "
        "continued after them).",
        "The last run (10 s ago) failed: 1 unit(s) failed. orders[1]: broker said no",
    ]
    paused = _page(state="paused by ops since 2027-01-15T08:00:00+00:00 (on the target): maintenance",
                   next_step="resume it when ready: `mirrorflow flow resume --flow A->B`")
    assert _problems(paused)[0] == ("The flow is not copying: it is paused by ops since 2027-01-15T08:00:00+00:00 "
                                    "(on the target): maintenance. Next step: resume it when ready: "
                                    "`mirrorflow flow resume --flow A->B`.")
    assert _problems(_page(error="cluster 'B' unreachable")) == [
        "The flow's state on its target cluster cannot be read, so nothing below is known: cluster 'B' unreachable"]


def test_html_shows_the_numbers_and_escapes_names():
    page = _page()
    page.chart_runs = [_run(NOW - 10_000, 40, 30)]
    page.last_run = page.chart_runs[-1]
    page.problems = ["<b>bad</b> thing"]
    html = status_html.render_page([page], lambda f: [("replicate", "/dags/mirrorflow_replicate__A-B")], NOW)
    assert '<div class="v" data-k="lag">30</div>' in html
    assert '<div class="v" data-k="records">140</div>' in html
    assert '<div class="v" data-k="lag-seconds">90 s</div>' in html
    assert '<div class="v" data-k="last-run">10 s ago, ok</div>' in html
    assert '<div class="v" data-k="lost">7</div>' in html
    assert "&lt;b&gt;bad&lt;/b&gt; thing" in html and "<b>bad</b>" not in html
    assert '<a href="/dags/mirrorflow_replicate__A-B" target="_top">replicate</a>' in html
    assert 'data-k="chart-lag" data-points="0"' in html and "no runs yet" in html


def test_cache_builds_once_per_ttl_even_under_a_storm():
    clock = [0.0]
    built: list[str] = []
    gate = threading.Event()

    def build(cfg, flow):
        gate.wait(5)
        built.append(flow)
        return flow

    cache = PageCache(5.0, clock=lambda: clock[0], build=build)  # type: ignore[arg-type]
    cfg = SimpleNamespace(path=Path("/etc/mf.yaml"), flows={"A->B": "A->B", "B->A": "B->A"})
    results: list[list] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(cfg))) for _ in range(20)]  # type: ignore[arg-type]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert cache.builds == 1 and built == ["A->B", "B->A"] and all(r == ["A->B", "B->A"] for r in results)
    clock[0] = 4.9
    cache.get(cfg)  # type: ignore[arg-type]
    assert cache.builds == 1
    clock[0] = 5.0
    cache.get(cfg)  # type: ignore[arg-type]
    assert cache.builds == 2
    other = SimpleNamespace(path=Path("/etc/other.yaml"), flows={"C->D": "C->D"})
    assert cache.get(other) == ["C->D"] and cache.builds == 3  # type: ignore[arg-type]


def test_operations_in_words_oldest_first_and_on_the_page():
    from mirrorflow.observe.status import operations

    words = operations({
        "takeover": {"at": NOW, "by": "ops@host", "partitions": 4},
        "failover": {"at": NOW - 3_600_000, "mode": "unplanned", "by": "ops@host"},
        "failback": {"at": NOW - 60_000, "of": "B->A"},
    })
    assert words == [
        "unplanned failover at 2027-01-15T07:00:00+00:00 by ops@host",
        "started by the failback of B->A at 2027-01-15T07:59:00+00:00",
        "took over from MirrorMaker 2 (4 partitions) at 2027-01-15T08:00:00+00:00 by ops@host",
    ]
    html = status_html.render_flow(_page(operations=words[:1]), lambda flow: [])
    assert '<p class="note" data-k="operations">unplanned failover at 2027-01-15T07:00:00+00:00 by ops@host</p>' in html
    assert 'data-k="operations"' not in status_html.render_flow(_page(), lambda flow: [])


def test_durations_in_human_units_and_the_latency_named_for_what_it_is():
    assert [status_html._ms(v) for v in (None, 250, 12_000, 3_033_608, 9_000_000)] == [
        "-", "250 ms", "12 s", "51 min", "2.5 h"]
    page = _page()
    big = PartitionRun("orders", 0, "A.orders", "ok", 5, 50, 0, 0, (10, 900_000, 3_033_608), (1, 2, 3))
    page.chart_runs = [RunRecord("replicate", NOW - 10_000, True, 3.0, 2.0, 5, 50, partitions=[big])]
    html = status_html.render_flow(page, lambda f: [])
    # the age of the oldest record the last copying run committed, in minutes, under a name saying so
    assert ('<div class="l">Record age when copied (last run, max)</div><div class="v" data-k="latency">51 min</div>'
            in html)
    assert "Replication latency" not in html and "3,033,608" not in html


def test_needs_attention_comes_first_then_the_history_and_the_buttons_only_for_who_may():
    from mirrorflow.state.history import OperationRecord

    page = _page(state="paused by alice since 2027-01-15T08:00:00+00:00 (on the target): upgrade")
    page.problems = _problems(page)
    page.operations = [
        OperationRecord("A->B", "pause", NOW - 600_000, "alice", "status-page", "upgrade"),
        OperationRecord("A->B", "reseed", NOW - 120_000, "bob@h pid 1", "", "", "re-seeded orders",
                        {"partitions": 2}),
    ]
    ok = _page()
    html = status_html.render_page([page, ok], lambda f: [], NOW, controls={"A->B"})
    body = html[html.index('<div id="flows">'):]
    # the page opens with what needs attention, naming the flow, before any card
    assert body.index('data-k="attention"') < body.index('<section class="card"')
    assert ('<li><a href="#flow-A_B">A->B</a>: The flow is not copying: it is paused by alice since '
            "2027-01-15T08:00:00+00:00 (on the target): upgrade.</li>") in body.replace("A-&gt;B", "A->B")
    card = body[body.index('<section class="card"'):]
    assert card.index("<h3>Needs attention</h3>") < card.index('<div class="tiles">')
    assert ('<h3>Operations (last 2)</h3><ul class="ops" data-k="history">'
            "<li><b>reseed</b> 2 min ago by bob@h pid 1: re-seeded orders; partitions 2</li>"
            "<li><b>pause</b> 10 min ago by alice (status-page): upgrade</li></ul>") in card
    assert card.count('<div class="control" data-flow-id="A-B">') == 2  # one per card
    assert [f'data-action="{a}"' in card for a in ("pause", "resume", "stop")] == [True] * 3
    viewer = status_html.render_page([page], lambda f: [], NOW)
    assert 'class="control"' not in viewer and "data-action" not in viewer.split("<script>")[0]
    assert 'data-k="attention"' not in status_html.render_flows([ok], lambda f: [])
    empty = status_html.render_flow(ok, lambda f: [])
    assert '<p class="note" data-k="history">No operation recorded yet.</p>' in empty


def test_a_failed_over_flow_says_so_and_offers_the_failback_not_a_resume():
    page = _page(state="stopped by root@h pid 1 since 2027-01-15T08:00:00+00:00 (on the target): failed over to 'B' "
                       "(unplanned), plan 0123456789ab approved by carol", failed_over=True,
                 next_step="fail back once A is back: `mirrorflow failback --flow A->B`")
    page.problems = _problems(page)
    links = lambda f: [("failback", "/dags/mirrorflow_failback__A-B")]  # noqa: E731
    card = status_html.render_flow(page, links, can_control=True)
    assert '<span class="badge stopped" data-k="state">failed over</span>' in card
    assert "Next step: fail back once A is back: `mirrorflow failback --flow A-&gt;B`." in card
    assert "data-action" not in card and 'class="control"' not in card  # no Resume (nor a stop hiding the cause)
    assert ('<p class="note" data-k="next-step">Failed over: the next step is to <a href="/dags/mirrorflow_failback__'
            'A-B" target="_top">fail back</a> once A is back (not a resume).</p>') in card


def test_every_checkpoint_pass_counts_not_only_those_that_moved_a_group():
    import mirrorflow.observe.status_page as sp
    from mirrorflow.state.run_log import GroupCheckpoints

    moved = RunRecord("checkpoint", NOW - 14 * 60_000, True, checkpoints=[GroupCheckpoints("g", "A.orders", 0, 5)])
    idle = RunRecord("checkpoint", NOW - 50_000, True)
    failed = RunRecord("checkpoint", NOW - 20_000, False, errors=["group g2: coordinator not available"])
    for runs, expect in (
        ([moved, idle], "last checkpoint pass 50 s ago, last checkpoint written 14 min ago (no group moved since)"),
        ([moved], "last checkpoint pass 14 min ago"),
    ):
        page = _page()
        orig = sp.run_log.recent
        sp.run_log.recent = lambda c, last, runs=runs: runs  # type: ignore[assignment]
        try:
            _history(SimpleNamespace(), page)
        finally:
            sp.run_log.recent = orig  # type: ignore[assignment]
        assert f"Consumer groups (0; {expect})" in status_html.render_flow(page, lambda f: [])
    page = _page()
    page.last_checkpoint = failed
    assert _problems(page)[-1] == ("The last checkpoint pass (20 s ago) failed for some groups: "
                                   "group g2: coordinator not available")


def test_checkpoint_passes_that_stopped_need_attention_unless_the_flow_is_stopped():
    page = _page()
    page.checkpoint_every_s = 60
    page.last_checkpoint = RunRecord("checkpoint", NOW - 11 * 60_000, True)
    assert _problems(page) == [
        "7 record(s) were deleted by the source's retention before they could be copied (they are gone; the copy "
        "continued after them).",
        "No checkpoint pass since 11 min ago although they should run every 60 s: groups would fail over to old "
        "offsets (is the checkpoint DAG paused or failing?).",
    ]
    page.last_checkpoint = RunRecord("checkpoint", NOW - 9 * 60_000, True)  # within 10 min: fine
    assert len(_problems(page)) == 1
    page.checkpoint_every_s = 300  # every 5 min: 3 intervals = 15 min
    page.last_checkpoint = RunRecord("checkpoint", NOW - 14 * 60_000, True)
    assert len(_problems(page)) == 1
    stopped = _page(state="stopped by ops since 2027-01-15T08:00:00+00:00 (on the target)")
    stopped.checkpoint_every_s, stopped.last_checkpoint = 60, RunRecord("checkpoint", NOW - 3_600_000, True)
    assert not any("checkpoint" in p for p in _problems(stopped))


def test_a_group_resuming_earlier_says_so_on_the_page():
    from mirrorflow.observe.status_page import GroupRow

    page = _page()
    page.groups = [
        GroupRow("idle", "A.orders", 0, 7, 10, 10, "empty", "skip-equal"),
        GroupRow("late", "A.orders", 0, 95, 80, None, "missing", "write",
                 "earlier: re-reads at most 12 record(s) it had read, skips none"),
    ]
    html = status_html.render_flow(page, lambda f: [])
    assert "<td>80 <span class=\"note\">earlier: re-reads at most 12 record(s) it had read, skips none</span></td>" in html
    assert "<td>10</td>" in html
