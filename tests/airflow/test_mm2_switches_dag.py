"""MM2's six `*.enabled` switches, each off and on, through the DAGs: a dag.test()
run of the checkpoint, heartbeat or sync DAG; off: the switch's task ends skipped with the reason and writes
nothing; on: its effect is on the cluster.

Each case has its own source alias (its own flow: state, heartbeats key and checkpoint topic are
its own). dag.test() only makes manual runs, and a manual sync run always syncs topics (MM2 lists
them once at start even with refresh.topics.enabled=false); the refresh.topics case therefore
makes its run count as scheduled, the run type being the only thing that differs.
"""

from __future__ import annotations

import os
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import CheckpointStore
from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.mm2.formats import Heartbeat
from mirrorflow.replication.run.runner import run_once
from tests.integration.replicate_helpers import target_offset_of
from tests.support import admin, create_topic, produce, write_config

pytestmark = [pytest.mark.airflow, pytest.mark.integration]
DAGS = os.path.join(os.path.dirname(__file__), "..", "..", "dags")

# switch -> (DAG kind, the task it governs, the reason an `off` run's task is skipped with)
SWITCHES = {
    "emit.checkpoints.enabled": ("checkpoint", "checkpoint", "emit.checkpoints.enabled=false"),
    "emit.heartbeats.enabled": ("heartbeat", "heartbeat", "emit.heartbeats.enabled=false"),
    "sync.group.offsets.enabled": ("checkpoint", "sync_group_offsets", "sync.group.offsets.enabled=false"),
    "refresh.topics.enabled": ("sync", "topics_and_partitions", "refresh.topics.enabled=false"),
    "sync.topic.configs.enabled": ("sync", "configs", "disabled by sync.topic.configs.enabled=false"),
    "sync.topic.acls.enabled": ("sync", "acls", "disabled by sync.topic.acls.enabled=false"),
}
CASES = [pytest.param(s, on, id=f"{s}={'on' if on else 'off'}") for s in SWITCHES for on in (False, True)]


def dag_of(kind: str, cfg, flow):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.path.join(DAGS, f"mirrorflow_{kind}.py"))
    assert bag.import_errors == {}
    return bag.get_dag(f"mirrorflow_{kind}__{flow.id}")


def committed_on(cluster, group: str, topic: str) -> int:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        c.close()


def heartbeats_from(cfg, cluster, source_alias: str, target_alias: str) -> list[Heartbeat]:
    from mirrorflow.clients import cluster_connection

    if "heartbeats" not in admin(cluster).list_topics(timeout=10).topics:
        return []
    beats = [Heartbeat.decode(r.key, r.value) for r in read_partition(cluster_connection(cfg.cluster("B")), "heartbeats")]
    return [h for h in beats if (h.source, h.target) == (source_alias, target_alias)]


@pytest.mark.parametrize("switch,on", CASES)
def test_switch_through_its_dag(switch, on, request, tmp_path, airflow_db, monkeypatch, capfd):
    kind, task, reason = SWITCHES[switch]
    acls = switch == "sync.topic.acls.enabled"
    source = request.getfixturevalue("sasl_cluster" if acls else "source")
    target = request.getfixturevalue("sasl_target" if acls else "target")
    tag = uuid.uuid4().hex[:6]
    src = f"S{tag}"  # this case's own flow
    topic = f"sw-{tag}.orders"
    remote = f"{src}.{topic}"
    # heartbeats every 60 s: one per run of the heartbeat DAG (its window), nothing deferred
    props = {"topics": f"sw-{tag}\\..*", "state.topic.partitions": 1, "emit.checkpoints.interval.seconds": 5,
             "emit.heartbeats.interval.seconds": 60, "sync.group.offsets.enabled": True,
             "heartbeats.replication.enabled": False, switch: on}
    cfg = write_config(tmp_path / "mf.yaml", {src: source, "B": target}, {f"{src}->B": props})
    flow = cfg.flow(f"{src}->B")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    group = f"g-{tag}"

    if kind == "checkpoint":  # a replicated topic and a group that committed on the source
        create_topic(source, topic)
        produce(source, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(10)])
        c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
        c.close()
        assert sync_flow(cfg, flow, "topics").ok
        assert run_once(cfg, flow, mode="direct").records == 10
    elif switch == "sync.topic.configs.enabled":  # the remote topic exists without the source's config
        create_topic(source, topic, config={"retention.ms": "3600000"})
        create_topic(target, remote)
    elif acls:
        create_topic(source, topic)
        a = admin(source)
        binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:u{tag}", "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        for f in a.create_acls([binding]).values():
            f.result(15)
        create_topic(target, remote)
    elif kind == "heartbeat":  # nothing to set up: the run writes to `heartbeats` on both clusters
        pass
    else:  # refresh.topics: a source topic without its remote topic; the run counts as scheduled
        create_topic(source, topic, partitions=2)
        from mirrorflow_airflow.dag_builders import timers

        monkeypatch.setattr(timers, "TRIGGERED", ())

    capfd.readouterr()
    run = dag_of(kind, cfg, flow).test()
    out = "".join(capfd.readouterr())
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert states[task] == ("success" if on else "skipped"), states
    if not on:
        assert reason in out

    if switch == "emit.checkpoints.enabled":
        with FlowClients(cfg, flow) as clients:
            got = CheckpointStore.load(clients).for_group(group)
        # downstream: where source offset 4's copy is (each copy unit's aborted transaction comes first)
        want = target_offset_of(source, target, topic, remote, 0, 4)
        assert {k: (v.upstream_offset, v.downstream_offset) for k, v in got.items()} == (
            {(remote, 0): (4, want)} if on else {})
        if not on:  # group sync works from the checkpoints: it has nothing to work from either
            assert states["sync_group_offsets"] == "skipped"
    elif switch == "sync.group.offsets.enabled":
        want = target_offset_of(source, target, topic, remote, 0, 4)
        assert committed_on(target, group, remote) == (want if on else -1001)  # -1001: no committed offset
    elif switch == "emit.heartbeats.enabled":
        assert len(heartbeats_from(cfg, target, src, "B")) == (1 if on else 0)
    elif switch == "refresh.topics.enabled":
        topics = admin(target).list_topics(timeout=10).topics
        assert (remote in topics) == on
        if on:
            assert len(topics[remote].partitions) == 2
    elif switch == "sync.topic.configs.enabled":
        from confluent_kafka.admin import ConfigResource

        a = admin(target)
        res = ConfigResource(ConfigResource.Type.TOPIC, remote)
        conf = a.describe_configs([res])[res].result(15)
        assert (conf["retention.ms"].value == "3600000") == on
    else:
        from confluent_kafka.admin import AclBindingFilter

        flt = AclBindingFilter(ResourceType.TOPIC, remote, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                               AclPermissionType.ANY)
        a = admin(target)
        got = sorted((b.principal, b.operation.name) for b in a.describe_acls(flt).result(15))
        assert got == ([(f"User:u{tag}", "READ")] if on else [])
