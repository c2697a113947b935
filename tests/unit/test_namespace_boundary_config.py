"""state.namespace / deployment.id and MM2's transaction.boundary and exactly-once
settings: validation, names, the batch time bound and `config import`."""

from __future__ import annotations

import pytest

from mirrorflow.config import parse
from mirrorflow.config.mm2_import import convert
from mirrorflow.errors import ConfigError
from mirrorflow.replication.task.reader import BatchLimits
from mirrorflow.state.lease import LeaseRecord
from mirrorflow.state.names import (
    lease_topic,
    offset_map_topic,
    progress_topic,
    runs_topic,
    snapshot_topic,
    transactional_id,
)
from mirrorflow.state.state_topics import state_topic_configs

CLUSTERS = {"A": {"bootstrap.servers": "a:9092"}, "B": {"bootstrap.servers": "b:9092"}}


def flow(defaults=None, **props):
    return parse({"clusters": CLUSTERS, "defaults": defaults or {}, "flows": {"A->B": props}}).flow("A->B")


def problems(defaults=None, **props) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as exc:
        flow(defaults, **props)
    return exc.value.problems


def test_without_a_namespace_the_names_are_unchanged():
    f = flow()
    assert (f.namespace, f.state_name, f.client_name, f.deployment) == ("", "A-B", "A-B", "")
    assert [progress_topic(f), offset_map_topic(f), snapshot_topic(f), lease_topic(f), runs_topic(f)] == [
        "mirrorflow.A-B.progress.internal",
        "mirrorflow.A-B.offset-map.internal",
        "mirrorflow.A-B.offset-map-snapshot.internal",
        "mirrorflow.A-B.lease.internal",
        "mirrorflow.A-B.runs.internal",
    ]
    assert transactional_id(f, "orders", 2) == "mirrorflow-A-B-orders-2"


def test_a_namespace_goes_into_every_state_name():
    f = flow({"state.namespace": "team_1"})
    assert (f.state_name, f.client_name, f.deployment) == ("team_1.A-B", "team_1-A-B", "team_1")
    assert set(state_topic_configs(f)) == {
        f"mirrorflow.team_1.A-B.{k}.internal"
        for k in ("progress", "offset-map", "offset-map-snapshot", "lease", "runs", "results", "operations")
    }
    assert transactional_id(f, "orders", 2) == "mirrorflow-team_1-A-B-orders-2"
    assert flow({"state.namespace": "t", "deployment.id": "blue"}).deployment == "blue"


def test_a_namespace_with_a_dot_or_space_is_refused():
    assert problems({"state.namespace": "a.b"}) == [
        (
            "defaults.state.namespace",
            "state.namespace may hold only letters, digits, '_' and '-' (at most 64), got 'a.b'",
        )
    ]
    assert problems(**{"deployment.id": "x y"}) == [
        ("flows.A->B.deployment.id", "deployment.id may hold only letters, digits, '_' and '-' (at most 64), got 'x y'")
    ]


def test_lease_records_carry_the_deployment_and_old_records_read_as_none():
    rec = LeaseRecord("claim", "o", "who", 1000, 0, "blue")
    assert LeaseRecord.from_json(rec.to_json(), 5).deployment == "blue"
    old = b'{"v":1,"kind":"claim","owner":"o","who":"w","ttl_ms":1000}'
    assert LeaseRecord.from_json(old, 5) == LeaseRecord("claim", "o", "w", 1000, 5, "")
    assert b"deployment" not in LeaseRecord("claim", "o", "w", 1000, 0).to_json()  # unchanged without one


def test_transaction_boundary_values():
    assert flow()["transaction.boundary"] == "poll"
    assert flow(**{"transaction.boundary": "Interval"})["transaction.boundary"] == "interval"
    assert problems(**{"transaction.boundary": "connector"}) == [
        (
            "flows.A->B.transaction.boundary",
            "connector is not supported: MirrorSourceConnector defines no "
            "transaction boundaries (Kafka Connect refuses `connector` for it too); use poll (per batch) or interval",
        )
    ]
    assert problems(**{"transaction.boundary": "batch"}) == [
        ("flows.A->B.transaction.boundary", "expected poll or interval, got 'batch'")
    ]


