"""`mirrorflow demo seed`: sample data on a flow's source for the README demo.

Creates `orders` (3 partitions) and `payments` (compacted) on the source, writes records with
keys, headers, timestamps and a tombstone, and lets the consumer group `billing` read and commit
part of `orders`, so a replicate + checkpoint run has something to show.

`mirrorflow demo schemas`: two versions of an Avro schema for `orders-value` registered in the source's
schema registry (its `schema.registry.url`; `mirrorflow dev registry up` starts local ones), so
`mirrorflow schemas` has ids to copy.

`mirrorflow demo postgres up|down`: the demo's Airflow database on a local PostgreSQL instead of
SQLite (`scripts/demo --postgres`); `up` prints the sql_alchemy_conn of its database `airflow`.
"""

from __future__ import annotations

import argparse
import time

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from mirrorflow.cli.registry import command, load_config
from mirrorflow.clients import cluster_connection
from mirrorflow.errors import MirrorflowError
from mirrorflow_dev.postgres import DevPostgresServer

ORDERS, PAYMENTS, GROUP = "orders", "payments", "billing"


def _args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="demo_cmd", required=True)
    seed = sub.add_parser("seed", help="create sample topics, records and a consumer group on the source")
    seed.add_argument("--flow", default="A->B")
    seed.add_argument("--records", type=int, default=3000)
    schemas = sub.add_parser("schemas", help="register sample Avro schemas in the source's schema registry")
    schemas.add_argument("--flow", default="A->B")
    pg = sub.add_parser("postgres", help="a local PostgreSQL for the demo's Airflow (scripts/demo --postgres)")
    pg_sub = pg.add_subparsers(dest="postgres_cmd", required=True)
    pg_sub.add_parser("up", help="start it (or find it running); print the database's sql_alchemy_conn")
    down = pg_sub.add_parser("down", help="stop it")
    down.add_argument("--remove", action="store_true", help="delete its data directory too")


def _postgres(args: argparse.Namespace) -> int:
    server = DevPostgresServer()
    if args.postgres_cmd == "down":
        print("PostgreSQL stopped" if server.down(remove=args.remove) else "PostgreSQL was not running")
        return 0
    server.up()
    print(server.create_database("airflow", fresh=False))
    return 0


@command("demo", "sample data for the demo", _args)
def demo(args: argparse.Namespace) -> int:
    if args.demo_cmd == "postgres":
        return _postgres(args)
    if args.demo_cmd == "schemas":
        return _schemas(args)
    cfg = load_config(args)
    flow = cfg.flow(args.flow)
    src = cfg.cluster(flow.source)
    conn = cluster_connection(src)
    admin = conn.admin()
    existing = admin.list_topics(timeout=10).topics
    new = [
        t
        for t in (NewTopic(ORDERS, 3, 1), NewTopic(PAYMENTS, 1, 1, config={"cleanup.policy": "compact"}))
        if t.topic not in existing
    ]
    for fut in admin.create_topics(new).values() if new else []:
        fut.result(30)
    p = conn.producer({"linger.ms": 20})
    now = int(time.time() * 1000)
    failed: list[str] = []

    def on_delivery(err, _msg):
        if err:
            failed.append(str(err))

    for i in range(args.records):
        p.produce(
            ORDERS,
            key=f"customer-{i % 50}".encode(),
            value=f'{{"order": {i}, "amount": {i % 97}}}'.encode(),
            partition=i % 3,
            headers=[("source", b"demo"), ("seq", str(i).encode())],
            timestamp=now - (args.records - i) * 1000,
            on_delivery=on_delivery,
        )
        if i % 10 == 0:
            p.produce(
                PAYMENTS,
                key=f"customer-{i % 50}".encode(),
                value=None if i % 70 == 0 else f'{{"paid": {i}}}'.encode(),
                on_delivery=on_delivery,
            )
        p.poll(0)
    p.flush(60)
    if failed:
        raise MirrorflowError(f"seeding {flow.source} failed: {failed[0]}")
    # the group `billing` reads the first half of each partition of `orders` and commits
    c = conn.consumer({"group.id": GROUP, "enable.auto.commit": False})
    per_partition = args.records // 3 // 2
    c.assign([TopicPartition(ORDERS, p_, 0) for p_ in range(3)])
    positions = {p_: 0 for p_ in range(3)}
    deadline = time.monotonic() + 60
    while min(positions.values()) < per_partition and time.monotonic() < deadline:
        for m in c.consume(500, timeout=1):
            if m.error():
                raise KafkaException(m.error())
            positions[m.partition()] = max(positions[m.partition()], m.offset() + 1)
    committed = [TopicPartition(ORDERS, p_, min(pos, per_partition)) for p_, pos in positions.items()]
    c.commit(offsets=committed, asynchronous=False)
    c.close()
    print(
        f"seeded {flow.source} ({src.bootstrap_servers}): {args.records} records in {ORDERS!r} (3 partitions), "
        f"{args.records // 10} in {PAYMENTS!r} (compacted, with tombstones)"
    )
    print(
        f"consumer group {GROUP!r} committed: " + ", ".join(f"{ORDERS}-{tp.partition}@{tp.offset}" for tp in committed)
    )
    return 0


ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "demo",
    "fields": [{"name": "order", "type": "long"}, {"name": "amount", "type": "int"}],
}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "currency", "type": "string", "default": "EUR"}]}


def _schemas(args: argparse.Namespace) -> int:
    import json

    from mirrorflow.schemas.registry_client import client_for, quote_subject

    cfg = load_config(args)
    flow = cfg.flow(args.flow)
    client = client_for(cfg.cluster(flow.source))
    if client is None:
        raise MirrorflowError(
            f"cluster {flow.source!r} has no schema.registry.url in the config (`mirrorflow dev registry up` "
            "starts local registries and prints their urls)"
        )
    subject = f"{ORDERS}-value"
    for schema in (ORDER_V1, ORDER_V2):
        got = client.post(f"/subjects/{quote_subject(subject)}/versions", {"schema": json.dumps(schema)})
        fields = len(schema["fields"])
        print(f"{flow.source}'s registry: {subject} ({schema['name']}, {fields} fields): id {got['id']}")
    return 0
