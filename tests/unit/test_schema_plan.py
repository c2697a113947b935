"""The schema plan (pure): subjects renamed by the policy, dependency order, incremental, conflicts naming
subject, version and id, compatibility as subject-level settings, orphans, cycles and the topic filter."""
from __future__ import annotations

from mirrorflow.config.loading import parse
from mirrorflow.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from mirrorflow.schemas.catalog import Catalog, Reference, SchemaVersion
from mirrorflow.schemas.naming import remote_subject
from mirrorflow.schemas.plan import plan_schemas
from mirrorflow.schemas.registry_client import Endpoint

POLICY = DefaultReplicationPolicy()


def v(subject, version, id, schema="s", refs=()):
    return SchemaVersion(subject, version, id, schema, "AVRO", tuple(Reference(*r) for r in refs))


def cat(*versions, compat=None, glob=None):
    c = Catalog(compatibility=dict(compat or {}), global_compatibility=glob)
    for x in versions:
        c.subjects.setdefault(x.subject, []).append(x)
    return c


def test_subject_names_follow_the_policy():
    assert remote_subject(POLICY, "A", "orders-value") == "A.orders-value"
    assert remote_subject(POLICY, "A", "orders-key") == "A.orders-key"
    assert remote_subject(POLICY, "A", "com.acme.Order") == "A.com.acme.Order"
    assert remote_subject(DefaultReplicationPolicy("_"), "A", "orders-value") == "A_orders-value"
    assert remote_subject(IdentityReplicationPolicy(".", True, "A"), "A", "orders-value") == "orders-value"


def test_plan_orders_references_first_and_renames_them():
    src = cat(v("w-value", 1, 30, "W", [("acme.C", "common", 2)]), v("common", 1, 10, "C1"), v("common", 2, 20, "C2"),
              compat={"w-value": "FULL"}, glob="BACKWARD")
    plan = plan_schemas(src, cat(), POLICY, "A", "B")
    assert [(c.target.subject, c.target.version, c.id) for c in plan.copies] == [
        ("A.common", 1, 10), ("A.common", 2, 20), ("A.w-value", 1, 30)]
    assert plan.copies[-1].target.references == (Reference("acme.C", "A.common", 2),)
    assert plan.compatibility == {"A.common": "BACKWARD", "A.w-value": "FULL"} and not plan.conflicts


def test_incremental_and_conflicts_name_subject_version_and_id():
    src = cat(v("o-value", 1, 7, "S1"), v("o-value", 2, 8, "S2"), v("p-value", 1, 9, "P"))
    tgt = cat(v("A.o-value", 1, 7, "S1"), v("A.p-value", 1, 12, "other"), v("mine", 1, 8, "not S2"),
              compat={"A.o-value": "BACKWARD"})
    plan = plan_schemas(src, tgt, POLICY, "A", "B")
    assert plan.present == 1 and plan.copies == []
    assert plan.conflicts == [
        "id 8 on B holds another schema (subject mine version 1) than A's o-value version 2",
        "subject A.p-value version 1 on B holds id 12 (another schema); A's p-value version 1 is id 9",
    ]


def test_filter_cycles_and_orphans():
    src = cat(v("kept-value", 1, 1), v("skipped-value", 1, 2), v("B.back-value", 1, 3))
    tgt = cat(v("A.gone-value", 1, 50), v("local-value", 1, 51))
    plan = plan_schemas(src, tgt, POLICY, "A", "B", topic_wanted=lambda t: t != "skipped")
    assert [c.target.subject for c in plan.copies] == ["A.kept-value"]
    assert plan.left_out == ["B.back-value (it came from B)", "skipped-value (topic skipped is not replicated by the flow)"]
    assert plan.orphans == ["A.gone-value"]  # B's own subjects are not A's orphans


def test_registry_settings_credentials_never_in_the_endpoint_name(monkeypatch):
    monkeypatch.setenv("REG_INFO", "u:s3cret")
    cfg = parse({"clusters": {"A": {"bootstrap.servers": "x:1", "schema.registry.url": "https://r.example/apis/ccompat/v7",
                                    "basic.auth.credentials.source": "USER_INFO",
                                    "basic.auth.user.info": "${env:REG_INFO}"}}})
    e = Endpoint.of(cfg.cluster("A"))
    assert e.name == "A's schema registry (https://r.example/apis/ccompat/v7)" and e.auth.startswith("Basic ")
    assert cfg.cluster("A").client == {"bootstrap.servers": "x:1"}
    assert cfg.cluster("A").redacted() == {"bootstrap.servers": "x:1"}
    url = parse({"clusters": {"A": {"bootstrap.servers": "x:1", "schema.registry.url": "http://u:pw@r:8081",
                                    "basic.auth.credentials.source": "URL"}}})
    e = Endpoint.of(url.cluster("A"))
    assert e.urls == ("http://r:8081",) and "pw" not in e.name and e.auth
