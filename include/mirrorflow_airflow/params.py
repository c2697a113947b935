"""The Params of the generated DAGs' trigger forms, in one place so every DAG words them alike.

Each Param carries a JSON schema (`format: regex`, `enum`, `minimum`), so a bad value is refused
when the run is created (the trigger form, `dag.test(run_conf=...)`, the REST API, a backfill's
conf) -- never halfway through a task. An optional field defaults to None and allows "null": Airflow's
trigger form shows an empty-string default of a plain "string" as a missing required value and
keeps its Trigger button disabled (tests/airflow/test_ui_forms_browser.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Param

from mirrorflow.metadata.sync_report import CONCERNS
from mirrorflow.params import Field


def dry_run(description: str, default: bool = False) -> Param:
    return Param(default, type="boolean", title="Dry run", description=description)


def form(fields: Sequence[Field]) -> dict[str, Param]:
    """An operation's inputs (mirrorflow.params.Field) as its trigger form's Params, each with the schema
    of its rule, so the form refuses what the operation's own check would."""
    out: dict[str, Param] = {}
    for f in fields:
        text = f.help[:1].upper() + f.help[1:]
        bound: dict[str, Any] = {} if f.minimum is None else {"minimum": f.minimum}
        if f.kind == "flag":
            out[f.name] = Param(bool(f.default), type="boolean", title=f.title, description=text)
        elif f.kind == "count":
            out[f.name] = Param(f.default, type=["null", "integer"], title=f.title, description=text, **bound)
        elif f.kind == "number":
            out[f.name] = Param(f.default, type="number", title=f.title, description=text, **bound)
        elif f.kind == "choice":
            out[f.name] = Param(f.default, enum=list(f.choices), title=f.title, description=text)
        elif f.kind == "text" and (f.required or f.default is not None):
            shape: dict[str, Any] = {"pattern": f.pattern} if f.pattern else {}
            out[f.name] = Param(f.default or "", type="string", minLength=1, title=f.title, description=text, **shape)
        elif f.kind == "text":
            out[f.name] = optional_text(f.title, text, **({"minLength": 1} if f.blank else {}))
        else:
            out[f.name] = regex(f.title, text)
    return out


def optional_text(title: str, description: str, **schema: Any) -> Param:
    """An optional text field: None (empty in the form) unless the user types something."""
    return Param(None, type=["null", "string"], title=title, description=description, **schema)


def regex(title: str, description: str) -> Param:
    """An optional regex (empty: no filter); an invalid one is refused by the schema's format check."""
    return optional_text(title, description, format="regex")


def sync_only(schemas: bool) -> Param:
    """The sync DAG's concerns (metadata.sync_report.CONCERNS; `schemas` where the flow's clusters name
    registries), all by default: a scheduled run gets the default."""
    concerns = [*CONCERNS, *(["schemas"] if schemas else [])]
    return Param(
        concerns,
        type="array",
        items={"type": "string", "enum": concerns},
        minItems=1,
        uniqueItems=True,
        examples=concerns,
        title="Only",
        description="Which concerns to sync: topics (and partitions), " + ", ".join(concerns[1:]),
    )


def regex_or_none(params: dict[str, Any] | None, key: str) -> str | None:
    """A regex Param's value, None when empty (no filter)."""
    value = (params or {}).get(key) or ""
    return value or None


def params_doc(params: dict[str, Param]) -> str:
    """A Markdown list of a DAG's Params (title, name, description) for its doc_md."""
    lines = ["", "### Params (trigger form)", ""]
    for name, p in params.items():
        p = p if isinstance(p, Param) else Param(p)
        schema = p.schema
        lines.append(f"* **{schema.get('title', name)}** (`{name}`, default `{p.value!r}`): {p.description or ''}")
    return "\n".join(lines) + "\n"
