"""Metrics under MirrorMaker 2's names, for Prometheus and for Airflow's StatsD/OpenTelemetry.

MM2 users watch MM2 through Strimzi's Prometheus JMX exporter rules and Grafana dashboard, which
name MM2's metric groups `kafka_connect_mirror_mirrorsourceconnector_<metric>` (labels source,
target, topic = the remote topic, partition) and `kafka_connect_mirror_mirrorcheckpointconnector_
<metric>` (plus group). mirrorflow emits the same names and labels, so those queries work
unchanged, and `mirrorflow_*` metrics for what MM2 lacks: lag in records and seconds (the RPO),
records lost to source retention, the flow's state and its runs.

Where MM2 counts since a task started, mirrorflow's source-connector metrics describe the flow's
last run (a scheduled run is what a task's lifetime is to MM2): record-count and byte-count are
that run's, the rates are per second of its copy phase, the latency and age families are over its
records. byte-count counts keys and values (MM2 counts values only). checkpoint-latency-ms is per
group and partition, as MM2's: the latest checkpoint's, and its min, avg and max over the checkpoints
emitted for that group and partition in the recent passes the run log holds (MM2's sensor keeps a
time window of one task's life). Everything comes from the target (the flow's progress and run
log, see state.run_log), so a scrape sees CLI and DAG runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.observe.rpo import UNKNOWN, RpoVerdict
from mirrorflow.observe.status import FlowStatus, flow_status
from mirrorflow.state import run_log
from mirrorflow.state.run_log import RunRecord

log = logging.getLogger(__name__)

SOURCE = "kafka_connect_mirror_mirrorsourceconnector_"
CHECKPOINT = "kafka_connect_mirror_mirrorcheckpointconnector_"
STATES = ("running", "paused", "stopped")
RECENT_RUNS = 50  # run-log records a scrape reads: the last replicate run, the checkpoint passes' window

HELP = {
    SOURCE + "record_count": "Records copied per partition by the flow's last run (MM2 record-count)",
    SOURCE + "record_rate": "Records per second of the last run's copy phase (MM2 record-rate)",
    SOURCE + "byte_count": "Key and value bytes copied by the last run (MM2 byte-count counts values only)",
    SOURCE + "byte_rate": "Bytes per second of the last run's copy phase (MM2 byte-rate)",
    SOURCE + "replication_latency_ms": "Commit time minus source timestamp, worst record of the last run",
    SOURCE + "replication_latency_ms_min": "Replication latency, min over the last run (MM2)",
    SOURCE + "replication_latency_ms_avg": "Replication latency, average over the last run (MM2)",
    SOURCE + "replication_latency_ms_max": "Replication latency, max over the last run (MM2)",
    SOURCE + "record_age_ms": "Read time minus source timestamp, oldest record of the last run",
    SOURCE + "record_age_ms_min": "Record age at read, min over the last run (MM2)",
    SOURCE + "record_age_ms_avg": "Record age at read, average over the last run (MM2)",
    SOURCE + "record_age_ms_max": "Record age at read, max over the last run (MM2)",
    CHECKPOINT + "checkpoint_latency_ms": "Checkpoint acknowledged minus its timestamp, latest one (MM2)",
    CHECKPOINT + "checkpoint_latency_ms_min": "Checkpoint latency, min over the recent passes (MM2)",
    CHECKPOINT + "checkpoint_latency_ms_avg": "Checkpoint latency, average over the recent passes (MM2)",
    CHECKPOINT + "checkpoint_latency_ms_max": "Checkpoint latency, max over the recent passes (MM2)",
    "mirrorflow_partition_lag_records": "Source offsets not replicated yet",
    "mirrorflow_schemas_copied": "Schema versions the flow's last schema pass copied, ids kept (mirrorflow.schemas)",
    "mirrorflow_schemas_missing": "Source schema versions the target registry lacked after the last schema pass",
    "mirrorflow_schemas_ok": "1 when the flow's last schema pass succeeded, 0 when it failed",
    "mirrorflow_schemas_timestamp_seconds": "When the flow's last schema pass ended",
    "mirrorflow_partition_lag_seconds": "Seconds of lag (RPO): age of the newest copied record while behind, else 0",
    "mirrorflow_partition_lost_records": "Source offsets lost to retention before they were copied (total)",
    "mirrorflow_partition_records_total": "Records copied since the partition's progress began",
    "mirrorflow_flow_lag_records": "Source offsets not replicated yet, whole flow",
    "mirrorflow_flow_lag_seconds": "Seconds of lag (RPO), worst partition of the flow",
    "mirrorflow_flow_state": "1 for the flow's current state (running, paused, stopped)",
    "mirrorflow_flow_rpo_objective_seconds": "The flow's recovery point objective (rpo.seconds)",
    "mirrorflow_flow_rpo_age_seconds": "Age of the oldest source record not replicated yet, worst partition (0: none)",
    "mirrorflow_flow_rpo_missed": "1 when that age is above the objective, 0 when within it (absent: unknown)",
    "mirrorflow_flow_up": "1 when the flow's state could be read from the target",
    "mirrorflow_run_duration_seconds": "Duration of the flow's last run (plan, copy, report)",
    "mirrorflow_run_records": "Records copied by the flow's last run",
    "mirrorflow_run_ok": "1 when the flow's last run succeeded",
    "mirrorflow_run_timestamp_seconds": "When the flow's last run ended (Unix time)",
    "mirrorflow_run_failed_units": "Copy units that failed in the flow's last run",
}


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str:
        return dict(self.labels).get(key, "")


def _labels(**kw: object) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(v)) for k, v in kw.items())


def source_samples(flow: FlowConfig, run: RunRecord) -> list[Sample]:
    """MirrorSourceConnector metrics of the flow's last replicate run, per partition it copied."""
    out: list[Sample] = []
    secs = run.copy_phase_s
    for p in run.partitions:
        if not p.records:
            continue
        lab = _labels(source=flow.source, target=flow.target, topic=p.target_topic, partition=p.partition)
        out += [
            Sample(SOURCE + "record_count", lab, p.records),
            Sample(SOURCE + "byte_count", lab, p.byte_count),
            Sample(SOURCE + "record_rate", lab, round(p.records / secs, 3) if secs > 0 else 0.0),
            Sample(SOURCE + "byte_rate", lab, round(p.byte_count / secs, 3) if secs > 0 else 0.0),
        ]
        for family, (lo, avg, hi), plain in (
            ("replication_latency_ms", p.latency_ms, p.latency_ms[2]),
            ("record_age_ms", p.age_ms, p.age_ms[2]),
        ):
            if hi < 0:
                continue
            out += [
                Sample(SOURCE + family, lab, plain),
                Sample(SOURCE + family + "_min", lab, lo),
                Sample(SOURCE + family + "_avg", lab, avg),
                Sample(SOURCE + family + "_max", lab, hi),
            ]
    return out