def test_interval_ms_without_the_interval_boundary_is_pointed_out():
    assert problems(**{"transaction.boundary.interval.ms": 500}) == [
        (
            "flows.A->B.transaction.boundary.interval.ms",
            "has no effect with transaction.boundary: poll (set transaction.boundary: interval, or remove it)",
        )
    ]
    assert problems({"transaction.boundary.interval.ms": 0}, **{"transaction.boundary": "interval"}) == [
        ("defaults.transaction.boundary.interval.ms", "expected a positive integer, got 0")
    ]


def test_the_interval_bounds_how_long_a_batch_transaction_stays_open():
    poll = BatchLimits.of(flow())
    short = BatchLimits.of(flow(**{"transaction.boundary": "interval", "transaction.boundary.interval.ms": 2500}))
    long = BatchLimits.of(flow(**{"transaction.boundary": "interval", "transaction.boundary.interval.ms": 10**9}))
    assert short.open_s == 2.5 and short.records == poll.records == 20_000
    assert long.open_s == poll.open_s  # never longer than half the transaction timeout


def test_exactly_once_settings_are_refused_in_a_config_with_what_to_use():
    assert problems(**{"exactly.once.source.support": "enabled"}) == [
        (
            "flows.A->B.exactly.once.source.support",
            "not supported: a Kafka Connect worker setting; mirrorflow's "
            "copy is transactional unless exactly.once: false (`config import` maps enabled -> exactly.once: true, "
            "disabled -> false)",
        )
    ]


def test_import_maps_boundaries_and_exactly_once():
    imp = convert(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
        "exactly.once.source.support = disabled\noffset.flush.interval.ms = 15000\n"
        "A->B.enabled = true\nA->B.transaction.boundary = interval\n"
        "B->A.enabled = true\nB->A.transaction.boundary = connector\nB->A.exactly.once.support = required\n"
    )
    assert imp.defaults == {"exactly.once": False}
    assert imp.flows == {
        "A->B": {"enabled": True, "transaction.boundary": "interval"},
        "B->A": {"enabled": True, "exactly.once": True},
    }
    assert "exactly.once.source.support: disabled, imported as exactly.once: false" in imp.notes
    assert "B->A.exactly.once.support: required, imported as exactly.once: true" in imp.notes
    assert any(n.startswith("B->A.transaction.boundary: not imported (connector is not supported") for n in imp.notes)
    assert any(
        n.startswith("offset.flush.interval.ms: not imported (a Kafka Connect worker setting") for n in imp.notes
    )
    # offset.flush.interval.ms stands in for an unset interval within the same scope
    imp = convert(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
        "transaction.boundary = interval\noffset.flush.interval.ms = 15000\nA->B.enabled = true\n"
    )
    assert imp.defaults == {"transaction.boundary": "interval", "transaction.boundary.interval.ms": 15000}


def test_strimzi_connect_cluster_exactly_once_becomes_the_default():
    doc = {
        "apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": "m"},
        "spec": {
            "connectCluster": "b",
            "clusters": [
                {"alias": "a", "bootstrapServers": "a:9092"},
                {"alias": "b", "bootstrapServers": "b:9092", "config": {"exactly.once.source.support": "enabled"}},
            ],
            "mirrors": [
                {
                    "sourceCluster": "a",
                    "targetCluster": "b",
                    "sourceConnector": {
                        "config": {"transaction.boundary": "interval", "transaction.boundary.interval.ms": 5000}
                    },
                }
            ],
        },
    }
    import yaml

    imp = convert(yaml.safe_dump(doc), "kmm2.yaml")
    assert imp.defaults == {"exactly.once": True}
    assert imp.flows["a->b"] == {
        "enabled": True,
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": 5000,
    }
    parse({"clusters": imp.clusters, **({"defaults": imp.defaults}), "flows": imp.flows})  # it loads


def test_import_drops_an_interval_that_mm2_would_ignore():
    imp = convert(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
        "A->B.enabled = true\nA->B.transaction.boundary.interval.ms = 5000\n"
    )
    assert imp.flows == {"A->B": {"enabled": True}}
    assert (
        "A->B.transaction.boundary.interval.ms: not imported (no effect without transaction.boundary=interval)"
        in imp.notes
    )
