"""The MirrorMaker 2 / Strimzi compatibility table, generated from the code's own property tables.

docs/mm2-compatibility.md is `markdown()` (`mirrorflow config compat`); a test fails when the file
is stale, when a name the source documents use has no row (extracted from their text), or when a
Kafka Connect worker setting has none. Every row says what mirrorflow
does with an MM2, Kafka Connect or Strimzi KafkaMirrorMaker2 property: same, mapped, different
(and why) or refused. The rows come from:

* properties.FLOW_PROPERTIES (MM2's names, `mm2=True`) with properties.MM2_DIFFERENCES;
* properties.REFUSED;
* mm2_import.names: RENAMED, DEPRECATED, EXACTLY_ONCE_VALUES, IGNORED, IGNORED_PREFIXES, STRIMZI_FIELDS;
* overrides.FORMS and overrides.PROTECTED (client settings);
* client_settings.JAVA_ONLY_HINTS (Java client settings).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mirrorflow.config.client_settings import JAVA_ONLY_HINTS
from mirrorflow.config.mm2_import import names
from mirrorflow.config.overrides import FORMS, PROTECTED
from mirrorflow.config.properties import FLOW_PROPERTIES, MM2_DIFFERENCES, REFUSED

VERDICTS = ("same", "mapped", "different", "refused")
SECTIONS = (
    "MirrorMaker 2 connector properties",
    "Kafka Connect settings",
    "Client settings",
    "Strimzi KafkaMirrorMaker2 fields",
)
MM2, CONNECT, CLIENT, STRIMZI = SECTIONS


@dataclass(frozen=True)
class Row:
    name: str  # the property; `*` stands for any setting name (a prefix form)
    section: str
    verdict: str  # same | mapped | different | refused
    what: str  # what mirrorflow does with it, and why when it differs

    def matches(self, name: str) -> bool:
        """`*` matches any text (and nothing else is special: `[]` in Strimzi paths is literal)."""
        if "*" not in self.name:
            return self.name == name
        return re.fullmatch(".*".join(re.escape(p) for p in self.name.split("*")), name) is not None


def _fmt_default(v: object) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list):
        return ", ".join(v) if v else "(empty)"
    return str(v)


def rows() -> list[Row]:
    """Every row, from the code's tables (module docstring), in the order they are declared."""
    out = _import_rows(_mm2_rows())
    out += _fixed_rows() + _client_rows()
    out += [Row(field, STRIMZI, verdict, what) for field, (verdict, what) in names.STRIMZI_FIELDS.items()]
    assert all(r.verdict in VERDICTS for r in out), [r for r in out if r.verdict not in VERDICTS]
    return out


def _mm2_rows() -> list[Row]:
    """MM2's connector properties as the property table holds them, and those a config refuses."""
    out: list[Row] = []
    for name, prop in FLOW_PROPERTIES.items():
        if not prop.mm2:
            continue
        verdict, why = MM2_DIFFERENCES.get(name, ("same", ""))
        what = f"`{name}`, default `{_fmt_default(prop.default)}`" + (f": {why}" if why else "")
        out.append(Row(name, MM2, verdict, what))
    for name, why in REFUSED.items():
        section = CONNECT if name.startswith("exactly.once") else MM2
        out.append(Row(name, section, "refused", why))
    return out


def _import_rows(out: list[Row]) -> list[Row]:
    """`out` with what `config import` does with MM2 and Connect names (a renamed or exactly-once
    name replaces its row: refused in a config, imported under mirrorflow's name)."""
    for name, (new, why) in names.RENAMED.items():
        out = [r for r in out if r.name != name]
        out.append(
            Row(name, MM2, "mapped", f"refused in a mirrorflow config; `config import` makes it `{new}` ({why})")
        )
    for name, new in names.DEPRECATED.items():
        out.append(Row(name, MM2, "mapped", f"MM2's deprecated name: `config import` makes it `{new}`"))
    for name, values in names.EXACTLY_ONCE_VALUES.items():
        out = [r for r in out if r.name != name]
        mapping = ", ".join(f"{v} -> {str(eos).lower()}" for v, eos in values.items())
        what = f"refused in a mirrorflow config; `config import` sets `exactly.once` ({mapping})"
        out.append(Row(name, CONNECT, "mapped", what))
    for name, why in names.IGNORED.items():
        what = f"no effect here ({why}); `config import` leaves it out with a note"
        out.append(Row(name, CONNECT, "different", what))
    for prefix in names.IGNORED_PREFIXES:
        name = prefix + "*" if prefix.endswith(".") else prefix
        if any(name.startswith(f"{kind}.") for kind in ("source.cluster", "target.cluster")):
            what = (
                "a connector's connection settings: mirrorflow keeps them once, under `clusters.<alias>` "
                "(`config import` leaves the connector copies out)"
            )
        else:
            what = "no effect here (Kafka Connect plumbing); `config import` leaves it out with a note"
        out.append(Row(name, CONNECT, "different", what))
    return out


