"""Metrics under MM2's names: a Prometheus scrape after a replicate run and a
checkpoint pass shows values equal to the run's report; Airflow's StatsD gets the same names; the
Grafana dashboard queries only metrics the exposition emits."""
from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.observe import metrics
from mirrorflow.replication.run.runner import run_once
from tests.support import create_topic, produce, write_config

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SRC = "kafka_connect_mirror_mirrorsourceconnector_"
CKP = "kafka_connect_mirror_mirrorcheckpointconnector_"


def scrape(text: bytes) -> dict[tuple[str, tuple], float]:
    """{(metric name, sorted labels): value} of a Prometheus text exposition."""
    out = {}
    for fam in text_string_to_metric_families(text.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def one(samples: dict, name: str, **labels: str) -> float:
    hits = [v for (n, lab), v in samples.items() if n == name and all(dict(lab).get(k) == x for k, x in labels.items())]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


def test_prometheus_statsd_and_dashboard_after_a_run(source, target, unique, tmp_path, monkeypatch, airflow_db):
    topic = unique("metrics")
    src, tgt = unique("MA"), unique("MB")
    create_topic(source, topic, partitions=2)
    create_topic(target, f"{src}.{topic}", partitions=2)
    now = int(time.time() * 1000)
    produce(source, topic, [{"partition": i % 2, "key": b"k%d" % i, "value": b"v" * (10 + i), "timestamp": now - 5000 + i}
                            for i in range(30)])
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"topics": topic, "tasks.max": 2, "heartbeats.replication.enabled": False}})
    flow = cfg.flow(f"{src}->{tgt}")
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 30, rep.render()
    group = unique("g")
    c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 3)], asynchronous=False)
    cp = emit_checkpoints(cfg, flow)
    assert [(x.group, x.partition) for x in cp.emitted] == [(group, 0), (group, 1)] and cp.latency_ms >= 0
    # a second pass moves partition 0 only; its checkpoint is stamped 3 s back, so its latency differs
    c.commit(offsets=[TopicPartition(topic, 0, 12)], asynchronous=False)
    c.close()
    cp2 = emit_checkpoints(cfg, flow, now_ms=int(time.time() * 1000) - 3000)
    assert [(x.group, x.partition) for x in cp2.emitted] == [(group, 0)] and cp2.latency_ms >= 3000 > cp.latency_ms

    got = scrape(metrics.prometheus_text(metrics.collect(cfg, [flow])))
    remote = f"{src}.{topic}"
    for p in rep.partitions:
        lab = {"source": src, "target": tgt, "topic": remote, "partition": str(p.partition)}
        assert one(got, SRC + "record_count", **lab) == p.records == 15
        assert one(got, SRC + "byte_count", **lab) == p.bytes
        lo, avg, hi = (one(got, SRC + f"replication_latency_ms_{k}", **lab) for k in ("min", "avg", "max"))
        assert lo == p.latency_min_ms and avg == p.latency_avg_ms and hi == p.latency_ms
        # the records were produced 5 s before the run: each waited at least that long
        assert 4900 <= lo <= avg <= hi <= time.time() * 1000 - (now - 5000)
        assert one(got, SRC + "replication_latency_ms", **lab) == hi
        alo, aavg, ahi = (one(got, SRC + f"record_age_ms_{k}", **lab) for k in ("min", "avg", "max"))
        assert 4900 <= alo <= aavg <= ahi <= hi
        # the run log keeps the copy phase to the millisecond, so the rate is records / that
        phase = round(rep.copy_phase_s, 3)
        assert one(got, SRC + "record_rate", **lab) == pytest.approx(p.records / phase if phase else 0.0, rel=0.001)
        flab = {"flow": flow.name, "topic": topic, "partition": str(p.partition)}
        assert one(got, "mirrorflow_partition_lag_records", **flab) == 0
        assert one(got, "mirrorflow_partition_lag_seconds", **flab) == 0
        assert one(got, "mirrorflow_partition_records_total", **flab) == 15
        assert one(got, "mirrorflow_partition_lost_records", **flab) == 0
    assert one(got, "mirrorflow_run_records", flow=flow.name) == 30
    assert one(got, "mirrorflow_run_ok", flow=flow.name) == 1
    assert one(got, "mirrorflow_run_duration_seconds", flow=flow.name) == round(rep.duration_s, 3)
    assert one(got, "mirrorflow_flow_state", flow=flow.name, state="running") == 1
    assert one(got, "mirrorflow_flow_state", flow=flow.name, state="paused") == 0
    # checkpoint latency per group and partition: the latest, and min/avg/max over its checkpoints
    ck = {"source": src, "target": tgt, "group": group, "topic": remote}
    assert [one(got, CKP + "checkpoint_latency_ms" + k, **ck, partition="0") for k in ("", "_min", "_avg", "_max")] == [
        cp2.latency_ms, cp.latency_ms, round((cp.latency_ms + cp2.latency_ms) / 2, 3), cp2.latency_ms]
    assert [one(got, CKP + "checkpoint_latency_ms" + k, **ck, partition="1") for k in ("", "_min", "_avg", "_max")] == [
        cp.latency_ms] * 4
    # what the checkpoint DAG sends to StatsD after the second pass: its one group partition, the same values
    sent = metrics.checkpoint_pass_samples(cfg, flow, cp2.run_record(int(time.time() * 1000)))
    assert [(s.name.removeprefix(CKP), s.label("partition"), s.value) for s in sent] == [
        ("checkpoint_latency_ms", "0", cp2.latency_ms), ("checkpoint_latency_ms_min", "0", cp.latency_ms),
        ("checkpoint_latency_ms_avg", "0", round((cp.latency_ms + cp2.latency_ms) / 2, 3)),
        ("checkpoint_latency_ms_max", "0", cp2.latency_ms)]

    # lag: three new records not copied yet; the RPO is the newest copied record's age
    produce(source, topic, [{"partition": 1, "value": b"late"}] * 3)
    got = scrape(metrics.prometheus_text(metrics.collect(cfg, [flow])))
    assert one(got, "mirrorflow_partition_lag_records", flow=flow.name, partition="1") == 3
    assert one(got, "mirrorflow_flow_lag_records", flow=flow.name) == 3
    assert one(got, "mirrorflow_partition_lag_seconds", flow=flow.name, partition="1") >= 5.0

    # every query of the Grafana dashboard names a metric the exposition emits
    emitted = {n for n, _ in got}
    dash = json.loads((ROOT / "deploy/grafana/mirrorflow-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    named = {m for e in exprs for m in re.findall(r"\b(kafka_connect_mirror_\w+|mirrorflow_\w+)\b", e)}
    assert len(exprs) >= 10 and named and named <= emitted, named - emitted

    # the plugin's endpoint: a login unless [mirrorflow] metrics_public says otherwise
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(tmp_path / "mf.yaml"))
    from fastapi.testclient import TestClient

    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    client = TestClient(create_app())
    assert client.get("/mirrorflow-metrics/metrics").status_code == 401
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    resp = client.get("/mirrorflow-metrics/metrics", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    page = scrape(resp.content)
    assert one(page, SRC + "record_count", topic=remote, partition="0") == 15
    monkeypatch.setenv("AIRFLOW__MIRRORFLOW__METRICS_PUBLIC", "True")
    assert client.get("/mirrorflow-metrics/metrics").status_code == 200

    # Airflow's StatsD: the same names, dashed as MM2 spells them
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(sock.getsockname()[1]))
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
    from airflow.observability.metrics import stats_utils
    from airflow.sdk.observability import stats

    from mirrorflow_airflow.common import emit_samples

    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
    try:
        record = rep.run_record(int(time.time() * 1000))
        emit_samples(metrics.run_samples(flow, record) + metrics.source_samples(flow, record))
        packets = []
        while True:
            try:
                packets.append(sock.recv(65536).decode())
            except TimeoutError:
                break
            if any("record-count" in p for p in packets) and any("run-records" in p for p in packets):
                break
    finally:
        from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger

        stats.initialize(factory=NoStatsLogger, export_legacy_names=False)
        sock.close()
    lines = "\n".join(packets).split("\n")
    assert "airflow.mirrorflow.mirrorsourceconnector.record-count:15|g" in lines, lines
    assert "airflow.mirrorflow.run-records:30|g" in lines, lines
