"""Helpers shared by the replication integration tests."""
from __future__ import annotations

import uuid

from confluent_kafka.admin import NewTopic

from tests.support import admin, consume_all, create_topic, load_offset_map, write_config


def unit_slot(cfg, flow, unit):
    """(task layout, slot) a plan of the flow gives `unit`'s partition now (the layout ensured)."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.replication.plan.planner import gather_inputs

    with FlowClients(cfg, flow) as clients:
        inputs = gather_inputs(clients)
    return inputs.layout, inputs.slot_of[(unit.topic, unit.partition)]


def copy_unit(clients, unit, faults=None, at=None):
    """One unit copied as a task of its own, as a Spark task holding only it would (`at`: the
    (layout, slot) to copy with, default `unit_slot`); its UnitResult."""
    from mirrorflow.replication.task.faults import NO_FAULTS
    from mirrorflow.replication.task.task_attempt import TaskAttempt
    from mirrorflow.replication.task.task_copier import copy_task

    layout, slot = at or unit_slot(clients.cfg, clients.flow, unit)
    return copy_task(clients, layout, slot, [unit], TaskAttempt(faults=faults or NO_FAULTS))[0]


def make_flow(tmp_path, source, target, prefix: str, **props):
    """A config with flow A->B replicating topics `<prefix>.*` (state topics with 2 partitions)."""
    # a crash test's next run may start at once: a killed run's lease lapses after a second
    # and other tests' `heartbeats` topic on A is not this test's business
    flow_props = {"topics": f"{prefix}.*", "tasks.max": 4, "state.topic.partitions": 2,
                  "producer.transaction.timeout.ms": 15000, "lease.timeout.seconds": 1,
                  "heartbeats.replication.enabled": False, **props}
    cfg = write_config(tmp_path / f"mf-{uuid.uuid4().hex[:6]}.yaml", {"A": source, "B": target},
                       {"A->B": flow_props})
    return cfg, cfg.flow("A->B")


def mirror_topic(source, target, topic: str, partitions: int = 1, config: dict | None = None,
                 target_config: dict | None = None) -> str:
    """Create `topic` on the source and `A.<topic>` on the target (what `mirrorflow sync` does)."""
    create_topic(source, topic, partitions, config)
    remote = f"A.{topic}"
    create_topic(target, remote, partitions, target_config)
    return remote


def assert_copied(source, target, topic: str, remote: str | None = None, records=None):
    """Every committed source record is on the target exactly once, in order, byte-identical.
    `records`: the (source, target) records when the caller has already read them (large topics)."""
    remote = remote or f"A.{topic}"
    src, dst = records if records is not None else (consume_all(source, topic), consume_all(target, remote))
    assert src, f"no records in source topic {topic}"
    assert [r.content() for r in dst] == [r.content() for r in src]
    return src, dst


def assert_map_exact(cfg, flow, source, target, topic: str, partitions: int = 1, records=None):
    """The offset map sends every source offset g to the target offset of the first record >= g."""
    remote = f"A.{topic}"
    src, dst = records if records is not None else (consume_all(source, topic), consume_all(target, remote))
    maps = load_offset_map(cfg, flow, [(topic, p) for p in range(partitions)])
    for p in range(partitions):
        s = [r for r in src if r.partition == p]
        d = [r for r in dst if r.partition == p]
        assert len(s) == len(d)
        pm = maps[(topic, p)]
        for rs, rd in zip(s, d):
            # (not a test module: no assertion rewriting) say which offset, what the map says, where it is
            assert pm.target_of(rs.offset) == rd.offset, (
                f"{topic}[{p}] source offset {rs.offset}: the map says target {pm.target_of(rs.offset)}, "
                f"the record is at {rd.offset}; runs near it: {[r for r in pm.runs if abs(r.src - rs.offset) < 50_000][:6]}"
            )
        # every source offset, including holes/markers/aborted records, translates to the next record
        last_src = s[-1].offset if s else -1
        j = 0
        for g in range(0, last_src + 1):
            while s[j].offset < g:
                j += 1
            t = pm.translate(g)
            assert t.target_offset == d[j].offset, (p, g, t)
    return maps


def delete_records(cluster, topic: str, partition: int, before: int) -> None:
    from confluent_kafka import TopicPartition

    a = admin(cluster)
    futs = a.delete_records([TopicPartition(topic, partition, before)])
    for f in futs.values():
        f.result(30)


def add_partitions(cluster, topic: str, total: int) -> None:
    from confluent_kafka.admin import NewPartitions

    a = admin(cluster)
    a.create_partitions([NewPartitions(topic, total)])[topic].result(30)


__all__ = ["make_flow", "mirror_topic", "assert_copied", "assert_map_exact", "delete_records", "add_partitions",
           "NewTopic"]


def target_offset_of(source, target, topic: str, remote: str, partition: int, source_offset: int) -> int:
    """Ground truth from the records: the target offset of the copy of the source record at
    `source_offset` (values are unique)."""
    [rec] = [r for r in consume_all(source, topic, [partition]) if r.offset == source_offset]
    [copy] = [r for r in consume_all(target, remote, [partition]) if r.content() == rec.content()]
    return copy.offset
