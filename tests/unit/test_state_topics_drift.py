"""What counts as a state topic that drifted from how the flow created it, what the error says, and
when an empty progress beside a non-empty remote partition stops the partition (pure logic; on real
brokers: tests/integration/test_state_drift.py)."""
from __future__ import annotations

from mirrorflow.config import parse
from mirrorflow.state.names import history_topic, lease_topic, offset_map_topic, progress_topic
from mirrorflow.state.records import Progress
from mirrorflow.state.state_drift import (
    Drift,
    config_drift,
    drift_error,
    fresh_remotes,
    partition_drift,
    unexplained_remote,
)
from mirrorflow.state.state_topics import state_topic_configs

CLUSTERS = {"A": {"bootstrap.servers": "a:9092"}, "B": {"bootstrap.servers": "b:9092"}}
FLOW = parse({"clusters": CLUSTERS, "flows": {"A->B": {}}}).flow("A->B")
CREATED = state_topic_configs(FLOW)


def test_the_state_topics_as_created_have_no_drift():
    for topic, conf in CREATED.items():
        assert config_drift(topic, conf, dict(conf)) == []


def test_a_progress_topic_no_longer_compacted_is_a_drift():
    topic = progress_topic(FLOW)
    for policy in ("delete", "compact,delete"):
        [d] = config_drift(topic, CREATED[topic], {**CREATED[topic], "cleanup.policy": policy})
        assert (d.setting, d.expected, d.actual) == ("cleanup.policy", "compact", policy)
    assert config_drift(topic, CREATED[topic], {**CREATED[topic], "cleanup.policy": "compact"}) == []
    # a compacted topic's retention is not used: no drift
    assert config_drift(topic, CREATED[topic], {**CREATED[topic], "retention.ms": "1000"}) == []


def test_retention_may_grow_never_shrink():
    om, hist = offset_map_topic(FLOW), history_topic(FLOW)
    [d] = config_drift(om, CREATED[om], {**CREATED[om], "retention.ms": "604800000"})
    assert (d.setting, d.expected, d.actual) == ("retention.ms", "-1", "604800000")
    assert config_drift(hist, CREATED[hist], {**CREATED[hist], "retention.ms": "-1", "retention.bytes": "-1"}) == []
    [d] = config_drift(hist, CREATED[hist], {**CREATED[hist], "retention.bytes": "1024"})
    assert d.setting == "retention.bytes"


def test_the_lease_topic_keeps_the_brokers_clock():
    lease = lease_topic(FLOW)
    [d] = config_drift(lease, CREATED[lease], {**CREATED[lease], "message.timestamp.type": "CreateTime"})
    assert (d.setting, d.expected, d.actual) == ("message.timestamp.type", "LogAppendTime", "CreateTime")


def test_partitions_count_against_the_count_recorded_at_creation_not_the_config():
    prog, om = progress_topic(FLOW), offset_map_topic(FLOW)
    assert partition_drift({prog: 2, om: 2}, {prog: 2, om: 2}) == []
    assert partition_drift({prog: 2}, {prog: 2, om: 16}) == []  # not recorded: adopted, not judged
    assert partition_drift({prog: 2, om: 2}, {prog: 5, om: 2}) == [Drift(prog, "partitions", "2", "5")]


def test_the_error_names_each_topic_setting_expected_actual_and_what_to_do():
    prog, om = progress_topic(FLOW), offset_map_topic(FLOW)
    drifts = [Drift(prog, "cleanup.policy", "compact", "delete"), Drift(om, "partitions", "16", "20")]
    text = str(drift_error(FLOW, drifts))
    assert "flow A->B: 2 setting(s) of its state topics on cluster 'B' are not as created" in text
    assert f"state topic '{prog}' has cleanup.policy=delete, it must be compact as the flow created it" in text
    assert f"--entity-name {prog} --add-config cleanup.policy=compact" in text
    assert f"state topic '{om}' has 20 partitions, it was created with 16: partitions were added" in text
    assert "Kafka cannot remove partitions" in text and "nothing was read or written" in text


def test_an_empty_progress_beside_a_remote_partition_with_a_committed_record_stops_it():
    why = unexplained_remote("t", 3, "A.t", None, 0)
    assert why is not None
    assert why.startswith("target partition A.t[3] holds records (the first committed one at offset 0) but the "
                          "flow has no progress for source partition t[3]")
    assert "`mirrorflow takeover`" in why
    # a progress of its own (a copy's, an anchor, a takeover's, a failback's seed, a re-seed): the flow wrote there
    assert unexplained_remote("t", 3, "A.t", Progress("t", 3, 0, (), 5), 0) is None
    # no committed record (only aborted copies, fencing records, markers): nothing was copied there
    assert unexplained_remote("t", 3, "A.t", None, -1) is None
    # a progress without a start (a failback's re-seed of the failed-over flow's partitions): as none
    assert unexplained_remote("t", 3, "A.t", Progress("t", 3, -1, (), -1), 7) is not None


def test_only_fresh_partitions_with_a_remote_partition_are_looked_at():
    parts = [("t", 0, "A.t"), ("t", 1, "A.t"), ("t", 2, "A.t"), ("u", 0, "A.u")]
    progress = {("t", 0): Progress("t", 0, 10, (), 10), ("t", 1): Progress("t", 1, -1, (), -1)}
    assert fresh_remotes(parts, progress, {"A.t": 2}) == [("A.t", 1)]  # A.t[2] and A.u do not exist yet
    assert fresh_remotes(parts, progress, {"A.t": 3, "A.u": 1}) == [("A.t", 1), ("A.t", 2), ("A.u", 0)]
