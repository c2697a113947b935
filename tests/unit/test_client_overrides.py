"""Client overrides are scoped to a cluster and a client kind as MM2 scopes them, and checked on load."""
from __future__ import annotations

import pytest

from mirrorflow.config import parse
from mirrorflow.errors import ConfigError

CLUSTERS = {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}}


def flow(**props):
    return parse({"clusters": CLUSTERS, "flows": {"A->B": props}}).flow("A->B")


def test_each_form_reaches_only_its_cluster_and_client_kind():
    f = flow(**{
        "admin.request.timeout.ms": "1000",
        "target.admin.request.timeout.ms": "2000",
        "consumer.fetch.max.bytes": "111",
        "target.consumer.fetch.max.bytes": "222",
        "producer.linger.ms": "5",
        "producer.override.linger.ms": "6",
        "producer.override.batch.size": "327680",
        "source.producer.linger.ms": "7",
        "source.consumer.sasl.username": "src-user",
    })
    assert f.client_overrides("source", "admin") == {"request.timeout.ms": "1000"}
    assert f.client_overrides("target", "admin") == {"request.timeout.ms": "2000"}  # the specific form wins
    assert f.client_overrides("source", "consumer") == {"fetch.max.bytes": "111", "sasl.username": "src-user"}
    assert f.client_overrides("target", "consumer") == {"fetch.max.bytes": "222"}  # no source credentials
    # Connect's producer.override.* reaches librdkafka without its prefix, over producer.*
    assert f.client_overrides("target", "producer") == {"linger.ms": "6", "batch.size": "327680"}
    assert f.client_overrides("source", "producer") == {"linger.ms": "7"}


def test_secrets_in_overrides_are_resolved_and_a_missing_variable_names_the_key(monkeypatch):
    f = flow(**{"source.consumer.sasl.password": "${env:MF_TEST_SRC_PW}"})
    monkeypatch.setenv("MF_TEST_SRC_PW", "hunter2")
    assert f.client_overrides("source", "consumer") == {"sasl.password": "hunter2"}
    monkeypatch.delenv("MF_TEST_SRC_PW")
    with pytest.raises(ConfigError) as exc:
        f.client_overrides("source", "consumer")
    assert str(exc.value) == ("flows.A->B.source.consumer.sasl.password: "
                              "environment variable MF_TEST_SRC_PW is not set")


@pytest.mark.parametrize("key, setting", [
    ("consumer.isolation.level", "isolation.level"),
    ("source.consumer.enable.auto.commit", "enable.auto.commit"),
    ("producer.override.transactional.id", "transactional.id"),
    ("target.producer.acks", "acks"),
    ("admin.bootstrap.servers", "bootstrap.servers"),
])
def test_settings_a_correct_copy_depends_on_are_refused(key, setting):
    with pytest.raises(ConfigError) as exc:
        flow(**{key: "x"})
    [(where, message)] = exc.value.problems
    assert where == f"flows.A->B.{key}"
    assert message.startswith(f"mirrorflow sets {setting} itself (")


def test_unknown_client_settings_are_refused_with_the_key():
    with pytest.raises(ConfigError) as exc:
        flow(**{"producer.override.no.such.setting": "1", "target.consumer.fetch.max.bytez": "1"})
    assert sorted(exc.value.problems) == [
        ("flows.A->B.producer.override.no.such.setting", "unknown client setting (not a librdkafka property)"),
        ("flows.A->B.target.consumer.fetch.max.bytez", "unknown client setting (not a librdkafka property)"),
    ]
