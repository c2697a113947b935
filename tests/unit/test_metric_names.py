"""MM2 metric names and the samples built from a run record and a status (pure)."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from mirrorflow.config.model import FlowConfig
from mirrorflow.observe.metrics import (
    Sample,
    checkpoint_samples,
    flow_samples,
    prometheus_text,
    source_samples,
    statsd_name,
)
from mirrorflow.observe.status import FlowStatus, PartitionStatus
from mirrorflow.state.run_log import GroupCheckpoints, PartitionRun, RunRecord

FLOW = FlowConfig(source="east", target="central", props={})


def test_statsd_names_are_mm2_dashed_names():
    assert statsd_name(Sample("kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_max", (), 1)) == (
        "mirrorflow.mirrorsourceconnector.replication-latency-ms-max")
    assert statsd_name(Sample("kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms", (), 1)) == (
        "mirrorflow.mirrorcheckpointconnector.checkpoint-latency-ms")
    assert statsd_name(Sample("mirrorflow_partition_lag_seconds", (), 1)) == "mirrorflow.partition-lag-seconds"


def test_source_samples_only_for_partitions_that_copied_and_rates_per_copy_second():
    run = RunRecord("replicate", 1000, True, duration_s=9.0, copy_phase_s=2.0, partitions=[
        PartitionRun("t", 0, "east.t", "ok", 10, 400, 0, 0, (5, 7, 9), (1, 2, 3)),
        PartitionRun("t", 1, "east.t", "failed", 0, 0, 4, 0),
    ])
    got = {(s.name.split("mirrorsourceconnector_")[1], s.label("partition")): s.value
           for s in source_samples(FLOW, run)}
    assert got[("record_count", "0")] == 10 and got[("byte_rate", "0")] == 200.0 and got[("record_rate", "0")] == 5.0
    assert (got[("replication_latency_ms_min", "0")], got[("replication_latency_ms_avg", "0")],
            got[("replication_latency_ms_max", "0")], got[("replication_latency_ms", "0")]) == (5, 7, 9, 9)
    assert got[("record_age_ms_max", "0")] == 3
    assert not any(p == "1" for _, p in got)
    [s] = [s for s in source_samples(FLOW, run) if s.name.endswith("record_count")]
    assert dict(s.labels) == {"source": "east", "target": "central", "topic": "east.t", "partition": "0"}


def test_unknown_lag_is_never_zero_and_state_is_one_hot():
    st = FlowStatus("east->central", True, True, partitions=[
        PartitionStatus("t", 0, 5, -1, 5, 0, note="source unreachable"),
        PartitionStatus("t", 1, 5, 9, 5, 2, last_timestamp=1_000),
    ], state="paused by ops since 2026-11-22T00:00:00+00:00 (on the target)")
    got = [(s.name, dict(s.labels).get("partition"), dict(s.labels).get("state"), s.value)
           for s in flow_samples(FLOW, st, [], now_ms=11_000)]
    assert ("mirrorflow_partition_lag_records", "0", None, 0) not in got
    assert ("mirrorflow_partition_lag_records", "1", None, 4) in got
    assert ("mirrorflow_partition_lag_seconds", "1", None, 10.0) in got
    assert ("mirrorflow_partition_lost_records", "1", None, 2) in got
    assert not any(n in ("mirrorflow_flow_lag_records", "mirrorflow_flow_lag_seconds") for n, *_ in got)
    states = {s: v for n, _, s, v in got if n == "mirrorflow_flow_state"}
    assert states == {"running": 0, "paused": 1, "stopped": 0}


def test_an_unreadable_target_is_flow_up_zero_only():
    st = FlowStatus("east->central", True, True, error="cannot reach cluster 'central'")
    assert [(s.name, s.value) for s in flow_samples(FLOW, st, [])] == [("mirrorflow_flow_up", 0)]


def test_prometheus_text_round_trips_labels_with_quotes():
    run = RunRecord("checkpoint", 1, True, checkpoints=[GroupCheckpoints('g"1\\x', "east.t", 3, 12)])
    text = prometheus_text(checkpoint_samples(FLOW, [run])).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    [s] = fams["kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms_avg"].samples
    assert s.labels == {"source": "east", "target": "central", "group": 'g"1\\x', "topic": "east.t", "partition": "3"}
    assert s.value == 12


def test_checkpoint_latency_min_avg_max_per_group_and_partition_over_the_passes():
    def cp(at, *cps):
        return RunRecord("checkpoint", at, True, checkpoints=[GroupCheckpoints(g, "east.t", p, ms) for g, p, ms in cps])

    passes = [cp(3000, ("g1", 0, 40)),  # given out of order: the latest is the one at the latest pass
              cp(1000, ("g1", 0, 10), ("g1", 1, 500), ("g2", 0, 7)),
              cp(2000, ("g1", 0, 25), ("g2", 0, 9))]
    runs = [RunRecord("replicate", 2500, True), *passes]
    st = FlowStatus("east->central", True, True)
    got = {(s.name.split("checkpointconnector_")[1], s.label("group"), s.label("partition")): s.value
           for s in flow_samples(FLOW, st, runs) if "checkpointconnector" in s.name}
    assert got == {
        ("checkpoint_latency_ms", "g1", "0"): 40, ("checkpoint_latency_ms_min", "g1", "0"): 10,
        ("checkpoint_latency_ms_avg", "g1", "0"): 25.0, ("checkpoint_latency_ms_max", "g1", "0"): 40,
        # a partition the later passes did not move keeps its one checkpoint's latency
        ("checkpoint_latency_ms", "g1", "1"): 500, ("checkpoint_latency_ms_min", "g1", "1"): 500,
        ("checkpoint_latency_ms_avg", "g1", "1"): 500, ("checkpoint_latency_ms_max", "g1", "1"): 500,
        ("checkpoint_latency_ms", "g2", "0"): 9, ("checkpoint_latency_ms_min", "g2", "0"): 7,
        ("checkpoint_latency_ms_avg", "g2", "0"): 8.0, ("checkpoint_latency_ms_max", "g2", "0"): 9,
    }
    # one pass's samples (Airflow's StatsD): only its group partitions, over all the passes
    only = checkpoint_samples(FLOW, passes, only=[("g2", "east.t", 0)])
    assert [(s.name.split("checkpointconnector_")[1], s.value) for s in only] == [
        ("checkpoint_latency_ms", 9), ("checkpoint_latency_ms_min", 7), ("checkpoint_latency_ms_avg", 8.0),
        ("checkpoint_latency_ms_max", 9)]


def test_run_record_json_round_trip():
    run = RunRecord("replicate", 5, False, 1.5, 0.5, 3, 30, 2, 1, 1, 0, None, ["t[0]: boom"],
                    [PartitionRun("t", 0, "east.t", "failed", 3, 30, 2, 1, (1, 2, 3), (0, 1, 2))])
    assert RunRecord.from_json(run.to_json()) == run
    assert RunRecord.from_json(b"{not json") is None and RunRecord.from_json(b'{"v": 99}') is None
