"""End to end, as an application sees it (issue 38 item 3): Avro records produced on A through A's registry
with confluent-kafka's AvroSerializer (two schema versions), copied by mirrorflow (topic sync, a replication
run, the schema pass), consumed on B with the AvroDeserializer against B's registry: every record decodes
to what was produced. Before the schema pass the failover's preflight counts the schema versions B lacks;
after it, none. Real brokers, real Apicurio Registry 3.3.3 on each side."""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from mirrorflow.metadata.sync import sync_flow
from mirrorflow.ops.dr.failover_preflight import plan_failover
from mirrorflow.replication.runner import run_once
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
    cfg = schema_config(tmp_path, source, target, registries, p, **{"tasks.max": 2})
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

    assert sync_flow(cfg, flow).ok
    run = run_once(cfg, flow, mode="direct")
    assert run.records == 20

    before = plan_failover(cfg, flow, mode="unplanned", dry_run=True)
    assert before.schemas_missing == 2
    assert f"schemas: 2 version(s) registered on A not yet in B's registry" in before.render()

    copied = replicate_schemas(cfg, flow)
    assert copied.ids == sorted(ids) and copied.subjects[f"{topic}-value"] == f"A.{topic}-value"
    after = plan_failover(cfg, flow, mode="unplanned", dry_run=True)
    assert after.schemas_missing == 0

    # an application on B: B's registry only
    deser = AvroDeserializer(SchemaRegistryClient({"url": registries["B"].confluent_url}))
    cons = Consumer({"bootstrap.servers": target.bootstrap_servers, "group.id": f"app-{p}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": "read_committed"})
    cons.subscribe([f"A.{topic}"])
    decoded, embedded = [], set()
    try:
        for _ in range(200):
            m = cons.poll(0.5)
            if m is None or m.error():
                if len(decoded) == len(produced):
                    break
                continue
            embedded.add(int.from_bytes(m.value()[1:5], "big"))  # the id each record carries, as A wrote it
            decoded.append(deser(m.value(), SerializationContext(f"A.{topic}", MessageField.VALUE)))
    finally:
        cons.close()
    v2_defaults = {"qty": 1, "note": None}
    expect = sorted(({**v2_defaults, **r} if "qty" in r else r for r in produced), key=lambda r: r["id"])
    assert sorted(decoded, key=lambda r: r["id"]) == expect
    assert embedded == set(ids)
