"""Schema replication on real registries (Apicurio Registry 3.3.3, one per cluster, in memory) and real
brokers: subjects renamed by the policy, versions, ids, references and compatibility kept, incremental,
orphans reported, dry run, the CLI, and bad input (an unreachable registry, a refused credential, an id or
a renamed subject already holding something else) stopping the pass before anything is written."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from mirrorflow import config as config_mod
from mirrorflow.schemas.apicurio_writer import ApicurioWriter
from mirrorflow.schemas.catalog import read_catalog
from mirrorflow.schemas.confluent_writer import ConfluentImportWriter
from mirrorflow.schemas.plan import SchemaConflict, plan_schemas
from mirrorflow.schemas.registry_client import RegistryClient, RegistryError, client_for
from mirrorflow.schemas.replicate import replicate_schemas
from mirrorflow.mm2.policy import DefaultReplicationPolicy
from tests.registry_support import call, register

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def avro(name: str, *fields: tuple[str, str], namespace: str | None = None) -> str:
    d: dict = {"type": "record", "name": name,
               "fields": [{"name": n, "type": json.loads(t) if t.startswith("[") else t} for n, t in fields]}
    if namespace:
        d = {"type": "record", "name": name, "namespace": namespace, "fields": d["fields"]}
    return json.dumps(d, separators=(",", ":"))


def schema_config(tmp_path, source, target, registries, prefix: str, registry_a: dict | None = None,
                  registry_b: dict | None = None, **props):
    clusters = {}
    for alias, c in (("A", source), ("B", target)):
        clusters[alias] = {**c.client_config(), "schema.registry.url": registries[alias].confluent_url}
    clusters["A"].update(registry_a or {})
    clusters["B"].update(registry_b or {})
    raw = {"clusters": clusters, "flows": {"A->B": {"topics": f"{prefix}.*", **props}}}
    path = tmp_path / "mf.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config_mod.load(path)


def subject_versions(url: str, subject: str) -> list[dict]:
    return [call(url, "GET", f"/subjects/{subject}/versions/{v}") for v in call(url, "GET", f"/subjects/{subject}/versions")]


def subjects(url: str) -> set[str]:
    return set(call(url, "GET", "/subjects"))


def content_exists(reg, content_id: int) -> bool:
    try:
        urllib.request.urlopen(f"{reg.url}/apis/registry/v3/ids/contentIds/{content_id}", timeout=10).read()
        return True
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
        return False


def test_copies_subjects_with_ids_references_and_compatibility(tmp_path, source, target, registries, unique):
    p = unique("sch")
    a, b = registries["A"].confluent_url, registries["B"].confluent_url
    # B's registry already holds schemas of its own: its ids are not A's
    register(b, f"{p}.local-value", avro("Local", ("x", "int")))
    v1 = register(a, f"{p}.orders-value", avro("Order", ("id", "long")))
    v2 = register(a, f"{p}.orders-value", avro("Order", ("id", "long"), ("note", '["null","string"]')))
    common = register(a, f"{p}.common", avro("Common", ("c", "int"), namespace="acme"))
    ref = [{"name": "acme.Common", "subject": f"{p}.common", "version": 1}]
    withref = register(a, f"{p}.withref-value", avro("W", ("c", "acme.Common")), ref)
    call(a, "PUT", f"/config/{p}.orders-value", {"compatibility": "FULL"})
    cfg = schema_config(tmp_path, source, target, registries, p)

    dry = replicate_schemas(cfg, "A->B", dry_run=True)
    assert dry.writer == "apicurio-import"
    assert dry.ids == sorted([v1, v2, common, withref])
    assert dry.missing == 4 and not any(s.startswith(f"A.{p}") for s in subjects(b))  # a dry run writes nothing
    # dependency order: the referenced subject before the schema that references it
    order = [line.split(" ")[0] for line in dry.copies]
    assert order.index(f"{p}.common") < order.index(f"{p}.withref-value")

    run = replicate_schemas(cfg, "A->B")
    assert len(run.copies) == 4 and run.present == 0
    assert run.subjects == {f"{p}.common": f"A.{p}.common", f"{p}.orders-value": f"A.{p}.orders-value",
                            f"{p}.withref-value": f"A.{p}.withref-value"}
    got = subject_versions(b, f"A.{p}.orders-value")
    assert [(g["version"], g["id"]) for g in got] == [(1, v1), (2, v2)]
    assert [g["schema"] for g in got] == [g["schema"] for g in subject_versions(a, f"{p}.orders-value")]
    assert call(b, "GET", f"/subjects/A.{p}.orders-value/versions/latest")["id"] == v2
    w = call(b, "GET", f"/subjects/A.{p}.withref-value/versions/1")
    assert w["id"] == withref
    assert w["references"] == [{"name": "acme.Common", "subject": f"A.{p}.common", "version": 1}]
    assert call(b, "GET", f"/subjects/A.{p}.common/versions/1")["id"] == common
    for i in (v1, v2, common, withref):  # what a consumer on B resolves
        assert call(b, "GET", f"/schemas/ids/{i}")["schema"] == call(a, "GET", f"/schemas/ids/{i}")["schema"]
    assert call(b, "GET", f"/config/A.{p}.orders-value")["compatibilityLevel"] == "FULL"

    # incremental: nothing again; then only the new version
    again = replicate_schemas(cfg, "A->B")
    assert again.copies == [] and again.present == 4 and again.compatibility == {}
    # A's next version breaks FULL compatibility (A's rule was lowered for it): B's FULL rule does not judge
    # the source's history, and B ends with A's level
    call(a, "PUT", f"/config/{p}.orders-value", {"compatibility": "NONE"})
    v3 = register(a, f"{p}.orders-value", avro("Order", ("id", "long"), ("note", '["null","string"]'),
                                                 ("qty", "int")))
    more = replicate_schemas(cfg, "A->B")
    assert more.ids == [v3] and more.present == 4
    assert [(g["version"], g["id"]) for g in subject_versions(b, f"A.{p}.orders-value")] == [(1, v1), (2, v2), (3, v3)]
    assert call(b, "GET", f"/subjects/A.{p}.orders-value/versions/latest")["id"] == v3
    assert more.compatibility == {f"A.{p}.orders-value": "NONE"}
    assert call(b, "GET", f"/config/A.{p}.orders-value")["compatibilityLevel"] == "NONE"

    # a subject B holds that came from A but that A no longer has: reported, never deleted
    register(b, f"A.{p}.gone-value", avro("Gone", ("g", "int")))
    orphaned = replicate_schemas(cfg, "A->B")
    assert f"A.{p}.gone-value" in orphaned.orphans and f"A.{p}.gone-value" in subjects(b)

    # B producing after a failover: a new schema gets an id of its own, above every copied one
    fresh = register(b, f"A.{p}.orders-value", avro("Order", ("id", "long"), ("note", '["null","string"]'),
                                                    ("qty", "int"), ("more", '["null","int"]')))
    assert fresh > max(v1, v2, common, withref, v3)


def test_cli_dry_run_json_and_the_report(tmp_path, source, target, registries, unique):
    p = unique("cli")
    i = register(registries["A"].confluent_url, f"{p}.events-value", avro("E", ("e", "string")))
    cfg = schema_config(tmp_path, source, target, registries, p)
    out = subprocess.run([sys.executable, "-m", "mirrorflow.cli", "--config", str(cfg.path), "schemas",
                          "--flow", "A->B", "--dry-run", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    # (subjects not named after a topic, e.g. other tests' `<prefix>.common`, are copied by every flow)
    assert i in report["ids"] and report["missing"] >= 1 and report["dry_run"] is True
    assert report["subjects"][f"{p}.events-value"] == f"A.{p}.events-value"
    out = subprocess.run([sys.executable, "-m", "mirrorflow.cli", "--config", str(cfg.path), "schemas",
                          "--flow", "A->B"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "schemas A->B: copied " in out.stdout and f"-> A.{p}.events-value v1  id {i}  AVRO" in out.stdout
    assert call(registries["B"].confluent_url, "GET", f"/subjects/A.{p}.events-value/versions/1")["id"] == i
    # the pass is in the flow's history
    hist = subprocess.run([sys.executable, "-m", "mirrorflow.cli", "--config", str(cfg.path), "history",
                           "--flow", "A->B"], capture_output=True, text=True, cwd=ROOT)
    assert "schemas" in hist.stdout, hist.stdout + hist.stderr


def test_an_id_taken_on_the_target_stops_the_pass_before_any_write(tmp_path, source, target, registries, unique):
    p = unique("idc")
    a, b = registries["A"].confluent_url, registries["B"].confluent_url
    first = register(a, f"{p}.aaa-value", avro("First", ("f", "int")))
    taken = register(a, f"{p}.bbb-value", avro("Second", ("s", "int")))
    # B holds `taken` with another schema (pinned as an import would)
    tgt = client_for(schema_config(tmp_path, source, target, registries, p).cluster("B"))
    from mirrorflow.schemas.catalog import SchemaVersion
    from mirrorflow.schemas.plan import SchemaCopy
    foreign = SchemaVersion("x", 1, taken, avro("Foreign", ("z", "string")))
    ApicurioWriter(tgt)._import([SchemaCopy(foreign, foreign)])
    cfg = schema_config(tmp_path, source, target, registries, p)
    with pytest.raises(SchemaConflict) as err:
        replicate_schemas(cfg, "A->B")
    msg = str(err.value)
    assert f"id {taken}" in msg and f"{p}.bbb-value version 1" in msg and "nothing was written" in msg
    assert not {f"A.{p}.aaa-value", f"A.{p}.bbb-value"} & subjects(b)
    assert not content_exists(registries["B"], first)  # not even the id that was free


def test_a_renamed_subject_holding_another_schema_stops_the_pass(tmp_path, source, target, registries, unique):
    p = unique("sub")
    a, b = registries["A"].confluent_url, registries["B"].confluent_url
    ok = register(a, f"{p}.aaa-value", avro("Fine", ("f", "int")))
    mine = register(a, f"{p}.orders-value", avro("Order", ("id", "long")))
    theirs = register(b, f"A.{p}.orders-value", avro("NotAnOrder", ("n", "string")))
    cfg = schema_config(tmp_path, source, target, registries, p)
    with pytest.raises(SchemaConflict) as err:
        replicate_schemas(cfg, "A->B")
    msg = str(err.value)
    assert f"subject A.{p}.orders-value version 1 on B holds id {theirs} (another schema)" in msg
    assert f"{p}.orders-value version 1 is id {mine}" in msg
    assert f"A.{p}.aaa-value" not in subjects(b) and not content_exists(registries["B"], ok)


def test_unreachable_registry_and_refused_credential(tmp_path, source, target, registries, unique, monkeypatch):
    from mirrorflow_dev.processes import free_port

    p = unique("bad")
    register(registries["A"].confluent_url, f"{p}.x-value", avro("X", ("x", "int")))
    cfg = schema_config(tmp_path, source, target, registries, p,
                        registry_b={"schema.registry.url": f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"})
    with pytest.raises(RegistryError, match=r"B's schema registry \(http://127\.0\.0\.1:\d+/apis/ccompat/v7\): "
                                            r"unreachable \(GET /subjects"):
        replicate_schemas(cfg, "A->B")

    # a registry behind basic auth (a proxy checking the header in front of A's registry)
    proxy = AuthProxy(registries["A"].url, "mirror:right-secret")
    try:
        monkeypatch.setenv("A_REGISTRY_USER_INFO", "mirror:wrong-secret")
        cfg = schema_config(tmp_path, source, target, registries, p, registry_a={
            "schema.registry.url": f"{proxy.url}/apis/ccompat/v7", "basic.auth.credentials.source": "USER_INFO",
            "basic.auth.user.info": "${env:A_REGISTRY_USER_INFO}"})
        with pytest.raises(RegistryError) as err:
            replicate_schemas(cfg, "A->B")
        assert "A's schema registry" in str(err.value) and "refused our credential: HTTP 401" in str(err.value)
        assert "wrong-secret" not in str(err.value)
        monkeypatch.setenv("A_REGISTRY_USER_INFO", "mirror:right-secret")
        run = replicate_schemas(cfg, "A->B", dry_run=True)
        assert run.subjects[f"{p}.x-value"] == f"A.{p}.x-value"
        assert proxy.seen == {"Basic " + base64.b64encode(b"mirror:wrong-secret").decode(),
                              "Basic " + base64.b64encode(b"mirror:right-secret").decode()}
        assert "secret" not in json.dumps(cfg.cluster("A").redacted()) + str(cfg.cluster("A").registry).replace(
            "${env:A_REGISTRY_USER_INFO}", "")
    finally:
        proxy.close()


def test_confluent_import_writer_refuses_a_registry_that_ignores_the_id(tmp_path, source, target, registries,
                                                                         unique):
    """The Confluent IMPORT-mode writer, pointed at Apicurio's Confluent API (which accepts IMPORT mode but
    ignores a requested id), stops at the first version and names it: the only part of that writer that runs
    against a real server here."""
    p = unique("cfi")
    a = registries["A"].confluent_url
    wanted = register(a, f"{p}.x-value", avro("X", ("x", "int")))
    cfg = schema_config(tmp_path, source, target, registries, p)
    src, tgt = client_for(cfg.cluster("A")), client_for(cfg.cluster("B"))
    plan = plan_schemas(read_catalog(src, [f"{p}.x-value"]), read_catalog(tgt, []), DefaultReplicationPolicy(),
                        "A", "B")
    writer = ConfluentImportWriter(tgt)
    assert writer.check(plan) in ([], [f"id {wanted} on B already holds another schema than {p}.x-value version 1"])
    with pytest.raises(RegistryError, match=rf"subject A\.{p}\.x-value version 1 was registered under id \d+, "
                                            rf"not {wanted}"):
        writer.write(plan, set())


class AuthProxy:
    """A reverse proxy on 127.0.0.1 that answers 401 unless the request carries `user_info` as basic auth."""

    def __init__(self, upstream: str, user_info: str):
        want = "Basic " + base64.b64encode(user_info.encode()).decode()
        seen: set[str] = set()
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _forward(self):
                got = self.headers.get("Authorization", "")
                seen.add(got)
                if got != want:
                    self.send_response(401)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b'{"error_code":401,"message":"Unauthorized"}')
                    return
                n = int(self.headers.get("Content-Length") or 0)
                req = urllib.request.Request(upstream + self.path, data=self.rfile.read(n) if n else None,
                                             method=self.command,
                                             headers={k: v for k, v in self.headers.items()
                                                      if k.lower() in ("content-type", "accept")})
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        status, body = resp.status, resp.read()
                except urllib.error.HTTPError as exc:
                    status, body = exc.code, exc.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_the_demos_schemas_reach_b_with_their_ids(tmp_path, source, target, registries):
    """What scripts/demo shows: `mirrorflow demo schemas` registers two versions of `orders-value` in A's
    registry; `mirrorflow schemas` copies them to B's as `A.orders-value`, each version with A's id."""
    cfg = schema_config(tmp_path, source, target, registries, "orders")

    def mf(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mirrorflow.cli", "--config", str(cfg.path), *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)

    seeded = mf("demo", "schemas")
    assert seeded.returncode == 0, seeded.stderr
    ids = [int(line.rsplit("id ", 1)[1]) for line in seeded.stdout.splitlines()]
    assert len(ids) == 2 and ids[0] != ids[1], seeded.stdout
    copied = mf("schemas", "--flow", "A->B")
    assert copied.returncode == 0, copied.stderr
    for v, i in enumerate(ids, 1):
        assert f"-> A.orders-value v{v}  id {i}  AVRO" in copied.stdout, copied.stdout
        assert call(registries["B"].confluent_url, "GET", f"/subjects/A.orders-value/versions/{v}")["id"] == i
