"""MM2's transaction.boundary mapped onto mirrorflow's batches: `poll` is one
transaction per batch (bounded by transaction.max.records), `interval` also ends a batch's
transaction once it has been open for transaction.boundary.interval.ms."""

from __future__ import annotations

import pytest

from mirrorflow.replication.run.runner import run_once
from tests.integration.replicate_helpers import assert_copied, assert_map_exact, make_flow, mirror_topic
from tests.integration.test_replicate import records
from tests.support import produce

pytestmark = pytest.mark.integration


def transactions(rep) -> int:
    return sum(p.transactions for p in rep.partitions)


def test_interval_boundary_makes_more_transactions_than_poll(tmp_path, source, target, unique):
    runs = {}
    for boundary in ("poll", "interval"):
        pfx = unique(f"txb{boundary}")
        topic = f"{pfx}.events"
        mirror_topic(source, target, topic, 1)
        produce(source, topic, records(5000, 1))
        props = {"transaction.boundary": boundary}
        if boundary == "interval":
            # 1 ms: every time check (each 1000 records) finds the transaction open longer than that
            props["transaction.boundary.interval.ms"] = 1
        cfg, flow = make_flow(tmp_path, source, target, pfx, **props)
        rep = run_once(cfg, flow, mode="direct")
        assert rep.ok and rep.records == 5000, rep.render()
        assert_copied(source, target, topic)
        assert_map_exact(cfg, flow, source, target, topic, 1)
        runs[boundary] = transactions(rep)
    # poll: one batch (transaction.max.records = 20000 > 5000); interval: cut every 1000 records
    assert runs == {"poll": 1, "interval": 5}
