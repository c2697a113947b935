"""Taking flows over from MirrorMaker 2 run as connectors on a Kafka Connect cluster (from Maven Central
jars): one distributed worker, configured through its REST API as the DR guide does (storage topics
`__connect-mirrormaker-A-to-B-*`, connector `A-to-B-MirrorSourceConnector`) and with a second connector
under Strimzi's name (`A->B.MirrorSourceConnector`, offsets in `mirrormaker2-cluster-offsets`, here as
that connector's own offsets topic). Each connector copies, is stopped (offsets stored), resumed and
killed after copying records whose offsets it never stored; `mirrorflow takeover` then continues every
partition right after the last record MM2 copied: each source record on the target exactly once."""
from __future__ import annotations

import base64
import re
import uuid

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow_dev.mirrormaker import ConnectWorker, connect_worker_properties
from mirrorflow.mm2.connect_offsets import STRIMZI_OFFSETS_TOPIC, strimzi_connector
from mirrorflow.ops.takeover.from_mm2 import TakeoverError, mm2_offsets, read_mm2_offsets, takeover
from mirrorflow.state.history import read_history
from tests.integration.replicate_helpers import assert_copied
from tests.integration.test_mm2_takeover import records, target_topics, wait_for
from tests.integration.test_replicate import cli
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.integration