def checkpoint_samples(
    flow: FlowConfig, passes: Iterable[RunRecord], only: Iterable[tuple[str, str, int]] | None = None
) -> list[Sample]:
    """MirrorCheckpointConnector metrics per group and partition (`only`: just these (group, topic,
    partition)): checkpoint-latency-ms is the latest checkpoint's, min, avg and max are over every
    checkpoint emitted for that group and partition in `passes` (checkpoint run records; a pass
    that did not move a group's partition emitted none for it, as MM2 records none)."""
    latencies: dict[tuple[str, str, int], list[int]] = {}
    for run in sorted(passes, key=lambda r: r.at):
        for c in run.checkpoints:
            if c.latency_ms >= 0:
                latencies.setdefault((c.group, c.topic, c.partition), []).append(c.latency_ms)
    wanted = None if only is None else set(only)
    out: list[Sample] = []
    for (group, topic, partition), ms in latencies.items():
        if wanted is not None and (group, topic, partition) not in wanted:
            continue
        lab = _labels(source=flow.source, target=flow.target, group=group, topic=topic, partition=partition)
        name = CHECKPOINT + "checkpoint_latency_ms"
        out += [
            Sample(name, lab, ms[-1]),
            Sample(name + "_min", lab, min(ms)),
            Sample(name + "_avg", lab, round(sum(ms) / len(ms), 3)),
            Sample(name + "_max", lab, max(ms)),
        ]
    return out


