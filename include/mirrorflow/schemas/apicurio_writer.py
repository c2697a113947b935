"""The target writer for Apicurio Registry 3: the source's ids kept as Apicurio content ids.

Apicurio's Confluent-compatible API (`.../apis/ccompat/v7`, what `schema.registry.url` names) answers a
schema's content id as its id, and ignores an id asked for when registering. Its native import
(`POST /apis/registry/v3/admin/import`, a zip of entities, `X-Registry-Preserve-ContentId: true`) stores
content under the content id the zip gives. So one pass:

1. checks (nothing written yet): each id to copy is free on the target, or already holds exactly this schema
   (a pass that stopped after step 2), and no other id holds this schema (Apicurio keeps one id per
   content: the same schema cannot be stored twice);
2. imports one zip holding only the content entities (schema bytes, their references, the ids), which
   pins each id to its schema; content that no version uses is invisible through the Confluent API;
3. creates each version through the native API in dependency order (`POST .../groups/default/artifacts`
   for a new subject, `.../artifacts/{subject}/versions` for the next version, version numbers given):
   Apicurio finds the content by its hash and uses the pinned id, and `latest` moves as on any write
   (importing versions directly would not move it); each answer's content id is checked;
4. sets compatibility per subject through the Confluent API (`PUT /config/{subject}`), after the versions,
   so a rule never judges the source's own history (a subject that already has a rule on the target is
   set to NONE while its new versions are written, then to its level again, also after a failure).

The content hash Apicurio computes is SHA-256 of the schema bytes followed by its references serialized
as Apicurio does (`[{"groupId":null,"artifactId":...,"version":...,"name":...}]`); the import's entities
carry the same, so step 3 finds them. Run against a real Apicurio Registry 3.3.3 by the tests.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import zipfile
from typing import Any
from urllib.parse import urlsplit

from mirrorflow.schemas.catalog import SchemaVersion
from mirrorflow.schemas.plan import SchemaCopy, SchemaPlan
from mirrorflow.schemas.registry_client import NotFound, RegistryClient, RegistryError, quote_subject

CCOMPAT_SUFFIXES = ("/apis/ccompat/v7", "/apis/ccompat/v6")
CONTENT_TYPES = {"AVRO": "application/json", "JSON": "application/json", "PROTOBUF": "application/x-protobuf"}
ARTIFACT_TYPES = {"AVRO": "AVRO", "JSON": "JSON", "PROTOBUF": "PROTOBUF"}
GROUP = "default"  # the group Apicurio's Confluent API keeps subjects in


def is_apicurio(client: RegistryClient) -> bool:
    """Whether the registry's URL is Apicurio's Confluent-compatible API (`.../apis/ccompat/v7`)."""
    return urlsplit(client.base).path.rstrip("/").endswith(CCOMPAT_SUFFIXES)


def serialized_references(v: SchemaVersion) -> str | None:
    if not v.references:
        return None
    refs = [{"groupId": None, "artifactId": r.subject, "version": str(r.version), "name": r.name} for r in v.references]
    return json.dumps(refs, separators=(",", ":"), ensure_ascii=False)


def content_hash(v: SchemaVersion) -> str:
    refs = serialized_references(v)
    return hashlib.sha256(v.schema.encode() + (refs.encode() if refs else b"")).hexdigest()


class ApicurioWriter:
    kind = "apicurio-import"

    def __init__(self, client: RegistryClient):
        self.client = client
        path = urlsplit(client.base).path.rstrip("/")
        self.root = client.base[: len(client.base) - len(path)] + next(
            path[: -len(s)] for s in CCOMPAT_SUFFIXES if path.endswith(s)
        )
        self.v3 = self.root + "/apis/registry/v3"
        self._pinned: set[int] = set()

    def check(self, plan: SchemaPlan) -> list[str]:
        """Conflicts on the target for the plan's ids (step 1); records which ids are already pinned."""
        conflicts = []
        for copy in _one_per_id(plan.copies):
            v = copy.target
            held = self._content(copy.id)
            if held is not None:
                if (held, self._references(copy.id)) == (v.schema, serialized_references(v)):
                    self._pinned.add(copy.id)
                else:
                    conflicts.append(
                        f"id {copy.id} on {self.client.endpoint.alias} already holds another schema than "
                        f"{copy.source.subject} version {copy.source.version}"
                    )
                continue
            if self._hash_exists(content_hash(v)):
                conflicts.append(
                    f"{copy.source.subject} version {copy.source.version} (id {copy.id}): the same schema is "
                    f"already stored on {self.client.endpoint.alias} under another id (Apicurio keeps one id per "
                    "schema): its subjects there must be removed before the source's id can be kept"
                )
        return conflicts

    def write(self, plan: SchemaPlan, existing_subjects: set[str]) -> list[str]:
        """Steps 2 to 4; the lines of what was written."""
        done: list[str] = []
        todo = [c for c in _one_per_id(plan.copies) if c.id not in self._pinned]
        if todo:
            self._import(todo)
            for c in todo:  # an import that partly fails still answers 2xx
                if self._content(c.id) is None:
                    raise RegistryError(
                        self.client.name,
                        f"the import did not store id {c.id} ({c.source.subject} version {c.source.version})",
                    )
        subjects = set(existing_subjects)
        # a subject already on the target judges new versions by its rule: the source accepted them under
        # its own settings at the time, so the rule is lifted while they are written, then set again
        relax = {
            c.target.subject
            for c in plan.copies
            if c.target.subject in subjects and plan.target_levels.get(c.target.subject, "NONE") != "NONE"
        }
        for subject in sorted(relax):
            self.client.put(f"/config/{quote_subject(subject)}", {"compatibility": "NONE"})
        try:
            for c in plan.copies:
                self._create(c, c.target.subject in subjects)
                subjects.add(c.target.subject)
                done.append(f"copied {c.line()}")
        finally:
            for subject in sorted(relax):
                level = plan.compatibility.get(subject) or plan.target_levels[subject]
                self.client.put(f"/config/{quote_subject(subject)}", {"compatibility": level})
        for subject, level in plan.compatibility.items():
            self.client.put(f"/config/{quote_subject(subject)}", {"compatibility": level})
            done.append(f"compatibility {subject}: {level}")
        return done

    def _import(self, copies: list[SchemaCopy]) -> None:
        now = int(time.time() * 1000)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            manifest = {
                "systemName": "mirrorflow",
                "systemDescription": "schemas replicated by mirrorflow",
                "systemVersion": "3.3.3",
                "exportVersion": "3.0",
                "exportedOn": now,
                "exportedBy": "mirrorflow",
            }
            zf.writestr(f"manifest-{now}.Manifest.json", json.dumps(manifest))
            for c in copies:
                v, h = c.target, content_hash(c.target)
                entity = {
                    "contentId": c.id,
                    "canonicalHash": None,
                    "contentHash": h,
                    "artifactType": ARTIFACT_TYPES.get(v.schema_type, v.schema_type),
                    "contentType": CONTENT_TYPES.get(v.schema_type, "application/json"),
                    "serializedReferences": serialized_references(v),
                }
                zf.writestr(f"content/{h}.Content.json", json.dumps(entity))
                zf.writestr(f"content/{h}.Content.data", v.schema.encode())
        self.client.request(
            "POST",
            "/admin/import",
            buf.getvalue(),
            "application/zip",
            params={"requireEmptyRegistry": False},
            headers={"X-Registry-Preserve-ContentId": "true", "X-Registry-Preserve-GlobalId": "false"},
            root=self.v3,
        )

    def _create(self, c: SchemaCopy, subject_exists: bool) -> None:
        v = c.target
        content = {
            "content": v.schema,
            "contentType": CONTENT_TYPES.get(v.schema_type, "application/json"),
            "references": [
                {"groupId": None, "artifactId": r.subject, "version": str(r.version), "name": r.name}
                for r in v.references
            ],
        }
        version: dict[str, Any] = {"version": str(v.version), "content": content}
        body: dict[str, Any]
        a = quote_subject(v.subject)
        if subject_exists:
            path, body = f"/groups/{GROUP}/artifacts/{a}/versions", version
        else:
            path = f"/groups/{GROUP}/artifacts"
            body = {"artifactId": v.subject, "artifactType": ARTIFACT_TYPES.get(v.schema_type), "firstVersion": version}
        try:
            raw = self.client.request("POST", path, json.dumps(body).encode(), "application/json", root=self.v3)
        except RegistryError as exc:
            raise RegistryError(
                self.client.name,
                f"subject {v.subject} version {v.version} (id {c.id}) was not written: {exc.detail}",
                exc.status,
            ) from None
        answer = json.loads(raw or b"{}")
        got = (answer["version"] if isinstance(answer.get("version"), dict) else answer).get("contentId")
        if got != c.id:
            raise RegistryError(
                self.client.name,
                f"subject {v.subject} version {v.version} was stored under id {got}, not {c.id}: its schema "
                "did not match the content imported for that id",
            )

    def _content(self, content_id: int) -> str | None:
        try:
            return self.client.request("GET", f"/ids/contentIds/{content_id}", root=self.v3).decode()
        except NotFound:
            return None

    def _references(self, content_id: int) -> str | None:
        raw = json.loads(self.client.request("GET", f"/ids/contentIds/{content_id}/references", root=self.v3) or b"[]")
        if not raw:
            return None
        refs = [
            {"groupId": None, "artifactId": r.get("artifactId"), "version": r.get("version"), "name": r.get("name")}
            for r in raw
        ]
        return json.dumps(refs, separators=(",", ":"), ensure_ascii=False)

    def _hash_exists(self, h: str) -> bool:
        try:
            self.client.request("GET", f"/ids/contentHashes/{h}", root=self.v3)
            return True
        except NotFound:
            return False


def _one_per_id(copies: list[SchemaCopy]) -> list[SchemaCopy]:
    out: dict[int, SchemaCopy] = {}
    for c in copies:
        out.setdefault(c.id, c)
    return list(out.values())