def _fixed_rows() -> list[Row]:
    """Names no table holds: mm2.properties' structure and the client settings both sides share."""
    return [
        Row("clusters", MM2, "mapped", "mm2.properties' alias list: the `clusters` section, one entry per alias"),
        Row(
            "<source>-><target>.enabled",
            MM2,
            "same",
            "`flows.<source>-><target>.enabled`; MM2's dedicated mode "
            "runs a pair only with `enabled = true`, and so does an imported config",
        ),
        Row("<alias>.bootstrap.servers", MM2, "mapped", "`clusters.<alias>.bootstrap.servers`"),
        Row(
            "<alias>.<client setting>",
            MM2,
            "mapped",
            "`clusters.<alias>.<setting>` (librdkafka names; Java-only settings are translated or refused, see below)",
        ),
        Row(
            "bootstrap.servers",
            CLIENT,
            "mapped",
            "`clusters.<alias>.bootstrap.servers` (a Connect worker's own cluster: the target's)",
        ),
        Row("security.protocol", CLIENT, "same", "`clusters.<alias>.security.protocol` (librdkafka's name too)"),
        Row("sasl.mechanism", CLIENT, "same", "`clusters.<alias>.sasl.mechanism` (librdkafka's name too)"),
        Row(
            "batch.size",
            CLIENT,
            "same",
            "a producer setting librdkafka knows: `producer.batch.size` or `producer.override.batch.size`",
        ),
        Row(
            "compression.type",
            CLIENT,
            "same",
            "a producer setting librdkafka knows: `producer.compression.type` or `producer.override.compression.type`",
        ),
    ]


def _client_rows() -> list[Row]:
    """Java-only client settings, the client override forms, and the settings mirrorflow holds itself."""
    out = [Row(name, CLIENT, "mapped", hint) for name, hint in JAVA_ONLY_HINTS.items()]
    for prefix, sides, kind, _rank in FORMS:
        out.append(
            Row(
                prefix + "*",
                CLIENT,
                "same",
                f"librdkafka setting `*` of the {kind} clients on the {' and '.join(sides)} cluster (MM2's scoping); "
                "Java-only settings are refused with a hint",
            )
        )
    for kind, held in PROTECTED.items():
        for setting, why in held.items():
            if setting == "bootstrap.servers":
                continue
            out.append(
                Row(f"{kind}.{setting}", CLIENT, "different", f"mirrorflow sets `{setting}` itself ({why}): refused")
            )
    return out


def markdown() -> str:
    table = rows()
    counts = {v: sum(r.verdict == v for r in table) for v in VERDICTS}
    lines = [
        "# MirrorMaker 2 compatibility",
        "",
        "<!-- Generated by `mirrorflow config compat` from the code's property tables "
        "(include/mirrorflow/config/compat.py); do not edit: tests/unit/test_mm2_compat.py fails when it is stale. -->",
        "",
        "Every MirrorMaker 2, Kafka Connect and Strimzi `KafkaMirrorMaker2` property of the source documents, "
        "and the Kafka Connect worker settings of an MM2 deployment on Connect, and what mirrorflow does with it:",
        "",
        "* **same**: the same name and meaning;",
        "* **mapped**: accepted, or translated by `mirrorflow config import`, onto mirrorflow's own setting;",
        "* **different**: no effect or another behaviour here, and why;",
        "* **refused**: a config that sets it fails `config validate` with the reason (never accepted and ignored).",
        "",
        "A prefix form (`producer.override.*`) stands for every setting under it. mirrorflow's own properties "
        "(no MM2 equivalent) are in [configuration.md](configuration.md).",
        "",
        f"{len(table)} rows: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS) + ".",
    ]
    for section in SECTIONS:
        lines += ["", f"## {section}", "", "| property | verdict | what mirrorflow does |", "|---|---|---|"]
        for r in sorted((r for r in table if r.section == section), key=lambda r: r.name):
            what = r.what.replace("|", "\\|")
            lines.append(f"| `{r.name}` | {r.verdict} | {what} |")
    return "\n".join(lines) + "\n"
