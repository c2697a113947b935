"""What a registry holds, read through its Confluent API: subjects, their versions (id, type, schema text,
references) and compatibility settings.

`GET /subjects`, then `GET /subjects/{s}/versions` and `GET /subjects/{s}/versions/{v}` of each (soft-deleted
versions are left out, as the API lists them); `GET /config` and `GET /config/{s}` (a subject without a
setting of its own answers 404 on Confluent; Apicurio answers the effective level).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mirrorflow.schemas.registry_client import NotFound, RegistryClient, quote_subject


@dataclass(frozen=True)
class Reference:
    """A schema's reference to another subject's version (`name`: how the schema names it)."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaVersion:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()

    def same_schema(self, other: SchemaVersion) -> bool:
        """The same schema (type, text, references): what an id must keep naming."""
        return (self.schema_type, self.schema, self.references) == (other.schema_type, other.schema, other.references)


@dataclass
class Catalog:
    """A registry's subjects (name -> versions, ascending) and compatibility (subject -> level)."""

    subjects: dict[str, list[SchemaVersion]] = field(default_factory=dict)
    compatibility: dict[str, str] = field(default_factory=dict)
    global_compatibility: str | None = None

    def version(self, subject: str, version: int) -> SchemaVersion | None:
        return next((v for v in self.subjects.get(subject, []) if v.version == version), None)

    def by_id(self) -> dict[int, SchemaVersion]:
        """id -> one version holding it (the lowest subject and version)."""
        out: dict[int, SchemaVersion] = {}
        for s in sorted(self.subjects):
            for v in self.subjects[s]:
                out.setdefault(v.id, v)
        return out

    @property
    def version_count(self) -> int:
        return sum(len(vs) for vs in self.subjects.values())


def schema_version(subject: str, d: dict) -> SchemaVersion:
    """A version as the API answers it (`schemaType` absent means AVRO)."""
    refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in d.get("references") or [])
    return SchemaVersion(
        str(d.get("subject", subject)),
        int(d["version"]),
        int(d["id"]),
        str(d["schema"]),
        str(d.get("schemaType") or "AVRO"),
        refs,
    )


def read_catalog(client: RegistryClient, subjects: list[str] | None = None, compatibility: bool = True) -> Catalog:
    """The registry's catalog (of `subjects` only, when given: those missing are left out)."""
    cat = Catalog()
    names = client.get("/subjects") if subjects is None else subjects
    for subject in sorted(names):
        q = quote_subject(subject)
        try:
            versions = client.get(f"/subjects/{q}/versions")
        except NotFound:
            continue
        cat.subjects[subject] = [
            schema_version(subject, client.get(f"/subjects/{q}/versions/{int(v)}")) for v in sorted(versions)
        ]
    if compatibility:
        cat.global_compatibility = _level(client, "/config")
        for subject in cat.subjects:
            level = _level(client, f"/config/{quote_subject(subject)}")
            if level:
                cat.compatibility[subject] = level
    return cat


def _level(client: RegistryClient, path: str) -> str | None:
    try:
        d = client.get(path)
    except NotFound:
        return None
    return str(d.get("compatibilityLevel") or d.get("compatibility") or "") or None if isinstance(d, dict) else None


def read_id(client: RegistryClient, schema_id: int) -> dict | None:
    """`GET /schemas/ids/{id}`: the schema an id names (None: no such id)."""
    try:
        return client.get(f"/schemas/ids/{schema_id}")
    except NotFound:
        return None
