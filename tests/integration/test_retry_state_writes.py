"""State writes through a broker restart: a lease renewal and a run's results
written while the target restarts are written once it is back; past a short bound they fail with
one clear message and are never reported as kept / read as written.

Cluster R (one broker) is the one test_retry_gaps and test_broker_restart restart; during_restart
(from test_retry_gaps) runs the call on a thread of its own while the test's thread restarts it.
"""

from __future__ import annotations

import time

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.errors import StateError
from mirrorflow.state import run_results
from mirrorflow.state.lease import FlowLease
from mirrorflow.state.names import results_topic
from mirrorflow.state.state_topics import ensure_state_topics
from mirrorflow_dev.dev_cluster import DevCluster
from tests.integration.test_retry_gaps import during_restart, own_flow

pytestmark = pytest.mark.integration

RESULTS = [{"unit": f"orders[{p}]", "records": 10 * p, "status": "ok"} for p in range(3)]


@pytest.fixture(scope="module")
def restartable(kafka_pool) -> DevCluster:
    """Cluster R: restarted by the tests of this module (and of test_retry_gaps, test_broker_restart)."""
    return kafka_pool.get("R")


def test_a_lease_renewal_and_a_results_write_ride_through_a_restart(tmp_path, source, restartable, kafka_pool, unique):
    """The renewal is written again until acknowledged within the lease's time left (ttl 60 s);
    the results write (attempts of admin.timeout.ms = 5 s, shorter than the outage) is written
    again and read back whole."""
    pfx = unique("wlease")
    cfg, flow = own_flow(tmp_path, source, restartable, pfx, **{"admin.timeout.ms": 5000})
    with FlowClients(cfg, flow) as clients:
        ensure_state_topics(clients)
        lease = FlowLease(clients, f"{pfx}-owner", "the restart test", ttl_s=60).acquire()
        renewed = during_restart(  # one restart for both: the renewal, then the results
            kafka_pool,
            restartable,
            lambda: (lease.renew(), run_results.write(clients, "run-1", RESULTS, note="x")),
            down_s=12.0,
        )
        assert renewed == (True, None)
        assert lease.lost is None
        assert lease.read_holder() is not None and lease.read_holder().owner == f"{pfx}-owner"
        assert run_results.read(clients, "run-1") == {"flow": "CTL->B", "results": RESULTS, "note": "x", "run": "run-1"}
        lease.release()
        assert lease.read_holder() is None


def test_past_a_short_bound_results_fail_clearly_and_a_renewal_is_not_kept(
    tmp_path, source, restartable, kafka_pool, unique
):
    """broker.outage.max.seconds 2: the results write fails with a StateError naming the run, the
    topic and the bound, and nothing is written behind the caller's back; a renewal that cannot be
    acknowledged within the lease's 6 s left reports the lease lost."""
    pfx = unique("wshort")
    cfg, flow = own_flow(
        tmp_path, source, restartable, pfx, **{"broker.outage.max.seconds": 2, "admin.timeout.ms": 1000}
    )
    with FlowClients(cfg, flow) as clients:
        ensure_state_topics(clients)
        exc = during_restart(
            kafka_pool, restartable, lambda: run_results.write(clients, "run-2", RESULTS), down_s=8.0, fails=True
        )
        assert isinstance(exc, StateError), repr(exc)
        text = str(exc)
        topic = results_topic(flow)
        assert text.startswith(
            f"the results of run run-2 of flow CTL->B could not be written to {topic} on cluster 'B': "
            "cluster 'B': writing the results of run run-2: no success for "
        ), text
        assert "longer than broker.outage.max.seconds (2); last error: " in text, text
        time.sleep(2)  # a record purged by the failed producer must not land late
        assert run_results.read(clients, "run-2") is None

        lease = FlowLease(clients, f"{pfx}-owner", "the short-bound test", ttl_s=6).acquire()
        assert during_restart(kafka_pool, restartable, lease.renew, down_s=10.0) is False
        assert lease.lost is not None and lease.lost.startswith("flow CTL->B: this run's lease"), lease.lost
        assert "lapsed" in lease.lost, lease.lost
