"""Client overrides reach the clients they are scoped to, on real brokers (config/overrides.py)."""
from __future__ import annotations

import time

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.replication.run.runner import run_once
from tests.integration.replicate_helpers import assert_copied, make_flow, mirror_topic
from tests.support import produce

pytestmark = pytest.mark.integration


def test_mm2_override_forms_reach_librdkafka_scoped_and_the_copy_is_exact(tmp_path, source, target, unique):
    pfx = unique("ovr")
    topic = f"{pfx}.orders"
    mirror_topic(source, target, topic, 2)
    now = int(time.time() * 1000)
    produce(source, topic, [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                             "headers": [("n", str(i).encode())], "timestamp": now + i} for i in range(300)])
    # Connect's producer.override.* (Strimzi's examples use it) used to reach librdkafka as
    # `override.batch.size` and break the producer; target.* forms reach only the target's clients
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{
        "producer.override.batch.size": 16384, "producer.override.linger.ms": 1,
        "consumer.override.queued.min.messages": 1000, "target.consumer.fetch.wait.max.ms": 20,
        "source.admin.request.timeout.ms": 20000})
    with FlowClients(cfg, flow) as clients:
        assert clients.overrides("target", "producer")["batch.size"] == "16384"
        assert "queued.min.messages" not in clients.overrides("target", "consumer")
        assert clients.overrides("source", "admin") == {"request.timeout.ms": "20000"}
        clients.admin("source")  # the cluster accepts the scoped settings
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 300, rep.render()
    assert_copied(source, target, topic)
