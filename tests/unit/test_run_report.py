"""The run report's lag: measured against the source's end read for the report, unknown (never 0) when
that end could not be read."""

from __future__ import annotations

from mirrorflow.replication.run.run_report import build_report
from mirrorflow.state.run_log import RunRecord

PLAN = [
    {"topic": "t", "partition": 0, "target_topic": "A.t", "start": 10, "end": 40},
    {"topic": "t", "partition": 1, "target_topic": "A.t", "start": 5, "end": 5},
]
RESULTS = [
    {
        "topic": "t",
        "partition": 0,
        "target_topic": "A.t",
        "status": "ok",
        "records": 30,
        "bytes": 300,
        "transactions": 1,
        "copied_to": 40,
        "copy_started": 100.0,
        "finished": 101.0,
    },
]


def test_the_lag_is_the_source_end_read_for_the_report_minus_the_progress():
    rep = build_report("A->B", True, PLAN, RESULTS, {("t", 0): 47, ("t", 1): 5})
    assert [(p.partition, p.source_end, p.next_offset, p.lag) for p in rep.partitions] == [(0, 47, 40, 7), (1, 5, 5, 0)]
    assert rep.lag == 7
    assert rep.render().splitlines()[0].endswith("lag 7; max latency - ms")
    assert rep.run_record(1).lag == 7


def test_an_unknown_source_end_is_an_unknown_lag_never_the_plans_end_nor_0():
    why = "the source's end could not be read: cluster 'A': listing offsets: no success for 4 s"
    rep = build_report("A->B", True, PLAN, RESULTS, None, ends_unknown=why)
    assert [(p.partition, p.source_end, p.lag) for p in rep.partitions] == [(0, -1, None), (1, -1, None)]
    assert rep.lag is None
    lines = rep.render().splitlines()
    assert f"; lag unknown ({why}); max latency - ms" in lines[0], lines[0]
    assert lines[1] == "  t[0] -> A.t[0]: 30 records, 300 bytes, next 40, lag unknown [ok]"
    d = rep.to_dict()
    assert d["lag"] is None and d["ends_unknown"] == why and d["partitions"][0]["lag"] is None
    # the run log keeps it unknown, also when read back
    record = RunRecord.from_json(rep.run_record(1).to_json())
    assert record is not None and record.lag is None and record.partitions[0].lag is None


def test_a_partition_whose_end_is_missing_has_an_unknown_lag_the_others_theirs():
    rep = build_report("A->B", True, PLAN, RESULTS, {("t", 0): 40})
    assert [(p.partition, p.lag) for p in rep.partitions] == [(0, 0), (1, None)]
    assert rep.lag is None


def test_a_stopped_partition_lags_by_its_whole_source_or_unknown():
    plan = [{**PLAN[1], "stopped": "source topic 't' was recreated"}]
    assert build_report("A->B", True, plan, [], {("t", 1): 9}).partitions[0].lag == 9
    assert build_report("A->B", True, plan, [], None).partitions[0].lag is None


def test_the_lag_counts_every_offset_owned_and_not_copied_holes_included():
    """A partial unit's copy ends at 98 with the partition planned to 3,000: the lag is 2,902 (and
    the source's growth since), not the end minus the highest copied offset; a note says where the
    next run continues."""
    from mirrorflow.replication.run.run_report import build_report

    summary = [{"topic": "t", "partition": 0, "target_topic": "A.t", "start": 0, "uncopied": 3_000,
                "planned_end": 3_000}]
    results = [
        {"topic": "t", "partition": 0, "target_topic": "A.t", "status": "partial", "start": 0, "end": 1_000,
         "copied_to": 98, "records": 98, "offsets": 98, "note": "unit.max.bytes reached at source offset 98"},
        {"topic": "t", "partition": 0, "target_topic": "A.t", "status": "partial", "start": 1_000, "end": 2_000,
         "copied_to": -1, "records": 0, "offsets": 0, "note": "deferred to the next run"},
    ]
    rep = build_report("A->B", True, summary, results, ends={("t", 0): 3_010})
    assert rep.ok and rep.partitions[0].lag == 2_912 and rep.partitions[0].status == "partial"
    assert "partition t[0]: unit.max.bytes reached at source offset 98" in rep.render()


def test_a_skipped_run_has_no_lag_not_a_made_up_0():
    """A paused or stopped flow's run looks at no partition: its lag is unknown (a planned failover's drain
    took the 0 it was before as drained, ops.dr.failover_drain)."""
    from mirrorflow.replication.run.run_report import RunReport

    rep = RunReport("A->B", True, skipped="flow A->B is paused")
    assert rep.lag is None and rep.ok and rep.to_dict()["lag"] is None
    assert RunReport("A->B", True).lag == 0  # a run with nothing to look at either: nothing behind
