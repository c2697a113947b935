"""An `mm2.properties` (MM2's dedicated mode): cluster aliases, `A->B.` flow properties, per-cluster
client settings, and the top-level client settings MM2 applies to every cluster."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mirrorflow.config.client_settings import librdkafka_problem
from mirrorflow.config.mm2_import.flow_settings import flow_settings
from mirrorflow.config.mm2_import.java_clients import librdkafka_settings
from mirrorflow.config.mm2_import.names import DEPRECATED, IGNORED, IGNORED_PREFIXES
from mirrorflow.config.mm2_import.result import Imported
from mirrorflow.config.overrides import PREFIXES as OVERRIDE_PREFIXES
from mirrorflow.config.properties import FLOW_PROPERTIES, REFUSED
from mirrorflow.errors import ConfigError


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties text: `k=v`, `k: v` or `k v`, comments, continuation lines, escapes."""
    props: dict[str, str] = {}
    logical: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.lstrip() if not buf else raw.lstrip()
        if not buf and (not line or line[0] in "#!"):
            continue
        if _continues(line):
            buf += line[:-1]
            continue
        logical.append(buf + line)
        buf = ""
    if buf:
        logical.append(buf)
    for line in logical:
        m = re.match(r"((?:[^\s:=\\]|\\.)+)\s*[:=\s]\s*(.*)$", line)
        if not m:
            props[_unescape(line.strip())] = ""
            continue
        props[_unescape(m.group(1))] = _unescape(m.group(2).rstrip())
    return props


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(m.group(1), m.group(1)), s)


@dataclass
class _Keys:
    """An mm2.properties' keys sorted by what they configure."""

    clusters: dict[str, dict[str, str]]  # alias -> its client settings
    clients: dict[str, dict[str, dict[str, str]]]  # alias -> producer | consumer | admin -> settings
    flows: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # (source, target) -> properties
    top: dict[str, str] = field(default_factory=dict)  # the rest: shared client settings and flow defaults


def from_properties(props: dict[str, str], source: str = "mm2.properties") -> Imported:
    imp = Imported()
    aliases = [a.strip() for a in props.get("clusters", "").split(",") if a.strip()]
    if not aliases:
        raise ConfigError(
            [("clusters", "missing: an mm2.properties lists its cluster aliases in `clusters`")], source=source
        )
    keys = _sort_keys(imp, props, aliases)
    # MM2 applies top-level client settings (security.protocol, ssl.*, ...) to every cluster.
    shared = {k: v for k, v in keys.top.items() if _is_client_setting(k, v)}
    for alias in aliases:
        imp.clusters[alias] = librdkafka_settings(imp, alias, {**shared, **keys.clusters[alias]}, f"{alias}.")
    imp.defaults = flow_settings(imp, {k: v for k, v in keys.top.items() if k not in shared}, "")
    for (src, tgt), body in keys.flows.items():
        settings = flow_settings(imp, body, f"{src}->{tgt}.")
        enabled = str(body.get("enabled", "false")).strip().lower() == "true"
        settings["enabled"] = enabled  # dedicated mode: a pair runs only with `A->B.enabled = true`
        settings = {"enabled": settings.pop("enabled"), **settings}
        for kind, target_side in (("producer", tgt), ("consumer", src), ("admin", tgt)):
            for k, v in keys.clients[target_side][kind].items():
                settings.setdefault(f"{kind}.{k}", imp.secret_ref(f"{target_side}.{kind}.{k}", k, v))
        imp.flows[f"{src}->{tgt}"] = settings
        # the herder A->B is a Connect worker on B; a top-level offset.storage.* wins over B's
        # (MirrorMakerConfig.workerConfig puts it after the cluster's properties)
        offsets = props.get("offset.storage.topic") or props.get(f"{tgt}.offset.storage.topic")
        if offsets:
            imp.takeover[f"{src}->{tgt}"] = {"mm2-offsets-topic": offsets.strip()}
    if not any(f.get("enabled") for f in imp.flows.values()):
        imp.notes.append("no `A->B.enabled = true` line: no flow is enabled (MM2 dedicated mode runs none either)")
    return imp


def _sort_keys(imp: Imported, props: dict[str, str], aliases: list[str]) -> _Keys:
    """`A->B.` keys to their flow, `A.` keys to their cluster (a flow property there is noted: MM2
    has none per cluster), the rest to the top level."""
    keys = _Keys({a: {} for a in aliases}, {a: {"producer": {}, "consumer": {}, "admin": {}} for a in aliases})
    # longest alias first, so alias `A` does not claim `AB.bootstrap.servers`
    by_length = sorted(aliases, key=len, reverse=True)
    for key, value in props.items():
        if key == "clusters":
            continue
        m = re.match(r"^([A-Za-z0-9_.-]+?)->([A-Za-z0-9_.-]+?)\.(.+)$", key)
        if m and m.group(1) in aliases and m.group(2) in aliases:
            keys.flows.setdefault((m.group(1), m.group(2)), {})[m.group(3)] = value
            continue
        alias = next((a for a in by_length if key.startswith(a + ".")), None)
        if alias is None:
            keys.top[key] = value
            continue
        rest = key[len(alias) + 1 :]
        kind = rest.split(".", 1)[0]
        if kind in ("producer", "consumer", "admin") and "." in rest:
            keys.clients[alias][kind][rest.split(".", 1)[1]] = value
        elif rest in FLOW_PROPERTIES or rest in DEPRECATED or rest in IGNORED or rest in REFUSED:
            imp.notes.append(f"{key}: a per-cluster MM2 property; set it on the flows instead (not imported)")
        else:
            keys.clusters[alias][rest] = value
    return keys


def _is_client_setting(key: str, value: str) -> bool:
    if (
        key in FLOW_PROPERTIES
        or key in DEPRECATED
        or key in IGNORED
        or key in REFUSED
        or key.startswith(IGNORED_PREFIXES)
        or key.startswith(OVERRIDE_PREFIXES)
    ):
        return False
    return (
        key == "sasl.jaas.config"
        or key.startswith(("ssl.", "sasl.", "security."))
        or librdkafka_problem(key, value) is None
    )
