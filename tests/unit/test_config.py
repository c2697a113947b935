"""Config parsing and validation: every problem is reported, each with its exact key."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorflow import config as config_mod
from mirrorflow.config import FLOW_PROPERTIES, load, parse
from mirrorflow.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
CLUSTERS = {"A": {"bootstrap.servers": "a:9092"}, "B": {"bootstrap.servers": "b:9092"},
            "C": {"bootstrap.servers": "c:9092"}}


def problems(raw) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as exc:
        parse(raw, source="mf.yaml")
    return exc.value.problems


def test_a_full_config_parses_with_mm2_defaults_and_overrides():
    cfg = parse({
        "clusters": {**CLUSTERS, "S": {"bootstrap.servers": "s:9093", "security.protocol": "SASL_SSL",
                                       "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mm2",
                                       "sasl.password": "${env:S_PASSWORD}"},
                     "K": {"airflow.conn.id": "kafka_k"}},
        "defaults": {"replication.factor": 3, "tasks.max": 8},
        "flows": {"A->B": {"topics": "orders.*, payments", "sync.group.offsets.enabled": True,
                           "producer.compression.type": "zstd", "consumer.fetch.max.bytes": 1048576,
                           "admin.timeout.ms": 30000},
                  "B->A": {"enabled": False, "replication.factor": -1}},
        "spark": {"master": "local[2]", "conf": {"spark.executor.memory": "1g"}},
    })
    ab, ba = cfg.flow("A->B"), cfg.flow(" B -> A ")
    assert (ab.name, ab.id, ab.source, ab.target, ab.enabled) == ("A->B", "A-B", "A", "B", True)
    assert ab["topics"] == ["orders.*", "payments"]
    assert ab["topics.exclude"] == [r".*[\-\.]internal", r".*\.replica", "__.*"]
    assert ab.replication_factor == 3 and ba.replication_factor == -1
    assert ab.parallelism == 8 and ab.exactly_once is True
    assert ab["sync.group.offsets.enabled"] is True and ba.enabled is False
    assert ab["refresh.topics.interval.seconds"] == 600 and ab["use.defaults.from"] == "target"
    assert ab.client_overrides("target", "producer") == {"compression.type": "zstd"}
    assert ab.client_overrides("source", "consumer") == {"fetch.max.bytes": "1048576"}  # not poll.timeout.ms
    assert ab.client_overrides("source", "admin") == {}  # admin.timeout.ms is a flow property
    # MM2's scope: consumer.* is the source's reader, producer.* the target's writer
    assert ab.client_overrides("target", "consumer") == {} and ab.client_overrides("source", "producer") == {}
    assert ab["admin.timeout.ms"] == 30000
    assert cfg.clusters["K"].airflow_conn_id == "kafka_k"
    assert cfg.spark.master == "local[2]" and cfg.spark.conf == {"spark.executor.memory": "1g"}


def test_every_problem_is_reported_with_its_key():
    got = problems({
        "clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"},
                     "C": {"security.protocol": "SSL"}},
        "defaults": {"tasks.maxx": 3},
        "flows": {
            "A->D": {},                                    # unknown alias
            "A->A": {},                                    # a flow from a cluster to itself
            "A->B": {"topics": "orders, [bad", "replication.policy.class": "IdentityReplicationPolicy",
                     "sync.topic.acl.enabled": True},      # bad regex, unknown property
            "B->A": {},                                    # with the identity A->B: a cycle
        },
        "flowz": {},
    })
    assert got == [
        ("flowz", "unknown top-level key (did you mean 'flows'?)"),
        ("clusters.C.bootstrap.servers", "missing (or set airflow.conn.id)"),
        ("defaults.tasks.maxx", "unknown property (did you mean 'tasks.max'?)"),
        ("flows.A->D", "unknown cluster alias 'D'"),
        ("flows.A->A", "a flow cannot replicate a cluster into itself"),
        ("flows.A->B.topics", "invalid regex '[bad': unterminated character set at position 0"),
        ("flows.A->B.sync.topic.acl.enabled", "unknown property (did you mean 'sync.topic.acls.enabled'?)"),
        ("flows.A->B.replication.policy.class",
         "IdentityReplicationPolicy on a cycle of flows (A->B->A): remote topics keep their names, so records "
         "would be replicated back and forth forever; use DefaultReplicationPolicy for flows on a cycle"),
    ]


def test_identity_cycle_through_three_clusters_and_disabled_flows():
    raw = {"clusters": CLUSTERS, "flows": {
        "A->B": {"replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"},
        "B->C": {}, "C->A": {}}}
    assert [k for k, _ in problems(raw)] == ["flows.A->B.replication.policy.class"]
    assert "(A->B->C->A)" in problems(raw)[0][1]
    raw["flows"]["C->A"] = {"enabled": False}  # a disabled flow closes no cycle
    assert parse(raw).flow("A->B")
    # active/active with the default policy is fine
    assert parse({"clusters": CLUSTERS, "flows": {"A->B": {}, "B->A": {}}}).flows.keys() == {"A->B", "B->A"}


@pytest.mark.parametrize("key, value, message", [
    ("enabled", "maybe", "expected true or false, got 'maybe'"),
    ("tasks.max", "many", "expected an integer, got 'many'"),
    ("tasks.max", 0, "expected a positive integer, got 0"),
    ("replication.factor", 0, "expected -1 (the target broker's default) or a positive integer, got 0"),
    ("refresh.topics.interval.seconds", -5, "expected a positive integer, got -5"),
    ("use.defaults.from", "both", "expected one of target, source, got 'both'"),
    ("replication.policy.class", "MyPolicy",
     "unknown replication policy 'MyPolicy' (use DefaultReplicationPolicy or IdentityReplicationPolicy)"),
    ("replication.policy.separator", "", "the separator may not be empty"),
    ("initial.position", "yesterday",
     "expected earliest, latest, or a timestamp (ms since epoch or ISO-8601), got 'yesterday'"),
    ("rpo.seconds", -1, "expected 0 or a positive integer, got -1"),
    ("rpo.seconds", "5m", "expected an integer, got '5m'"),
    ("rpo.notifier", "notify", "expected a dotted path such as my_alerts.rpo_notifier, got 'notify'"),
])
def test_bad_values_name_the_key(key, value, message):
    assert problems({"clusters": CLUSTERS, "flows": {"A->B": {key: value}}}) == [(f"flows.A->B.{key}", message)]


def test_good_special_values():
    flow = parse({"clusters": CLUSTERS, "flows": {"A->B": {
        "initial.position": "2026-01-01T00:00:00Z", "replication.policy.separator": " ",
        "use.defaults.from": "source"}}}).flow("A->B")
    assert flow["initial.position"] == "2026-01-01T00:00:00Z"
    assert flow["replication.policy.separator"] == " "  # taken literally
    for pos in ("earliest", "latest", "1767225600000"):
        assert parse({"clusters": CLUSTERS, "flows": {"A->B": {"initial.position": pos}}}).flow("A->B")[
            "initial.position"] == pos


def test_a_bad_default_is_reported_once_under_defaults():
    got = problems({"clusters": CLUSTERS, "defaults": {"tasks.max": "x"}, "flows": {"A->B": {}, "B->A": {}}})
    assert got == [("defaults.tasks.max", "expected an integer, got 'x'")]
    # a flow overriding the bad default is fine for that flow
    got = problems({"clusters": CLUSTERS, "defaults": {"tasks.max": "x"}, "flows": {"A->B": {"tasks.max": 2}}})
    assert got == [("defaults.tasks.max", "expected an integer, got 'x'")]


def test_cluster_settings_librdkafka_does_not_know_are_reported():
    got = problems({"clusters": {"A": {"bootstrap.servers": "a:1", "sasl.jaas.config": "x required;",
                                       "max.request.size": 5, "ssl.truststore.location": "/t.jks"},
                                 "B": {"bootstrap.servers": "b:1", "bad alias": 1}},
                    "flows": {}})
    assert got == [
        ("clusters.A.sasl.jaas.config",
         "a Java setting: use sasl.username and sasl.password (`mirrorflow config import` translates it)"),
        ("clusters.A.max.request.size", "unknown client setting (not a librdkafka property)"),
        ("clusters.A.ssl.truststore.location", "a Java setting: use ssl.ca.location with a PEM file"),
        ("clusters.B.bad alias", "unknown client setting (not a librdkafka property)"),
    ]


def test_structural_errors():
    assert problems({"clusters": ["A", "B"], "flows": "A->B"}) == [
        ("clusters", "must be a mapping, got list"), ("flows", "must be a mapping, got str")]
    assert problems({"clusters": {"A B": {"bootstrap.servers": "x:1"}}, "flows": {"A-B": {}}}) == [
        ("clusters.A B", "an alias may hold only letters, digits, '_' and '-'"),
        ("flows.A-B", "a flow is named SOURCE->TARGET")]
    with pytest.raises(ConfigError) as exc:
        parse(["a"], source="mf.yaml")
    assert str(exc.value) == "mf.yaml: the top level must be a mapping with clusters and flows"


def test_load_names_the_file_for_unreadable_and_malformed_yaml(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load(tmp_path / "nope.yaml")
    assert str(exc.value) == f"{tmp_path / 'nope.yaml'}: cannot read config file: No such file or directory"
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters:\n  A: {bootstrap.servers: a:1\nflows: {}\n")
    with pytest.raises(ConfigError) as exc:
        load(bad)
    assert str(exc.value) == f"{bad}: malformed YAML at line 3, column 6: expected ',' or '}}', but got ':'"


def test_messages_list_every_problem_with_the_file(tmp_path):
    p = tmp_path / "mf.yaml"
    p.write_text("clusters:\n  A: {bootstrap.servers: 'a:1'}\nflows:\n  A->X: {tasks.max: 0}\n")
    with pytest.raises(ConfigError) as exc:
        load(p)
    assert str(exc.value) == (f"{p}: flows.A->X.tasks.max: expected a positive integer, got 0\n"
                              f"{p}: flows.A->X: unknown cluster alias 'X'")


def test_flow_and_cluster_lookup_errors():
    cfg = parse({"clusters": CLUSTERS, "flows": {"A->B": {}}}, source="mf.yaml")
    with pytest.raises(ConfigError) as exc:
        cfg.flow("A->C")
    assert exc.value.problems == [("flows", "unknown flow 'A->C' (did you mean 'A->B'?)")]
    assert cfg.flow("A-B") is cfg.flow("A->B")  # a flow id, as in DAG ids, works too
    with pytest.raises(ConfigError) as exc:
        cfg.cluster("D")
    assert exc.value.problems == [("clusters", "unknown cluster alias 'D'")]


def test_secrets_resolve_from_env_and_are_redacted(monkeypatch):
    cfg = parse({"clusters": {"S": {"bootstrap.servers": "s:1", "sasl.username": "mm2",
                                    "sasl.password": "${env:MF_TEST_PW}"}}, "flows": {}})
    monkeypatch.setenv("MF_TEST_PW", "hunter2")
    assert cfg.clusters["S"].client_config()["sasl.password"] == "hunter2"
    assert cfg.clusters["S"].redacted() == {"bootstrap.servers": "s:1", "sasl.username": "mm2", "sasl.password": "***"}
    monkeypatch.delenv("MF_TEST_PW")
    with pytest.raises(ConfigError) as exc:
        cfg.clusters["S"].client_config()
    assert exc.value.problems == [("clusters.S.sasl.password", "environment variable MF_TEST_PW is not set")]


def test_every_flow_property_has_a_documented_line():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    missing = [k for k in FLOW_PROPERTIES if f"`{k}`" not in doc]
    assert missing == []


def test_config_validate_cli_reports_every_problem(tmp_path):
    p = tmp_path / "mf.yaml"
    p.write_text("clusters:\n  A: {bootstrap.servers: 'a:1'}\n  B: {}\nflows:\n  A->B: {topcs: x}\n")
    code = "import sys; from mirrorflow.cli import main; sys.exit(main(sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", code, "--config", str(p), "config", "validate"], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "include")}, timeout=60)
    assert r.returncode == 2
    assert r.stderr == (f"mirrorflow: error: {p}: clusters.B.bootstrap.servers: missing (or set airflow.conn.id)\n"
                        f"{p}: flows.A->B.topcs: unknown property (did you mean 'topics'?)\n")
    p.write_text("clusters:\n  A: {bootstrap.servers: 'a:1'}\n  B: {bootstrap.servers: 'b:1'}\nflows:\n  A->B: {}\n")
    r = subprocess.run([sys.executable, "-c", code, "--config", str(p), "config", "validate"], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "include")}, timeout=60)
    assert (r.returncode, r.stdout) == (0, f"{p}: OK (2 clusters, 1 flows: A->B)\n")


def test_the_embedded_default_config_is_valid():
    cfg = load(config_mod.default_config_path())
    assert "A->B" in cfg.flows


@pytest.mark.parametrize("flow_props, key, message", [
    ({"topics": ["orders", "(?i)x"]}, "flows.A->B.topics",
     "the patterns cannot be combined into one regex: global flags not at the start of the expression at position 7 "
     "('(?i)x': an inline flag applies only at the start of the whole list)"),
    ({"transaction.max.records": 0}, "flows.A->B.transaction.max.records", "expected a positive integer, got 0"),
    ({"unit.max.bytes": -5}, "flows.A->B.unit.max.bytes", "expected a positive integer, got -5"),
])
def test_values_that_would_fail_at_run_time_fail_validation(flow_props, key, message):
    with pytest.raises(ConfigError) as exc:
        parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
               "flows": {"A->B": flow_props}})
    assert exc.value.problems == [(key, message)]


def test_a_case_insensitive_list_is_fine_when_the_flag_leads_the_whole_list():
    cfg = parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
                 "flows": {"A->B": {"topics": ["(?i)orders", "payments"]}}})
    assert cfg.flow("A->B")["topics"] == ["(?i)orders", "payments"]


def test_spark_conf_must_be_a_mapping():
    with pytest.raises(ConfigError) as exc:
        parse({"clusters": {"A": {"bootstrap.servers": "a:1"}}, "spark": {"conf": "x", "mastr": "local"}})
    assert sorted(exc.value.problems) == [("spark.conf", "must be a mapping of Spark settings, got str"),
                                          ("spark.mastr", "unknown key (did you mean 'master'?)")]


def test_flow_ids_that_collide_are_refused():
    clusters = {a: {"bootstrap.servers": f"{a.lower()}:1"} for a in ("A-B", "C", "A", "B-C")}
    with pytest.raises(ConfigError) as exc:
        parse({"clusters": clusters, "flows": {"A-B->C": {}, "A->B-C": {}}})
    assert exc.value.problems == [("flows.A->B-C", "flows A-B->C and A->B-C would share the id 'A-B-C' (state topics, "
                                                   "transactional ids, DAG ids): rename a cluster alias")]


# Files that only declare, validate or import properties: a name found only there is not honoured.
NOT_A_READER = {"config/properties.py", "config/loading.py"} | {
    f"config/mm2_import/{m}.py" for m in ("__init__", "connectors", "detect", "flow_settings", "java_clients", "names",
                                          "properties_file", "result", "strimzi")}


def test_every_flow_property_is_read_by_the_code_or_refused():
    """A property that validation accepts must change what mirrorflow does:
    each FLOW_PROPERTIES name must appear as a string in a module that is not only the property
    table, the loader or the importer. MM2 names that do nothing here belong in REFUSED instead."""
    from mirrorflow.config.properties import REFUSED

    include = ROOT / "include"
    sources = [
        p.read_text()
        for pkg in ("mirrorflow", "mirrorflow_airflow")
        for p in (include / pkg).rglob("*.py")
        if pkg != "mirrorflow" or p.relative_to(include / "mirrorflow").as_posix() not in NOT_A_READER
    ]
    unread = [k for k in FLOW_PROPERTIES if not any(f'"{k}"' in text for text in sources)]
    assert unread == []
    assert sorted(set(REFUSED) & set(FLOW_PROPERTIES)) == []
    assert all(len(why) > 20 for why in REFUSED.values())


@pytest.mark.parametrize("key, value, why", [
    ("consumer.poll.timeout.ms", 500, "a copy reads a planned offset range and returns as soon as it reaches the "
     "range's end, so a source poll timeout has nothing to bound here; remove it"),
    ("offset-syncs.topic.replication.factor", 3, "mirrorflow writes no offset-syncs topic (its exact offset map "
     "lives in the flow's state topics): use state.topic.replication.factor"),
    ("offset.lag.max", 100, "mirrorflow's offset map records every copied offset, so there is no lag to bound; "
     "remove it"),
])
def test_mm2_properties_that_do_nothing_here_are_refused_naming_flow_and_reason(key, value, why):
    assert problems({"clusters": CLUSTERS, "flows": {"A->B": {key: value}}}) == [
        (f"flows.A->B.{key}", f"not supported: {why}")]
    assert problems({"clusters": CLUSTERS, "defaults": {key: value}, "flows": {"A->B": {}}}) == [
        (f"defaults.{key}", f"not supported: {why}")]


def test_refresh_groups_enabled_false_is_refused_true_is_accepted():
    assert problems({"clusters": CLUSTERS, "flows": {"A->B": {"refresh.groups.enabled": False}}}) == [
        ("flows.A->B.refresh.groups.enabled",
         "false is not supported: mirrorflow has no long-running task whose start would list the groups once; "
         "groups are looked up every refresh.groups.interval.seconds (select them with groups / groups.exclude)")]
    cfg = parse({"clusters": CLUSTERS, "flows": {"A->B": {"refresh.groups.enabled": "true"}}})
    assert cfg.flow("A->B")["refresh.groups.enabled"] is True


def test_internal_topic_replication_factors_are_flow_properties():
    cfg = parse({"clusters": CLUSTERS, "flows": {"A->B": {"checkpoints.topic.replication.factor": 3,
                                                          "heartbeats.topic.replication.factor": "1"}}})
    flow = cfg.flow("A->B")
    assert (flow["checkpoints.topic.replication.factor"], flow["heartbeats.topic.replication.factor"]) == (3, 1)
    assert parse({"clusters": CLUSTERS, "flows": {"A->B": {}}}).flow("A->B")["checkpoints.topic.replication.factor"] == -1
    assert problems({"clusters": CLUSTERS, "flows": {"A->B": {"heartbeats.topic.replication.factor": 0}}}) == [
        ("flows.A->B.heartbeats.topic.replication.factor",
         "expected -1 (the target broker's default) or a positive integer, got 0")]
