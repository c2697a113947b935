"""The storage-topic route (issue 38 item 2): a flow replicates Apicurio's KafkaSQL journal, and a second
Apicurio in KafkaSQL mode on B, reading the replicated journal (`A.<journal>`, read_committed), serves the
same subjects, versions and ids, read-only, and follows later registrations on A after the next run. Real
brokers, two real Apicurio Registry 3.3.3 instances (KafkaSQL storage), one on each cluster."""
from __future__ import annotations

import json
import time
import urllib.error

import pytest

from mirrorflow.metadata.sync import sync_flow
from mirrorflow.replication.run.runner import run_once
from mirrorflow_dev.registry import DevRegistries
from tests.registry_support import call, register
from tests.support import write_config

pytestmark = pytest.mark.integration


def record(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "x", "type": "int"}]})


def wait_for(url: str, subject: str, version: int, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call(url, "GET", f"/subjects/{subject}/versions/{version}")
        except urllib.error.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_follower_registry_over_the_replicated_journal_serves_the_same_ids(tmp_path, source, target, unique):
    p = unique("journal")
    journal = f"{p}.kafkasql-journal"

    def kafkasql(cluster, topic: str, side: str, **more: str) -> dict[str, str]:
        return {"apicurio.storage.kind": "kafkasql", "apicurio.kafkasql.bootstrap.servers": cluster.bootstrap_servers,
                "apicurio.kafkasql.topic": topic, "apicurio.kafkasql.snapshots.topic": f"{p}-{side}-snapshots",
                "apicurio.events.kafka.topic": f"{p}-{side}-events",
                "apicurio.kafkasql.consumer.isolation.level": "read_committed", **more}

    regs = DevRegistries(tmp_path / "registries")
    try:
        a = regs.up(["KA"], attached=True, props={"KA": kafkasql(source, journal, "a")})["KA"].confluent_url
        ids = [register(a, f"{p}.s{i}-value", record(f"R{i}")) for i in range(3)]
        ids.append(register(a, f"{p}.s0-value", json.dumps(
            {"type": "record", "name": "R0", "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": "int",
                                                                                     "default": 0}]})))
        # the flow replicates the journal (its configs, infinite retention and delete, come along)
        cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                           {"A->B": {"topics": journal, "heartbeats.replication.enabled": False}})
        assert sync_flow(cfg, "A->B").ok
        assert run_once(cfg, cfg.flow("A->B"), mode="direct").ok
        b = regs.up(["KB"], attached=True, props={"KB": kafkasql(target, f"A.{journal}", "b", **{
            "apicurio.storage.read-only.enabled": "true"})})["KB"].confluent_url
        for i in range(3):
            got = wait_for(b, f"{p}.s{i}-value", 1)
            assert got["id"] == ids[i] and got["schema"] == call(a, "GET", f"/subjects/{p}.s{i}-value/versions/1")["schema"]
        assert wait_for(b, f"{p}.s0-value", 2)["id"] == ids[3]
        assert call(b, "GET", f"/schemas/ids/{ids[3]}")["schema"] == call(a, "GET", f"/schemas/ids/{ids[3]}")["schema"]
        # read-only: B refuses registrations while it follows A
        with pytest.raises(urllib.error.HTTPError):
            register(b, f"{p}.local-value", record("Local"))
        # later registrations on A reach B with the next run
        more = register(a, f"{p}.s9-value", record("R9"))
        assert run_once(cfg, cfg.flow("A->B"), mode="direct").ok
        assert wait_for(b, f"{p}.s9-value", 1)["id"] == more
    finally:
        regs.down()
