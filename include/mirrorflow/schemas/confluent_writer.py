"""The target writer for Confluent Schema Registry: its IMPORT mode, built to Confluent's documented API.

UNTESTED against a Confluent server: none can run here (Confluent Schema Registry is not on Maven
Central). What Confluent documents, and what this writer sends, per target subject with versions to copy:

1. `GET /mode/{subject}` (kept, to restore it), then `PUT /mode/{subject}?force=true` `{"mode": "IMPORT"}`
   (IMPORT on a subject that already has versions needs `force`);
2. `POST /subjects/{subject}/versions` `{"schema", "schemaType", "references", "id", "version"}` for each
   version in dependency order: in IMPORT mode the registry stores the schema under the given id and
   version (a 42205-style refusal when the id holds another schema);
3. the subject's mode restored (`PUT /mode/{subject}` with the old mode, or `DELETE /mode/{subject}` when
   it had none of its own), also after a failure;
4. `PUT /config/{subject}` `{"compatibility": ...}`.

Before anything is written every id is checked with `GET /schemas/ids/{id}` (free, or the same schema).
Each answer's id is compared with the source's: a registry that ignores the requested id (Apicurio's
Confluent API does) is caught at the first version, named, and the pass stops. Only that refusal path
has run against a real server (Apicurio 3.3.3, tests/integration/test_schemas.py).
"""

from __future__ import annotations

from mirrorflow.schemas.catalog import read_id
from mirrorflow.schemas.plan import SchemaPlan
from mirrorflow.schemas.registry_client import NotFound, RegistryClient, RegistryError, quote_subject


class ConfluentImportWriter:
    kind = "confluent-import"

    def __init__(self, client: RegistryClient):
        self.client = client

    def check(self, plan: SchemaPlan) -> list[str]:
        conflicts = []
        seen: set[int] = set()
        for c in plan.copies:
            if c.id in seen:
                continue
            seen.add(c.id)
            held = read_id(self.client, c.id)
            if held is None:
                continue
            refs = [
                (str(r.get("name")), str(r.get("subject")), int(r.get("version", 0)))
                for r in held.get("references") or []
            ]
            mine = [(r.name, r.subject, r.version) for r in c.target.references]
            same = (
                held.get("schema") == c.target.schema
                and (held.get("schemaType") or "AVRO") == c.target.schema_type
                and refs == mine
            )
            if not same:
                conflicts.append(
                    f"id {c.id} on {self.client.endpoint.alias} already holds another schema than "
                    f"{c.source.subject} version {c.source.version}"
                )
        return conflicts

    def write(self, plan: SchemaPlan, existing_subjects: set[str]) -> list[str]:
        done: list[str] = []
        by_subject: dict[str, list] = {}
        for c in plan.copies:
            by_subject.setdefault(c.target.subject, []).append(c)
        # subjects in the order their first version comes in the plan (dependency order)
        for subject, copies in by_subject.items():
            q = quote_subject(subject)
            old = self._mode(q)
            self.client.put(f"/mode/{q}", {"mode": "IMPORT"}, force=True)
            try:
                for c in copies:
                    v = c.target
                    body = {
                        "schema": v.schema,
                        "schemaType": v.schema_type,
                        "references": [r.to_json() for r in v.references],
                        "id": c.id,
                        "version": v.version,
                    }
                    try:
                        answer = self.client.post(f"/subjects/{q}/versions", body)
                    except RegistryError as exc:
                        raise RegistryError(
                            self.client.name,
                            f"subject {subject} version {v.version} (id {c.id}) was not written: {exc.detail}",
                            exc.status,
                        ) from None
                    got = (answer or {}).get("id")
                    if got != c.id:
                        raise RegistryError(
                            self.client.name,
                            f"subject {subject} version {v.version} was registered under id {got}, not {c.id}: "
                            "this registry does not keep a requested id in IMPORT mode (an Apicurio registry is "
                            "written through its native import: use its .../apis/ccompat/v7 URL)",
                        )
                    done.append(f"copied {c.line()}")
            finally:
                if old is None:
                    try:
                        self.client.call("DELETE", f"/mode/{q}")
                    except NotFound:
                        pass
                else:
                    self.client.put(f"/mode/{q}", {"mode": old}, force=True)
        for subject, level in plan.compatibility.items():
            self.client.put(f"/config/{quote_subject(subject)}", {"compatibility": level})
            done.append(f"compatibility {subject}: {level}")
        return done

    def _mode(self, q: str) -> str | None:
        try:
            d = self.client.get(f"/mode/{q}", defaultToGlobal=False)
        except NotFound:
            return None
        return str(d.get("mode")) if isinstance(d, dict) and d.get("mode") else None
