"""End to end, as an application sees it (issue 38 item 3): Avro records produced on A through A's registry
with confluent-kafka's AvroSerializer (two schema versions), an application's group reading part of them on
A, copied by mirrorflow (topic sync, a replication run, a checkpoint pass, the schema pass), then an
unplanned failover: the group resumes on B with the AvroDeserializer against B's registry, and every record
it had not read decodes to what was produced. Before the schema pass the failover's preflight counts the
schema versions B lacks; after it, none. Real brokers, real Apicurio Registry 3.3.3 on each side."""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.ops.dr.caller import Caller
from mirrorflow.ops.dr.failover_commit import commit_failover
from mirrorflow.ops.dr.failover_preflight import plan_failover
from mirrorflow.replication.run.runner import run_once
from mirrorflow.schemas.replicate import replicate_schemas
from tests.integration.test_schemas import schema_config
from tests.support import create_topic

pytestmark = pytest.mark.integration

V1 = """{"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"id","type":"long"},{"name":"item","type":"string"}]}"""
V2 = """{"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"id","type":"long"},{"name":"item","type":"string"},
  {"name":"qty","type":"int","default":1},{"name":"note","type":["null","string"],"default":null}]}"""


def test_avro_records_decode_on_the_target_through_its_registry(tmp_path, source, target, registries, unique):
    p = unique("avro")
    topic = f"{p}.orders"
    create_topic(source, topic, partitions=2)
    # its own flow state and group: the failover below must not stop or move the session's other tests' A->B
    cfg = schema_config(tmp_path, source, target, registries, p,
                        **{"tasks.max": 2, "state.namespace": p, "groups": f"app-{p}",
                           "heartbeats.replication.enabled": False})  # other tests' heartbeats on A: not its business
    flow = cfg.flow("A->B")

    a_client = SchemaRegistryClient({"url": registries["A"].confluent_url})
    produced = []
    prod = Producer({"bootstrap.servers": source.bootstrap_servers})
    for schema, records in ((V1, [{"id": i, "item": f"item-{i}"} for i in range(12)]),
                            (V2, [{"id": 100 + i, "item": f"new-{i}", "qty": i, "note": None if i % 2 else f"n{i}"}
                                  for i in range(8)])):
        ser = AvroSerializer(a_client, schema)
        for r in records:
            value = ser(r, SerializationContext(topic, MessageField.VALUE))
            prod.produce(topic, key=str(r["id"]).encode(), value=value, partition=r["id"] % 2)
            produced.append(r)
    assert prod.flush(30) == 0
    ids = [v.schema_id for v in (a_client.get_version(f"{topic}-value", n) for n in (1, 2))]

    group, read_on_a = f"app-{p}", {0: 3, 1: 4}  # the application read that far on A and committed
    app = Consumer({"bootstrap.servers": source.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    app.commit(offsets=[TopicPartition(topic, q, o) for q, o in read_on_a.items()], asynchronous=False)
    app.close()

    assert sync_flow(cfg, flow).ok
    run = run_once(cfg, flow, mode="direct")
    assert run.records == 20
    assert group in emit_checkpoints(cfg, flow).groups

    before = plan_failover(cfg, flow, mode="unplanned", caller=Caller(dry_run=True))
    assert before.schemas_missing == 2
    assert f"schemas: 2 version(s) registered on A not yet in B's registry" in before.render()

    copied = replicate_schemas(cfg, flow)
    assert copied.ids == sorted(ids) and copied.subjects[f"{topic}-value"] == f"A.{topic}-value"
    after = plan_failover(cfg, flow, mode="unplanned")
    assert after.schemas_missing == 0 and after.plan is not None
    assert commit_failover(cfg, flow, after.plan, "the operator").done  # A is lost: the group moves to B

    # the application on B: B's registry only, its group where the failover put it
    deser = AvroDeserializer(SchemaRegistryClient({"url": registries["B"].confluent_url}))
    cons = Consumer({"bootstrap.servers": target.bootstrap_servers, "group.id": group,
                     "auto.offset.reset": "error", "enable.auto.commit": False, "isolation.level": "read_committed"})
    per_partition = [[r for r in produced if r["id"] % 2 == q] for q in (0, 1)]
    unread = [r for q in (0, 1) for r in per_partition[q][read_on_a[q]:]]  # each once, none it had read
    assert len(unread) == 13
    cons.subscribe([f"A.{topic}"])
    decoded, embedded = [], set()
    try:
        for _ in range(200):
            m = cons.poll(0.5)
            if m is None:
                if len(decoded) == len(unread):
                    break
                continue
            assert not m.error(), m.error()
            embedded.add(int.from_bytes(m.value()[1:5], "big"))  # the id each record carries, as A wrote it
            decoded.append(deser(m.value(), SerializationContext(f"A.{topic}", MessageField.VALUE)))
    finally:
        cons.close()
    assert sorted(decoded, key=lambda r: r["id"]) == sorted(unread, key=lambda r: r["id"])
    assert embedded == set(ids)