def checkpoint_pass_samples(cfg: Config, flow: FlowConfig, run: RunRecord) -> list[Sample]:
    """The metrics of the group partitions one checkpoint pass (`run`) emitted, for Airflow's
    StatsD, their min/avg/max over the recent passes in the run log (the pass itself included:
    it is logged as it ends). An unreadable run log leaves the pass's own values."""
    passes = [run]
    try:
        with FlowClients(cfg, flow) as clients:
            passes = run_log.recent(clients, RECENT_RUNS, "checkpoint") or passes
    except MirrorflowError as exc:
        log.warning("flow %s: run log not read, checkpoint latency of this pass only: %s", flow.name, exc)
    return checkpoint_samples(flow, passes, only=[(c.group, c.topic, c.partition) for c in run.checkpoints])


def status_samples(flow: FlowConfig, status: FlowStatus, now_ms: int | None = None) -> list[Sample]:
    """Lag (records, seconds), lost records, records copied, the flow's state: what MM2 lacks."""
    now_ms = now_ms or int(time.time() * 1000)
    flab = _labels(flow=flow.name, source=flow.source, target=flow.target)
    out = [Sample("mirrorflow_flow_up", flab, 0 if status.error else 1)]
    if status.error:
        return out
    state = status.state.split()[0] if status.state else "running"
    out += [Sample("mirrorflow_flow_state", (*flab, ("state", s)), 1 if s == state else 0) for s in STATES]
    worst: float | None = 0.0
    for p in status.partitions:
        lab = (*flab, ("topic", p.topic), ("partition", str(p.partition)))
        out += [
            Sample("mirrorflow_partition_lost_records", lab, p.lost),
            Sample("mirrorflow_partition_records_total", lab, p.records),
        ]
        lag, secs = p.lag, p.lag_seconds(now_ms)
        if lag is not None:
            out.append(Sample("mirrorflow_partition_lag_records", lab, lag))
        if secs is not None:
            out.append(Sample("mirrorflow_partition_lag_seconds", lab, round(secs, 3)))
        worst = None if worst is None or secs is None else max(worst, secs)
    if status.lag is not None:
        out.append(Sample("mirrorflow_flow_lag_records", flab, status.lag))
    if worst is not None:
        out.append(Sample("mirrorflow_flow_lag_seconds", flab, round(worst, 3)))
    return out + (rpo_samples(flow, status.rpo) if status.rpo is not None else [])


def rpo_samples(flow: FlowConfig, verdict: RpoVerdict) -> list[Sample]:
    """The recovery point objective (observe.rpo): the objective, the measured age and whether it is
    missed; an unknown age or verdict is left out (never a made-up 0)."""
    flab = _labels(flow=flow.name, source=flow.source, target=flow.target)
    out = [Sample("mirrorflow_flow_rpo_objective_seconds", flab, verdict.objective_s)]
    if verdict.age_s is not None:
        out.append(Sample("mirrorflow_flow_rpo_age_seconds", flab, round(verdict.age_s, 3)))
    if verdict.state != UNKNOWN:
        out.append(Sample("mirrorflow_flow_rpo_missed", flab, 1 if verdict.missed else 0))
    return out


