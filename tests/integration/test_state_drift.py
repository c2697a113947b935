"""State topics are checked at every run, on real brokers: a progress topic altered to
cleanup.policy=delete, or partitions added to a state topic, stop the next `replicate` with one
error naming the topic and the setting; set back, the flow goes on exactly. An empty progress
beside a remote partition that holds committed records stops that partition instead of copying it
again."""
from __future__ import annotations

import pytest

from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.names import offset_map_topic, progress_topic
from mirrorflow.state.state_topics import state_key, state_partition, state_topic_configs
from tests.integration.replicate_helpers import add_partitions, assert_copied
from tests.integration.test_replicate import cli, records
from tests.support import admin, consume_all, create_topic, produce, read_progress, set_topic_config, write_config

pytestmark = pytest.mark.integration


def own_flow(tmp_path, source, target, unique, tag: str, **props):
    """A flow of this test's own (its own source alias, so its own state topics: other tests' flows
    A->B share theirs), its topic `<pfx>.orders` (2 partitions) on the source and its remote."""
    alias = unique(tag).replace("-", "").replace("_", "")
    pfx = unique(f"{tag}t")
    topic = f"{pfx}.orders"
    create_topic(source, topic, 2)
    create_topic(target, f"{alias}.{topic}", 2)
    name = f"{alias}->B"
    cfg = write_config(tmp_path / f"{alias}.yaml", {alias: source, "B": target},
                       {name: {"topics": f"{pfx}\\..*", "tasks.max": 2, "state.topic.partitions": 2,
                               "lease.timeout.seconds": 1, "heartbeats.replication.enabled": False, **props}})
    return cfg, cfg.flow(name), topic, f"{alias}.{topic}"


def replicate(cfg, flow):
    return cli(cfg, "replicate", "--flow", flow.name, "--once", "--mode", "direct", check=False)


def test_a_progress_topic_no_longer_compacted_stops_the_run_until_set_back(tmp_path, source, target, unique):
    cfg, flow, t, remote = own_flow(tmp_path, source, target, unique, "SDpol")
    produce(source, t, records(40, 2))
    first = replicate(cfg, flow)
    assert first.returncode == 0, first.stderr[-3000:]
    prog = progress_topic(flow)

    set_topic_config(target, prog, cleanup_policy="delete")  # a platform's topic policy, say
    produce(source, t, records(20, 2, seed="more"))
    stopped = replicate(cfg, flow)
    assert stopped.returncode != 0, stopped.stdout
    err = stopped.stderr
    assert f"state topic '{prog}' has cleanup.policy=delete, it must be compact as the flow created it" in err, err
    assert f"--entity-name {prog} --add-config cleanup.policy=compact" in err, err
    assert "nothing was read or written" in err, err
    assert {k: v.next for k, v in read_progress(cfg, flow, [(t, 0), (t, 1)]).items()} == {(t, 0): 20, (t, 1): 20}

    set_topic_config(target, prog, cleanup_policy="compact")
    again = replicate(cfg, flow)
    assert again.returncode == 0, again.stderr[-3000:]
    assert_copied(source, target, t, remote)


def test_a_first_run_creates_every_state_topic_with_small_index_files(tmp_path, source, target, unique):
    """segment.index.bytes=256 KiB on each state topic (state_topics.STATE_INDEX_BYTES: a segment's first index
    entry made the kernel zero the broker's whole sparse 10 MiB index), and the copy exact."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    cfg, flow, t, remote = own_flow(tmp_path, source, target, unique, "SDidx")
    produce(source, t, records(40, 2))
    first = replicate(cfg, flow)
    assert first.returncode == 0, first.stderr[-3000:]
    assert_copied(source, target, t, remote)
    topics = sorted(state_topic_configs(flow))
    a = admin(target)
    answers = a.describe_configs([ConfigResource(ResourceType.TOPIC, x) for x in topics])
    got = {res.name: fut.result(30)["segment.index.bytes"].value for res, fut in answers.items()}
    assert got == {x: str(256 * 1024) for x in topics}


def test_partitions_added_to_a_state_topic_stop_the_run_naming_it(tmp_path, source, target, unique):
    cfg, flow, t, _ = own_flow(tmp_path, source, target, unique, "SDpart")
    produce(source, t, records(10, 2))
    first = replicate(cfg, flow)
    assert first.returncode == 0, first.stderr[-3000:]
    # a changed setting is not a drift: the topics keep the count they were created with
    cfg2 = write_config(tmp_path / "more.yaml", {flow.source: source, "B": target},
                        {flow.name: {**{k: flow.props[k] for k in ("topics", "tasks.max", "lease.timeout.seconds",
                                                                 "heartbeats.replication.enabled")},
                                     "state.topic.partitions": 4}})
    changed = replicate(cfg2, cfg2.flow(flow.name))
    assert changed.returncode == 0, changed.stderr[-3000:]

    for topic, added in ((offset_map_topic(flow), 3), (progress_topic(flow), 5)):
        add_partitions(target, topic, added)
        stopped = replicate(cfg, flow)
        assert stopped.returncode != 0, stopped.stdout
        assert f"state topic '{topic}' has {added} partitions, it was created with 2: partitions were added" in (
            stopped.stderr), stopped.stderr
        assert "Kafka cannot remove partitions" in stopped.stderr


def test_an_empty_progress_beside_a_non_empty_remote_partition_stops_that_partition(tmp_path, source, target, unique):
    """The flow's progress of a partition is gone (here: a tombstone, as a progress topic that was
    not compacted loses an idle partition's record) while its remote partition holds the copies:
    the partition stops, named, instead of being copied again; the other goes on."""
    from confluent_kafka import Producer

    cfg, flow, t, remote = own_flow(tmp_path, source, target, unique, "SDempty")
    produce(source, t, records(30, 2))
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 30, rep.render()
    prog = progress_topic(flow)
    n = admin(target).list_topics(prog, timeout=10).topics[prog].partitions
    p = Producer({**target.client_config(), "enable.idempotence": True})
    p.produce(prog, None, state_key(t, 1), state_partition(t, 1, len(n)))
    assert p.flush(30) == 0
    assert (t, 1) not in read_progress(cfg, flow, [(t, 1)])

    produce(source, t, records(10, 2, seed="more"))
    rep = run_once(cfg, flow, mode="direct")
    text = rep.render()
    assert rep.stopped_partitions == 1, text
    assert f"target partition {remote}[1] holds records (the first committed one at offset 0) but the flow " \
           f"has no progress for source partition {t}[1]" in text, text
    assert f"`mirrorflow reseed --flow {flow.name} --topic {t}`" in text, text
    assert rep.records == 5, text  # partition 0 went on
    assert len(consume_all(target, remote, [1])) == 15  # nothing copied again
