"""An MM2 flow's properties as mirrorflow flow properties: deprecated and renamed names, policy class
names, the exactly-once values, client overrides (secrets as `${env:...}`), and a note for each
property left out."""

from __future__ import annotations

from typing import Any

from mirrorflow.config.mm2_import.names import (
    DEPRECATED,
    EXACTLY_ONCE_VALUES,
    IGNORED,
    IGNORED_PREFIXES,
    POLICY_NAMES,
    RENAMED,
)
from mirrorflow.config.mm2_import.result import Imported
from mirrorflow.config.overrides import PREFIXES as OVERRIDE_PREFIXES
from mirrorflow.config.overrides import problem as override_problem
from mirrorflow.config.properties import FLOW_PROPERTIES, REFUSED


def flow_settings(imp: Imported, body: dict[str, str], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in body.items():
        full = prefix + key
        if key in DEPRECATED:
            imp.notes.append(f"{full}: deprecated MM2 name, imported as {DEPRECATED[key]}")
            key = DEPRECATED[key]
        if key == "replication.policy.class":
            value = POLICY_NAMES.get(value.strip(), value.strip())
        if key == "replication.policy.separator" and value == "":
            imp.notes.append(f"{full}: empty separator dropped (the default '.' applies)")
            continue
        if key in RENAMED:
            new, why = RENAMED[key]
            imp.notes.append(f"{full}: imported as {new} ({why})")
            key = new
        if key in EXACTLY_ONCE_VALUES:
            eos = EXACTLY_ONCE_VALUES[key].get(str(value).strip().lower())
            if eos is None:
                imp.notes.append(f"{full}: not imported (unknown value {value!r}; set exactly.once yourself)")
            else:
                out.setdefault("exactly.once", eos)
                imp.notes.append(f"{full}: {value.strip()}, imported as exactly.once: {str(eos).lower()}")
        elif key in REFUSED:
            imp.notes.append(f"{full}: not imported ({REFUSED[key]})")
        elif key in FLOW_PROPERTIES:
            refused = refused_value(key, value)
            if refused:
                imp.notes.append(f"{full}: not imported ({refused})")
            else:
                out[key] = typed(key, value)
        elif key.startswith(OVERRIDE_PREFIXES):
            held = override_problem(key)  # e.g. a setting mirrorflow must hold itself
            if held:
                imp.notes.append(f"{full}: not imported ({held})")
            else:
                out[key] = imp.secret_ref(full, key, value)
        elif key in IGNORED or key.startswith(IGNORED_PREFIXES):
            reason = IGNORED.get(key) or "no equivalent in mirrorflow"
            imp.notes.append(f"{full}: not imported ({reason})")
        else:
            imp.notes.append(f"{full}: not imported (not an MM2 flow property mirrorflow knows)")
    if "transaction.boundary.interval.ms" in out and out.get("transaction.boundary", "poll") != "interval":
        del out["transaction.boundary.interval.ms"]  # MM2 ignores it then; mirrorflow refuses it
        imp.notes.append(
            f"{prefix}transaction.boundary.interval.ms: not imported (no effect without transaction.boundary=interval)"
        )
    flush = body.get("offset.flush.interval.ms")
    if out.get("transaction.boundary") == "interval" and "transaction.boundary.interval.ms" not in out and flush:
        out["transaction.boundary.interval.ms"] = typed("transaction.boundary.interval.ms", flush)
        imp.notes.append(
            f"{prefix}transaction.boundary.interval.ms: unset, so MM2 uses offset.flush.interval.ms ({flush.strip()})"
        )
    return out


def refused_value(key: str, value: Any) -> str | None:
    """Why a value mirrorflow refuses on purpose (such as `refresh.groups.enabled=false`) is not
    imported; None otherwise. Other invalid values are kept so `config validate` names them."""
    try:
        FLOW_PROPERTIES[key].parse(value)
    except ValueError as exc:
        return str(exc) if "is not supported" in str(exc) else None
    return None


def typed(key: str, value: Any) -> Any:
    """A property value as YAML would naturally hold it (booleans, integers, lists stay text)."""
    prop = FLOW_PROPERTIES[key]
    if isinstance(prop.default, bool) or isinstance(prop.default, int):
        try:
            return prop.parse(value)
        except ValueError:
            return value  # `config validate` reports it with its key
    if isinstance(prop.default, list):
        items = [x.strip() for x in str(value).split(",") if x.strip()]
        return ", ".join(items)
    return str(value).strip() if not key.endswith("separator") else str(value)
