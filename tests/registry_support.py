"""Schema registries for tests: one real Apicurio Registry 3.3.3 (in memory) per cluster alias, started
lazily once per session by the tests that ask for them (`registries`), tied to the pytest process."""
from __future__ import annotations

import json
import urllib.request

import pytest

from mirrorflow_dev.registry import DevRegistries, DevRegistry


@pytest.fixture(scope="session")
def registries(tmp_path_factory) -> dict[str, DevRegistry]:
    """A's and B's registries (alias -> DevRegistry; `confluent_url` is a cluster's schema.registry.url)."""
    regs = DevRegistries(tmp_path_factory.mktemp("registry-home"))
    try:
        started = regs.up(["A", "B"], attached=True)
        advance_ids(started["B"], B_IDS_FROM)
        yield started
    finally:
        regs.down()


# What B registers itself gets ids from here on: a target's own schemas must not take ids the source will
# use (the tests of a taken id set that up on purpose). Each test's registrations on A get ids the test
# session has not seen on B.
B_IDS_FROM = 1_000_000


def advance_ids(reg: DevRegistry, at: int) -> None:
    """Move an Apicurio registry's id sequence past `at`: content pinned there by a native import (no
    subject uses it, so nothing shows through the Confluent API)."""
    from mirrorflow.schemas.apicurio_writer import ApicurioWriter
    from mirrorflow.schemas.catalog import SchemaVersion
    from mirrorflow.schemas.plan import SchemaCopy
    from mirrorflow.schemas.registry_client import Endpoint, RegistryClient

    client = RegistryClient(Endpoint(reg.alias, (reg.confluent_url,), None))
    v = SchemaVersion("-", 1, at, '{"type":"fixed","name":"IdFloor","size":1}')
    ApicurioWriter(client)._import([SchemaCopy(v, v)])


def register(url: str, subject: str, schema: str, references: list[dict] | None = None,
             schema_type: str | None = None) -> int:
    """Register a schema through a registry's Confluent API (as a producer's serializer does); its id."""
    body: dict = {"schema": schema}
    if references:
        body["references"] = references
    if schema_type:
        body["schemaType"] = schema_type
    return int(call(url, "POST", f"/subjects/{subject}/versions", body)["id"])


def call(url: str, method: str, path: str, body=None):
    req = urllib.request.Request(url + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None
