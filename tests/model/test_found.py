"""Defects the searching tools found (the model-based tests, the network faults), each as the
shortest real-broker test that shows it, kept once fixed so that it stays fixed. A defect in code other
work owns is marked `xfail(strict=True)` naming it until that work fixes it."""

from __future__ import annotations

import time

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.ops.dr.failback import failback
from mirrorflow.ops.dr.failover_commit import commit_failover
from mirrorflow.ops.dr.failover_preflight import plan_failover
from mirrorflow.ops.verify.verify import verify_flow
from mirrorflow.replication.runner import run_once
from tests.support import create_topic, produce, write_config

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000) - 60_000  # recent: the source's retention keeps them


def identity_pair(tmp_path, a, b, pfx: str, x: str, y: str, **props):
    common = {"topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "replication.policy.class": "IdentityReplicationPolicy",
              "state.topic.partitions": 1, "lease.timeout.seconds": 2, "heartbeats.replication.enabled": False,
              "emit.heartbeats.enabled": False, **props}
    flows = {f"{x}->{y}": common, f"{y}->{x}": {**common, "standby": True}}
    cfg = write_config(tmp_path / "mf.yaml", {x: a, y: b}, flows)
    return cfg, cfg.flow(f"{x}->{y}"), cfg.flow(f"{y}->{x}")


def test_after_a_failback_over_a_pruned_map_the_reverse_flow_verifies_and_fails_back_over(
        tmp_path, source, target, unique):
    # found by the model-based test (seed 20261127): start(max_runs=2, txn_records=3), writes, a planned
    # failover, the failback, copies of the reverse flow, the planned failover back: CANNOT be committed
    pfx = unique("fp")
    topic = f"{pfx}.t"
    cfg, fwd, rev = identity_pair(tmp_path, source, target, pfx, "PRA", "PRB",
                                  **{"offset.map.max.runs": 2, "transaction.max.records": 2})
    create_topic(source, topic, 1)
    create_topic(target, topic, 1)
    produce(source, topic, [{"partition": 0, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                             "timestamp": NOW + i} for i in range(6)])
    pre = plan_failover(cfg, fwd, "planned", copy_mode="direct")  # drains: 3 copy transactions, then pruned to 2 runs
    assert pre.plan is not None and not pre.plan.blocked, pre.render()
    assert commit_failover(cfg, fwd, pre.plan, "tester", pre).done
    rep = failback(cfg, fwd)
    assert rep.done and rep.to_copy == 0, rep.render()
    assert rep.seeds[0].pruned_below > 0, rep.render()  # the map kept its last 2 runs only
    assert run_once(cfg, rev, mode="direct").records == 0
    with FlowClients(cfg, rev) as clients:
        ver = verify_flow(clients)
    assert ver.ok, ver.render()  # today: 'missing at source offset 0 ... a committed source record no copy wrote'
    back = plan_failover(cfg, rev, "planned", copy_mode="direct")
    assert back.plan is not None and not back.plan.blocked, back.render()
