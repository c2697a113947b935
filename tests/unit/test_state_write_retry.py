"""The one retry shape of state writes (state/state_writer.write_acknowledged) and what lease, results and
run-log writes make of a write that is never acknowledged: real librdkafka clients pointed at a
port nobody listens on, so every write really goes unacknowledged as while the target is down.
"""

from __future__ import annotations

import logging
import time

import pytest
import yaml

from mirrorflow import config as config_mod
from mirrorflow.clients import FlowClients
from mirrorflow.errors import BrokerUnavailableError, LeaseError, StateError
from mirrorflow.state import run_results
from mirrorflow.state.lease import FlowLease
from mirrorflow.state.names import lease_topic, results_topic
from mirrorflow.state.state_writer import write_acknowledged
from mirrorflow_dev.processes import free_port


@pytest.fixture
def clients(tmp_path):
    """Flow A->B whose clusters nobody listens on: bound 2 s, attempts of 1 s."""
    nowhere = {"bootstrap.servers": f"127.0.0.1:{free_port()}", "log_level": 0}
    raw = {
        "clusters": {"A": dict(nowhere), "B": {**nowhere, "bootstrap.servers": f"127.0.0.1:{free_port()}"}},
        "defaults": {},
        "flows": {"A->B": {"topics": "orders", "broker.outage.max.seconds": 2, "admin.timeout.ms": 1000}},
    }
    path = tmp_path / "nowhere.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = config_mod.load(path)
    with FlowClients(cfg, cfg.flow("A->B")) as c:
        yield c


def test_a_write_never_acknowledged_is_retried_up_to_the_bound_then_named(clients):
    started = time.monotonic()
    with pytest.raises(BrokerUnavailableError) as exc:
        write_acknowledged(clients, "t", [(b"k", b"v", 0)], 0, "writing the thing", attempt_s=1.0)
    assert time.monotonic() - started >= 2.0  # retried for the bound, not given up at the first flush
    msg = str(exc.value)
    assert msg.startswith("cluster 'B': writing the thing: no success for "), msg
    assert msg.endswith(
        "longer than broker.outage.max.seconds (2); last error: "
        "cluster 'B': 1 of 1 records to 't' were not acknowledged within 1s"
    ), msg


def test_a_bound_of_its_own_is_named(clients):
    with pytest.raises(BrokerUnavailableError) as exc:
        write_acknowledged(clients, "t", [(b"k", b"v", 0)], 0, "writing x", 1.0, "the lease's ttl", attempt_s=1.0)
    assert "longer than the lease's ttl (1 s); last error: " in str(exc.value), str(exc.value)


def test_results_not_acknowledged_fail_the_run_naming_run_topic_and_bound(clients):
    with pytest.raises(StateError) as exc:
        run_results.write(clients, "run-9", [{"unit": "orders[0]"}])
    text = str(exc.value)
    assert text.startswith(
        f"the results of run run-9 of flow A->B could not be written to {results_topic(clients.flow)} on "
        "cluster 'B': cluster 'B': writing the results of run run-9: no success for "
    ), text
    assert "longer than broker.outage.max.seconds (2)" in text, text


def test_a_lease_claim_not_acknowledged_is_not_taken(clients):
    lease = FlowLease(clients, "me", "the unit test", ttl_s=30)
    with pytest.raises(LeaseError) as exc:
        lease._claim("claim")
    assert str(exc.value).startswith(
        "cannot write the lease of flow A->B: cluster 'B': writing the lease claim of flow A->B: no success for "
    ), str(exc.value)
    assert lease.kept_until == 0.0 and lease.holder is None


def test_a_renewal_not_acknowledged_in_the_time_left_is_not_kept(clients):
    lease = FlowLease(clients, "me", "the unit test", ttl_s=30)
    lease.kept_until = time.monotonic() + 1.5  # as if claimed 28.5 s ago
    assert lease.renew() is False
    assert lease.lost is not None
    assert lease.lost.startswith(
        "flow A->B: this run's lease was not renewed before it lapsed: cannot write the lease of flow A->B: "
        "cluster 'B': writing the lease renew of flow A->B: no success for "
    ), lease.lost
    assert "longer than the time left on this run's lease (lease.timeout.seconds) (2 s)" in lease.lost or (
        "longer than the time left on this run's lease (lease.timeout.seconds) (1 s)" in lease.lost
    ), lease.lost


def test_a_lapsed_lease_is_not_renewed(clients):
    lease = FlowLease(clients, "me", "the unit test", ttl_s=30)
    assert lease.renew() is False  # never taken: nothing left to renew
    assert lease.lost == "flow A->B: this run's lease lapsed before it was renewed (lease.timeout.seconds)"


def test_a_release_not_acknowledged_is_logged_not_raised(clients, caplog):
    lease = FlowLease(clients, "me", "the unit test", ttl_s=1)
    with caplog.at_level(logging.WARNING, logger="mirrorflow.state.lease"):
        lease.release()
    [rec] = [r for r in caplog.records if r.name == "mirrorflow.state.lease"]
    msg = rec.getMessage()
    assert msg.startswith("flow A->B: the lease of the unit test was not released (cannot write the lease"), msg
    assert msg.endswith(
        "it lapses 1 s after its last renewal (lease.timeout.seconds), until then another run of the flow is refused"
    ), msg
    assert lease_topic(clients.flow) in msg