def test_takeover_from_mirror_source_connectors_on_kafka_connect(tmp_path, source, target, unique, airflow_db,
                                                                 monkeypatch):
    tag = uuid.uuid4().hex[:6]
    dr_src, sz_src, tgt = f"A{tag}", f"S{tag}", f"B{tag}"  # the connectors' aliases and the flows' names
    dr_topic, sz_topic = unique("dr"), unique("strimzi")
    dr_name, sz_name = f"{dr_src}-to-{tgt}-MirrorSourceConnector", strimzi_connector(sz_src, tgt)
    dr_offsets = f"__connect-mirrormaker-{dr_src}-to-{tgt}-offsets"
    # the DR guide's connector keeps topic names (IdentityReplicationPolicy); Strimzi's prefixes them
    remotes = {dr_name: dr_topic, sz_name: f"{sz_src}.{sz_topic}"}
    for t in (dr_topic, sz_topic):
        create_topic(source, t, partitions=2)
        produce(source, t, records(40, 0, "a"))
    common = {
        "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
        "target.cluster.alias": tgt,
        "source.cluster.bootstrap.servers": source.bootstrap_servers,
        "target.cluster.bootstrap.servers": target.bootstrap_servers,
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset-syncs.topic.location": "target",
        "heartbeats.replication.enabled": "false",
        "sync.topic.acls.enabled": "false",
        "sync.topic.configs.enabled": "false",
        "consumer.isolation.level": "read_committed",
    }
    connectors = {
        dr_name: {**common, "source.cluster.alias": dr_src, "topics": re.escape(dr_topic),
                  "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"},
        sz_name: {**common, "source.cluster.alias": sz_src, "topics": re.escape(sz_topic),
                  "offsets.storage.topic": STRIMZI_OFFSETS_TOPIC,
                  "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"},  # as Strimzi
    }
    props = connect_worker_properties(
        target.bootstrap_servers, f"connect-mirrormaker-{dr_src}-to-{tgt}", f"__connect-mirrormaker-{dr_src}-to-{tgt}",
        {"offset.flush.interval.ms": "600000"},  # offsets are stored when a connector stops, not while we look
    )
    cfg = write_config(tmp_path / "mf.yaml", {dr_src: source, sz_src: source, tgt: target}, {
        f"{dr_src}->{tgt}": {"topics": re.escape(dr_topic), "replication.policy.class": "IdentityReplicationPolicy",
                             "heartbeats.replication.enabled": False, "lease.timeout.seconds": 1},
        f"{sz_src}->{tgt}": {"topics": re.escape(sz_topic), "heartbeats.replication.enabled": False,
                             "lease.timeout.seconds": 1},
    })
    dr_flow, sz_flow = cfg.flow(f"{dr_src}->{tgt}"), cfg.flow(f"{sz_src}->{tgt}")

    def copied(n: int) -> bool:
        have = target_topics(target)
        return all(r in have and len(consume_all(target, r)) == n for r in remotes.values())

    worker = ConnectWorker(tmp_path / "connect", props).start()
    try:
        worker.wait_ready()
        for name, conf in connectors.items():  # configured through the REST API, as an operator does
            worker.put_connector(name, conf)
        wait_for("both connectors to copy 40 records", lambda: copied(40), mm2=worker)
        for name in connectors:  # KIP-875 stop: the tasks stop and commit their offsets
            worker.rest("PUT", worker.path(name, "/stop"))
        wait_for("both connectors to stop", lambda: all(worker.state(n) == "STOPPED" for n in connectors), mm2=worker)
        # what the offsets topics hold is what Connect itself reports (GET /connectors/{name}/offsets)
        for name, topic, alias, offsets_topic in ((dr_name, dr_topic, dr_src, dr_offsets),
                                                  (sz_name, sz_topic, sz_src, STRIMZI_OFFSETS_TOPIC)):
            rest = {(o["partition"]["topic"], o["partition"]["partition"]): o["offset"]["offset"]
                    for o in worker.rest("GET", worker.path(name, "/offsets"))["offsets"]}
            flow = dr_flow if name == dr_name else sz_flow
            with FlowClients(cfg, flow) as clients:
                assert mm2_offsets(clients, offsets_topic, alias, name) == rest == {(topic, 0): 19, (topic, 1): 19}
        # the connectors again: 10 more copied each, then the worker dies before storing their offsets
        for t in (dr_topic, sz_topic):
            produce(source, t, records(10, 40, "b"))
        for name in connectors:
            worker.rest("PUT", worker.path(name, "/resume"))
        wait_for("both connectors to copy 50 records", lambda: copied(50), mm2=worker)
    finally:
        if worker.proc is not None and worker.proc.poll() is None:
            worker.proc.kill()
        worker.stop()
    for t in (dr_topic, sz_topic):
        produce(source, t, records(20, 50, "c"))

    with FlowClients(cfg, dr_flow) as clients:
        # dedicated mode's offsets topic is not there: the error names the offsets topics that are
        with pytest.raises(TakeoverError, match=rf"mm2-offsets\.{dr_src}\.internal' does not exist.*{dr_offsets}"):
            takeover(clients, dry_run=True)
        # a connector that stored nothing here: the error lists what did
        with pytest.raises(TakeoverError, match=rf"'MirrorSourceConnector' stored no offsets.*'{dr_name}' "
                                                rf"\(source alias '{dr_src}', 2 partition\(s\)\)"):
            takeover(clients, dr_offsets, connector="MirrorSourceConnector", dry_run=True)
        dry = takeover(clients, dr_offsets, connector=dr_name, dry_run=True)
        assert dry.connector == dr_name
        assert [(p.partition, p.mm2_offset, p.already_copied, p.next, p.action) for p in dry.partitions] == [
            (0, 19, 5, 25, "take-over"), (1, 19, 5, 25, "take-over")]
        assert set(read_mm2_offsets(clients, STRIMZI_OFFSETS_TOPIC)) == {(sz_name, sz_src)}
    # the CLI: the DR guide's offsets topic, its one MirrorSourceConnector for this source chosen and named
    out = cli(cfg, "takeover", "--flow", dr_flow.name, "--mm2-offsets-topic", dr_offsets, "--yes").stdout
    assert f"took over 2 partition(s) from MirrorMaker 2 (connector '{dr_name}' in {dr_offsets})" in out, out
    # Strimzi's names, given as `config import` prints them
    out = cli(cfg, "takeover", "--flow", sz_flow.name, "--offsets-topic", STRIMZI_OFFSETS_TOPIC,
              "--connector", sz_name, "--yes").stdout
    assert f"took over 2 partition(s) from MirrorMaker 2 (connector '{sz_name}' in {STRIMZI_OFFSETS_TOPIC})" in out
    assert out.count("(+5 copied after MM2's last stored offset); mirrorflow continues at 25") == 2, out
    with FlowClients(cfg, sz_flow) as clients:  # the operations history has the takeover, who and from what
        [op] = [r for r in read_history(clients) if r.kind == "takeover"]
        assert op.summary == f"took over from MirrorMaker 2 (connector {sz_name}, offsets in {STRIMZI_OFFSETS_TOPIC})"
        assert op.figures == {"partitions": 2} and "@" in op.by

    # the takeover DAG's Params name the same (a dry run now: nothing left to take over)
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from mirrorflow_airflow.dag_builders.takeover import build_takeover_dag

    run = build_takeover_dag(cfg, sz_flow).test(run_conf={
        "mm2_offsets_topic": STRIMZI_OFFSETS_TOPIC, "mm2_connector": sz_name, "mm2_source": None})
    [ti] = run.get_task_instances()
    assert ti.state == "success"
    out = ti.xcom_pull(task_ids="takeover")
    assert (out["connector"], [p["action"] for p in out["partitions"]]) == (sz_name, ["skip", "skip"])

    for flow in (dr_flow, sz_flow):
        cli(cfg, "replicate", "--flow", flow.name, "--once", "--mode", "direct")
    src, _ = assert_copied(source, target, sz_topic, remote=remotes[sz_name])  # 70 records, each once, in order
    assert len(src) == 70
    # the DR guide's worker sets no header.converter: Connect's SimpleHeaderConverter wrote MM2's copies'
    # header values as Base64 text; from the takeover point on mirrorflow's copies keep the bytes
    src = consume_all(source, dr_topic)
    want = [(r.partition, r.key, r.value, tuple((k, base64.b64encode(v)) for k, v in r.headers), r.timestamp)
            if r.offset < 25 else r.content() for r in src]
    assert len(src) == 70 and [r.content() for r in consume_all(target, dr_topic)] == want