def run_samples(flow: FlowConfig, run: RunRecord) -> list[Sample]:
    lab = _labels(flow=flow.name, source=flow.source, target=flow.target)
    return [
        Sample("mirrorflow_run_duration_seconds", lab, run.duration_s),
        Sample("mirrorflow_run_records", lab, run.records),
        Sample("mirrorflow_run_ok", lab, 1 if run.ok else 0),
        Sample("mirrorflow_run_timestamp_seconds", lab, run.at / 1000),
        Sample("mirrorflow_run_failed_units", lab, run.failed_units),
    ]


def schema_samples(flow: FlowConfig, run: RunRecord) -> list[Sample]:
    """The last schema pass (run log kind `schemas`): versions copied, still missing, ok, when."""
    lab = _labels(flow=flow.name, source=flow.source, target=flow.target)
    return [
        Sample("mirrorflow_schemas_copied", lab, run.records),
        Sample("mirrorflow_schemas_missing", lab, run.lag or 0),
        Sample("mirrorflow_schemas_ok", lab, 1 if run.ok else 0),
        Sample("mirrorflow_schemas_timestamp_seconds", lab, run.at / 1000),
    ]


def flow_samples(
    flow: FlowConfig, status: FlowStatus, runs: Iterable[RunRecord], now_ms: int | None = None
) -> list[Sample]:
    """Every metric of one flow: its status, its last replicate run and its checkpoint passes."""
    runs = list(runs)
    replicate = [r for r in runs if r.kind == "replicate"]
    out = status_samples(flow, status, now_ms)
    if replicate:
        last = sorted(replicate, key=lambda r: r.at)[-1]  # of two at the same ms, the later logged
        out += run_samples(flow, last) + source_samples(flow, last)
    schemas = [r for r in runs if r.kind == "schemas"]
    if schemas:
        out += schema_samples(flow, sorted(schemas, key=lambda r: r.at)[-1])
    return out + checkpoint_samples(flow, [r for r in runs if r.kind == "checkpoint"])


def statsd_name(sample: Sample) -> str:
    """The StatsD/OpenTelemetry name through Airflow's stats: `mirrorflow.` + MM2's dashed metric
    name (`mirrorflow.mirrorsourceconnector.replication-latency-ms-max`); labels go as tags."""
    for prefix, group in ((SOURCE, "mirrorsourceconnector"), (CHECKPOINT, "mirrorcheckpointconnector")):
        if sample.name.startswith(prefix):
            return f"mirrorflow.{group}.{sample.name[len(prefix) :].replace('_', '-')}"
    return "mirrorflow." + sample.name.removeprefix("mirrorflow_").replace("_", "-")


def prometheus_text(samples: Iterable[Sample]) -> bytes:
    """The Prometheus text exposition (prometheus_client's own format and escaping)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    families: dict[str, GaugeMetricFamily] = {}
    keys: dict[str, list[str]] = {}
    for s in samples:
        if s.name not in families:
            keys[s.name] = [k for k, _ in s.labels]
            families[s.name] = GaugeMetricFamily(s.name, HELP.get(s.name, s.name), labels=keys[s.name])
        families[s.name].add_metric([s.label(k) for k in keys[s.name]], s.value)

    class _Collector:
        def collect(self):
            return list(families.values())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return generate_latest(registry)


def collect(cfg: Config, flows: Iterable[FlowConfig] | None = None, now_ms: int | None = None) -> list[Sample]:
    """Every enabled flow's metrics, read from its target (one flow's unreachable target makes
    that flow's `mirrorflow_flow_up` 0, never the whole scrape fail)."""
    out: list[Sample] = []
    for flow in flows if flows is not None else [f for f in cfg.flows.values() if f.enabled]:
        st = flow_status(cfg, flow)
        runs: list[RunRecord] = []
        if st.error is None:
            try:
                with FlowClients(cfg, flow) as clients:
                    runs = run_log.recent(clients, RECENT_RUNS)
            except MirrorflowError as exc:
                log.warning("flow %s: run log not read: %s", flow.name, exc)
        out += flow_samples(flow, st, runs, now_ms)
    return out
