"""Convert an MM2 configuration to mirrorflow YAML: an `mm2.properties` (dedicated mode), a Strimzi
`KafkaMirrorMaker2`, or MM2 connector configs as posted to a Kafka Connect cluster's REST API (JSON:
one connector, or a list) or written as a connector `.properties` file.

The point is that an MM2 user's configuration runs unchanged: property names are already the
same, so the work is (1) finding clusters, flows and where each property applies, (2) turning Java
client settings into librdkafka ones, and (3) never copying a secret in clear: a password found
in a JAAS line becomes a `${env:VAR}` reference, and the output says which variables to export.
Properties that mean nothing to mirrorflow (Connect worker settings, converters, ...) are listed
in the output's header comment rather than dropped silently. The header also says how to take each
flow over from the running MM2 (`mirrorflow takeover`, with the offsets topic and the connector name
of that deployment).
"""

from __future__ import annotations

import io
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mirrorflow.config.client_settings import librdkafka_problem
from mirrorflow.config.model import FLOW_NAME_RE
from mirrorflow.config.overrides import PREFIXES as OVERRIDE_PREFIXES
from mirrorflow.config.overrides import problem as override_problem
from mirrorflow.config.properties import FLOW_PROPERTIES, REFUSED
from mirrorflow.config.secrets import SECRET_KEY_RE
from mirrorflow.errors import ConfigError
from mirrorflow.mm2.connect_offsets import STRIMZI_OFFSETS_TOPIC, strimzi_connector

# Settings that exist in MM2 deployments but have no effect here, with why (shown as comments).
# MM2 flow properties mirrorflow refuses are in properties.REFUSED (left out with that reason).
IGNORED: dict[str, str] = {
    "config.storage.replication.factor": "a Kafka Connect worker setting",
    "offset.storage.replication.factor": "a Kafka Connect worker setting",
    "status.storage.replication.factor": "a Kafka Connect worker setting",
    "config.storage.topic": "a Kafka Connect worker setting",
    "offset.storage.topic": "a Kafka Connect worker setting",
    "status.storage.topic": "a Kafka Connect worker setting",
    "key.converter": "records are copied as bytes",
    "value.converter": "records are copied as bytes",
    "header.converter": "records are copied as bytes",
    "dedicated.mode.enable.internal.rest": "no Connect REST server here",
    "group.id": "a Kafka Connect worker setting (the workers' group); mirrorflow's readers name their own groups",
    "plugin.discovery": "a Kafka Connect worker setting: there are no plugins to discover",
    "listeners": "a Kafka Connect worker setting: no Connect REST server here",
    "name": "a connector's name: a flow is named SOURCE->TARGET",
    "connector.class": "a connector's class: a flow runs all three MM2 concerns (copy, checkpoints, heartbeats)",
    "source.cluster.alias": "a connector's source alias: the flow's name SOURCE->TARGET says it",
    "target.cluster.alias": "a connector's target alias: the flow's name SOURCE->TARGET says it",
    "offset.flush.interval.ms": "a Kafka Connect worker setting: progress is committed with each transaction "
    "(its value becomes transaction.boundary.interval.ms when transaction.boundary=interval sets none)",
    "offset.flush.timeout.ms": "a Kafka Connect worker setting: progress is committed inside each copy "
    "transaction, there is no separate offset flush to wait for",
    "offset.storage.partitions": "a Kafka Connect worker setting: progress lives in the flow's state topics "
    "(state.topic.partitions)",
    "status.storage.partitions": "a Kafka Connect worker setting: runs are logged in the flow's state topics",
    "offset.storage.file.filename": "a standalone Kafka Connect worker setting: progress lives in the flow's "
    "state topics on the target",
    "plugin.path": "a Kafka Connect worker setting: there are no plugins to load",
    "rest.advertised.host.name": "a Kafka Connect worker setting: no Connect REST server here",
    "rest.advertised.port": "a Kafka Connect worker setting: no Connect REST server here",
    "rest.advertised.listener": "a Kafka Connect worker setting: no Connect REST server here",
    "connect.protocol": "a Kafka Connect worker setting: no Connect workers to rebalance; Airflow schedules the runs",
    "scheduled.rebalance.max.delay.ms": "a Kafka Connect worker setting: no Connect workers to rebalance; "
    "Airflow schedules the runs",
    "task.shutdown.graceful.timeout.ms": "a Kafka Connect worker setting: a stopped run's copy job ends with it, "
    "its open transaction fenced by the next run",
}
# Kafka Connect's exactly-once settings (KIP-618): their value decides mirrorflow's exactly.once.
EXACTLY_ONCE_VALUES: dict[str, dict[str, bool]] = {
    "exactly.once.source.support": {"enabled": True, "preparing": False, "disabled": False},
    "exactly.once.support": {"required": True, "requested": True},
}
# MM2 properties imported under mirrorflow's name for the same thing.
RENAMED: dict[str, tuple[str, str]] = {
    "offset-syncs.topic.replication.factor": (
        "state.topic.replication.factor",
        "mirrorflow's exact offset map, kept in the flow's state topics, replaces offset syncs",
    ),
}
IGNORED_PREFIXES = (
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "admin.override.",
    "connector.client.config.override.policy",
    "metric.reporters",
    "source.cluster.",
    "target.cluster.",
)

DEPRECATED = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
    "topics.whitelist": "topics",
    "groups.whitelist": "groups",
}

POLICY_NAMES = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": "DefaultReplicationPolicy",
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": "IdentityReplicationPolicy",
    "io.strimzi.kafka.connect.mirror.IdentityReplicationPolicy": "IdentityReplicationPolicy",
}

JAAS_RE = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;]+))""")
LOGIN_MODULES = {"PlainLoginModule": "PLAIN", "ScramLoginModule": None, "OAuthBearerLoginModule": "OAUTHBEARER"}


@dataclass
class Imported:
    """The result of an import: the config document plus what the user must know about it."""

    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    flows: dict[str, dict[str, Any]] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)  # VAR -> what to put in it
    notes: list[str] = field(default_factory=list)
    # flow -> the takeover's options for where this MM2 deployment keeps its offsets (none: dedicated defaults)
    takeover: dict[str, dict[str, str]] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"clusters": self.clusters}
        if self.defaults:
            doc["defaults"] = self.defaults
        doc["flows"] = self.flows
        return doc

    def takeover_steps(self) -> str:
        """How to move each flow from the running MM2 to mirrorflow without copying a record twice
        (ops.takeover), as comment lines of the imported file."""
        flows = [name for name, f in self.flows.items() if f.get("enabled", True) is not False]
        if not flows:
            return ""
        lines = [
            "Taking over from the running MirrorMaker 2 (each partition continues right after the last",
            "record MM2 copied; its checkpoints stay the groups' floor):",
            "  1. stop MirrorMaker 2 (all its nodes); its heartbeats into the targets must stop",
        ]
        for name in flows:
            opts = "".join(f" --{k} {shlex.quote(v)}" for k, v in self.takeover.get(name, {}).items())
            lines.append(f"  2. mirrorflow takeover --flow '{name}'{opts} --dry-run, then again with --yes")
        lines += [
            "  3. mirrorflow replicate --flow FLOW --once (or unpause the flow's DAGs); mirrorflow status",
            "  (--mm2-offsets-topic: the offset.storage.topic MM2's Connect workers used; see docs/operations.md)",
        ]
        return "# " + "\n# ".join(lines) + "\n"

    def to_yaml(self, origin: str) -> str:
        out = io.StringIO()
        out.write(f"# mirrorflow configuration imported from {origin} by `mirrorflow config import`.\n")
        if self.env_vars:
            out.write("# Secrets are not copied: export these variables where mirrorflow runs:\n")
            for var, what in self.env_vars.items():
                out.write(f"#   {var}: {what}\n")
        if self.notes:
            out.write("# Notes:\n")
            for note in self.notes:
                out.write(f"#   - {note}\n")
        out.write(self.takeover_steps())
        yaml.safe_dump(self.document(), out, sort_keys=False, default_flow_style=False, allow_unicode=True)
        return out.getvalue()


def import_file(path: str | Path, connect_worker: str | Path | None = None) -> str:
    """The mirrorflow YAML for an mm2.properties, a Strimzi KafkaMirrorMaker2 or MM2 connector configs;
    `connect_worker`: the Connect worker's properties the connectors ran on (its offset.storage.topic)."""
    p = Path(path)
    text = _read(p)
    worker = parse_properties(_read(Path(connect_worker))) if connect_worker else None
    return convert(text, str(p), worker).to_yaml(p.name)


def _read(p: Path) -> str:
    try:
        return p.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {exc.filename}: {exc.strerror}", source=str(p)) from None


def convert(text: str, source: str = "<input>", worker: dict[str, str] | None = None) -> Imported:
    """Detect the format (Strimzi YAML with `kind: KafkaMirrorMaker2`, JSON connector configs, connector
    properties with `connector.class`, else an mm2.properties) and convert."""
    if text.lstrip().startswith(("{", "[")):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"malformed JSON: {exc}", source=source) from None
        return from_connectors(doc if isinstance(doc, list) else [doc], source, worker)
    if re.search(r"^\s*kind:\s*KafkaMirrorMaker2\s*$", text, re.M):
        try:
            docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind") == "KafkaMirrorMaker2"]
        except yaml.YAMLError as exc:
            raise ConfigError(f"malformed YAML: {getattr(exc, 'problem', None) or exc}", source=source) from None
        if len(docs) != 1:
            raise ConfigError(f"expected one KafkaMirrorMaker2 resource, found {len(docs)}", source=source)
        return from_strimzi(docs[0], source)
    props = parse_properties(text)
    if "connector.class" in props and "clusters" not in props:
        return from_connectors([props], source, worker)
    return from_properties(props, source)


# -- mm2.properties -----------------------------------------------------------------------------
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


def from_properties(props: dict[str, str], source: str = "mm2.properties") -> Imported:
    imp = Imported()
    aliases = [a.strip() for a in props.get("clusters", "").split(",") if a.strip()]
    if not aliases:
        raise ConfigError(
            [("clusters", "missing: an mm2.properties lists its cluster aliases in `clusters`")], source=source
        )
    cluster_settings: dict[str, dict[str, str]] = {a: {} for a in aliases}
    cluster_clients: dict[str, dict[str, dict[str, str]]] = {
        a: {"producer": {}, "consumer": {}, "admin": {}} for a in aliases
    }
    flow_props: dict[tuple[str, str], dict[str, str]] = {}
    top: dict[str, str] = {}
    # longest alias first, so alias `A` does not claim `AB.bootstrap.servers`
    by_length = sorted(aliases, key=len, reverse=True)
    for key, value in props.items():
        if key == "clusters":
            continue
        m = re.match(r"^([A-Za-z0-9_.-]+?)->([A-Za-z0-9_.-]+?)\.(.+)$", key)
        if m and m.group(1) in aliases and m.group(2) in aliases:
            flow_props.setdefault((m.group(1), m.group(2)), {})[m.group(3)] = value
            continue
        alias = next((a for a in by_length if key.startswith(a + ".")), None)
        if alias is not None:
            rest = key[len(alias) + 1 :]
            kind = rest.split(".", 1)[0]
            if kind in ("producer", "consumer", "admin") and "." in rest:
                cluster_clients[alias][kind][rest.split(".", 1)[1]] = value
            elif rest in FLOW_PROPERTIES or rest in DEPRECATED or rest in IGNORED or rest in REFUSED:
                imp.notes.append(f"{key}: a per-cluster MM2 property; set it on the flows instead (not imported)")
            else:
                cluster_settings[alias][rest] = value
            continue
        top[key] = value

    # MM2 applies top-level client settings (security.protocol, ssl.*, ...) to every cluster.
    shared = {k: v for k, v in top.items() if _is_client_setting(k, v)}
    for alias in aliases:
        imp.clusters[alias] = _client_settings(imp, alias, {**shared, **cluster_settings[alias]}, f"{alias}.")
    imp.defaults = _flow_settings(imp, {k: v for k, v in top.items() if k not in shared}, "")
    for (src, tgt), body in flow_props.items():
        settings = _flow_settings(imp, body, f"{src}->{tgt}.")
        enabled = str(body.get("enabled", "false")).strip().lower() == "true"
        settings["enabled"] = enabled  # dedicated mode: a pair runs only with `A->B.enabled = true`
        settings = {"enabled": settings.pop("enabled"), **settings}
        for kind, target_side in (("producer", tgt), ("consumer", src), ("admin", tgt)):
            for k, v in cluster_clients[target_side][kind].items():
                settings.setdefault(f"{kind}.{k}", _secret_ref(imp, f"{target_side}.{kind}.{k}", k, v))
        imp.flows[f"{src}->{tgt}"] = settings
        # the herder A->B is a Connect worker on B; a top-level offset.storage.* wins over B's
        # (MirrorMakerConfig.workerConfig puts it after the cluster's properties)
        offsets = props.get("offset.storage.topic") or props.get(f"{tgt}.offset.storage.topic")
        if offsets:
            imp.takeover[f"{src}->{tgt}"] = {"mm2-offsets-topic": offsets.strip()}
    if not any(f.get("enabled") for f in imp.flows.values()):
        imp.notes.append("no `A->B.enabled = true` line: no flow is enabled (MM2 dedicated mode runs none either)")
    return imp


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


def _flow_settings(imp: Imported, body: dict[str, str], prefix: str) -> dict[str, Any]:
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
            refused = _refused_value(key, value)
            if refused:
                imp.notes.append(f"{full}: not imported ({refused})")
            else:
                out[key] = _typed(key, value)
        elif key.startswith(OVERRIDE_PREFIXES):
            held = override_problem(key)  # e.g. a setting mirrorflow must hold itself
            if held:
                imp.notes.append(f"{full}: not imported ({held})")
            else:
                out[key] = _secret_ref(imp, full, key, value)
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
        out["transaction.boundary.interval.ms"] = _typed("transaction.boundary.interval.ms", flush)
        imp.notes.append(
            f"{prefix}transaction.boundary.interval.ms: unset, so MM2 uses offset.flush.interval.ms ({flush.strip()})"
        )
    return out


def _refused_value(key: str, value: Any) -> str | None:
    """Why a value mirrorflow refuses on purpose (such as `refresh.groups.enabled=false`) is not
    imported; None otherwise. Other invalid values are kept so `config validate` names them."""
    try:
        FLOW_PROPERTIES[key].parse(value)
    except ValueError as exc:
        return str(exc) if "is not supported" in str(exc) else None
    return None


def _typed(key: str, value: Any) -> Any:
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


# -- Java client settings -> librdkafka -------------------------------------------------------------
def _client_settings(imp: Imported, alias: str, java: dict[str, Any], where: str) -> dict[str, str]:
    """librdkafka settings for a cluster from Java client settings; secrets become ${env:...}."""
    out: dict[str, str] = {}
    for key, value in java.items():
        value = "" if value is None else str(value)
        full = where + key
        if key == "sasl.jaas.config":
            out.update(_jaas(imp, alias, value, java.get("sasl.mechanism"), full))
        elif key in (
            "ssl.truststore.location",
            "ssl.truststore.password",
            "ssl.truststore.type",
            "ssl.keystore.location",
            "ssl.keystore.password",
            "ssl.keystore.type",
        ):
            if key == "ssl.truststore.location" and str(java.get("ssl.truststore.type", "")).upper() == "PEM":
                out["ssl.ca.location"] = value
            elif key == "ssl.keystore.location" and str(java.get("ssl.keystore.type", "")).upper() == "PKCS12":
                out["ssl.keystore.location"] = value  # librdkafka reads PKCS#12 key stores
                if "ssl.keystore.password" in java:
                    out["ssl.keystore.password"] = _env(
                        imp, alias, "SSL_KEYSTORE_PASSWORD", f"the key store password ({where}ssl.keystore.password)"
                    )
            elif key.endswith(".location"):
                what = (
                    "ssl.ca.location (CA certificate)"
                    if "truststore" in key
                    else "ssl.certificate.location and ssl.key.location"
                )
                imp.notes.append(
                    f"{full}: Java key stores are not supported by librdkafka; convert {value} to "
                    f"PEM and set {what} (not imported)"
                )
        elif key == "ssl.key.password":
            out[key] = _env(imp, alias, "SSL_KEY_PASSWORD", f"the private key password ({full})")
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value.lower() if value else "none"
        elif key in ("sasl.login.callback.handler.class", "sasl.client.callback.handler.class", "sasl.login.class"):
            imp.notes.append(f"{full}: a Java class; librdkafka needs its own mechanism settings (not imported)")
        elif key in ("sasl.mechanism",):
            out[key] = value
        else:
            problem = librdkafka_problem(key, value)
            if problem:
                imp.notes.append(f"{full}: not imported ({problem})")
            elif _looks_secret(key):
                out[key] = _env(imp, alias, re.sub(r"[^A-Za-z0-9]+", "_", key).upper(), f"the value of {full}")
            else:
                out[key] = value
    if "bootstrap.servers" in out:  # bootstrap first: easier to read
        out = {"bootstrap.servers": out.pop("bootstrap.servers"), **out}
    return out


def _jaas(imp: Imported, alias: str, jaas: str, mechanism: Any, where: str) -> dict[str, str]:
    module = next((m for m in LOGIN_MODULES if m in jaas), None)
    opts = {m.group(1): next(g for g in m.groups()[1:] if g is not None) for m in JAAS_RE.finditer(jaas)}
    if module in ("PlainLoginModule", "ScramLoginModule") and "username" in opts:
        out = {
            "sasl.username": opts["username"],
            "sasl.password": _env(imp, alias, "SASL_PASSWORD", f"the SASL password of {opts['username']!r} ({where})"),
        }
        if not mechanism:
            out["sasl.mechanism"] = "PLAIN" if module == "PlainLoginModule" else "SCRAM-SHA-512"
        return out
    if module == "OAuthBearerLoginModule":
        imp.notes.append(
            f"{where}: OAUTHBEARER login: configure librdkafka's sasl.oauthbearer.* settings (not imported)"
        )
        return {}
    imp.notes.append(f"{where}: a JAAS configuration mirrorflow cannot translate (not imported)")
    return {}


def _env(imp: Imported, alias: str, what: str, description: str) -> str:
    var = "MM2_" + re.sub(r"[^A-Za-z0-9]+", "_", alias).upper().strip("_") + "_" + what
    imp.env_vars[var] = description
    return "${env:" + var + "}"


def _secret_ref(imp: Imported, full: str, key: str, value: str) -> str:
    if _looks_secret(key):
        var = "MM2_" + re.sub(r"[^A-Za-z0-9]+", "_", full).upper().strip("_")
        imp.env_vars[var] = f"the value of {full}"
        return "${env:" + var + "}"
    return value


def _looks_secret(key: str) -> bool:
    return bool(SECRET_KEY_RE.search(key))


# -- Strimzi KafkaMirrorMaker2 ------------------------------------------------------------------------
def from_strimzi(resource: dict[str, Any], source: str = "KafkaMirrorMaker2") -> Imported:
    """spec.clusters + spec.mirrors[sourceCluster/targetCluster] (v1beta2), or spec.target +
    spec.mirrors[].source (v1): clusters with tls/authentication, connector configs, patterns."""
    imp = Imported()
    spec = resource.get("spec") or {}
    name = (resource.get("metadata") or {}).get("name", "?")
    clusters: dict[str, dict[str, Any]] = {}
    for c in spec.get("clusters") or []:
        clusters[str(c.get("alias"))] = c
    if isinstance(spec.get("target"), dict):
        clusters[str(spec["target"].get("alias"))] = spec["target"]
    mirrors = spec.get("mirrors") or []
    for m in mirrors:
        if isinstance(m.get("source"), dict):
            clusters.setdefault(str(m["source"].get("alias")), m["source"])
    if not clusters:
        raise ConfigError([("spec.clusters", f"KafkaMirrorMaker2 {name!r} names no clusters")], source=source)
    for alias, c in clusters.items():
        imp.clusters[alias] = _strimzi_cluster(imp, alias, c)
    for i, m in enumerate(mirrors):
        src = str(m.get("sourceCluster") or (m.get("source") or {}).get("alias"))
        tgt = str(m.get("targetCluster") or (spec.get("target") or {}).get("alias"))
        where = f"spec.mirrors[{i}]"
        body: dict[str, Any] = {"enabled": True}
        for connector in ("sourceConnector", "checkpointConnector", "heartbeatConnector"):
            conn = m.get(connector) or {}
            cfg = {
                str(k): ("" if v is None else str(v).lower() if isinstance(v, bool) else str(v))
                for k, v in (conn.get("config") or {}).items()
            }
            body.update(_flow_settings(imp, cfg, f"{where}.{connector}.config."))
            if connector == "sourceConnector" and conn.get("tasksMax") is not None:
                body["tasks.max"] = int(conn["tasksMax"])
            _import_connector_state(imp, body, connector, conn, f"{where}.{connector}")
        for field_, prop in (
            ("topicsPattern", "topics"),
            ("topicsExcludePattern", "topics.exclude"),
            ("excludedTopicsPattern", "topics.exclude"),
            ("groupsPattern", "groups"),
            ("groupsExcludePattern", "groups.exclude"),
            ("excludedGroupsPattern", "groups.exclude"),
            ("topicsBlacklistPattern", "topics.exclude"),
            ("groupsBlacklistPattern", "groups.exclude"),
        ):
            if m.get(field_) is not None:
                body[prop] = _typed(prop, str(m[field_]))
        if FLOW_NAME_RE.match(f"{src}->{tgt}") is None:
            raise ConfigError(
                [(where, f"cannot tell the source and target clusters ({src!r} -> {tgt!r})")], source=source
            )
        imp.flows[f"{src}->{tgt}"] = body
        # Strimzi runs the connectors on one Connect cluster (on connectCluster, v1: the target) whose
        # offsets topic is its config's offset.storage.topic, by default mirrormaker2-cluster-offsets
        connect = clusters.get(str(spec.get("connectCluster") or (spec.get("target") or {}).get("alias"))) or {}
        offsets = str((connect.get("config") or {}).get("offset.storage.topic") or STRIMZI_OFFSETS_TOPIC)
        imp.takeover[f"{src}->{tgt}"] = {"mm2-offsets-topic": offsets, "mm2-connector": strimzi_connector(src, tgt)}
    return imp


# -- MM2 connectors on a Kafka Connect cluster ---------------------------------------------------------
MIRROR_CONNECTORS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")
CONNECTOR_KEYS = ("name", "connector.class", "source.cluster.alias", "target.cluster.alias")
WORKER_OFFSETS = "OFFSET_STORAGE_TOPIC"  # the takeover's placeholder when the worker's config is not given


def from_connectors(docs: list[Any], source: str = "connectors", worker: dict[str, str] | None = None) -> Imported:
    """MM2 connector configs as a Kafka Connect cluster runs them (the DR guide's
    `{"name": ..., "config": {...}}`, a bare config with `name`, or a connector .properties): each
    `source.cluster.alias -> target.cluster.alias` pair is a flow, the `source.cluster.*` and
    `target.cluster.*` client settings its clusters. `worker`: the Connect worker's properties,
    whose offset.storage.topic holds the source connector's offsets (for the takeover)."""
    imp = Imported()
    for i, doc in enumerate(docs):
        where = f"connector {i + 1}"
        if not isinstance(doc, dict):
            raise ConfigError([(where, "expected a connector config (a JSON object)")], source=source)
        conf = {str(k): "" if v is None else str(v) for k, v in (doc.get("config") or doc).items()}
        name = str(doc.get("name") or conf.get("name") or "")
        kind = conf.get("connector.class", "").strip().rsplit(".", 1)[-1]
        if not name:
            raise ConfigError(
                [(where, "no `name`: the connector's name in Connect is needed (GET /connectors)")], source=source
            )
        if kind not in MIRROR_CONNECTORS:
            raise ConfigError(
                [
                    (
                        f"{name}.connector.class",
                        f"{conf.get('connector.class')!r} is not one of MM2's connectors "
                        f"({', '.join(MIRROR_CONNECTORS)})",
                    )
                ],
                source=source,
            )
        src = conf.get("source.cluster.alias", "source").strip()  # MirrorConnectorConfig's defaults
        tgt = conf.get("target.cluster.alias", "target").strip()
        flow = f"{src}->{tgt}"
        if FLOW_NAME_RE.match(flow) is None:
            raise ConfigError(
                [(name, f"cannot tell the source and target clusters ({src!r} -> {tgt!r})")], source=source
            )
        for alias, prefix in ((src, "source.cluster."), (tgt, "target.cluster.")):
            java = {k[len(prefix) :]: v for k, v in conf.items() if k.startswith(prefix) and k not in CONNECTOR_KEYS}
            if java:
                settings = _client_settings(imp, alias, java, f"{name}.{prefix}")
                imp.clusters[alias] = {**settings, **imp.clusters.get(alias, {})}  # the first connector's win
        body = {
            k: v
            for k, v in conf.items()
            if k not in CONNECTOR_KEYS and not k.startswith(("source.cluster.", "target.cluster."))
        }
        offsets = body.pop("offsets.storage.topic", None)  # KIP-618: the connector's own offsets topic
        tasks = body.pop("tasks.max", None) if kind != "MirrorSourceConnector" else None
        if tasks is not None:
            imp.notes.append(
                f"{name}.tasks.max: not imported (one checkpoint or heartbeat pass per flow per run; "
                "tasks.max bounds the copy only)"
            )
        settings = imp.flows.setdefault(flow, {"enabled": True})
        settings.update(_flow_settings(imp, body, f"{name}."))
        if kind == "MirrorSourceConnector":
            if flow in imp.takeover:
                raise ConfigError(
                    [
                        (
                            name,
                            f"a second MirrorSourceConnector for {flow} "
                            f"({imp.takeover[flow]['mm2-connector']!r} is the first)",
                        )
                    ],
                    source=source,
                )
            topic = offsets or (worker or {}).get("offset.storage.topic") or WORKER_OFFSETS
            imp.takeover[flow] = {"mm2-offsets-topic": topic.strip(), "mm2-connector": name}
            if topic == WORKER_OFFSETS:
                imp.notes.append(
                    f"{name}: its offsets are in the offset.storage.topic of the Connect workers that ran it: put "
                    f"that name for {WORKER_OFFSETS} in the takeover command below (or import again with "
                    "--connect-worker connect-distributed.properties)"
                )
    for alias in [a for f in imp.flows for a in f.split("->")]:
        imp.clusters.setdefault(alias, {})
    missing = [a for a, c in imp.clusters.items() if not c.get("bootstrap.servers")]
    if missing:
        imp.notes.append(
            f"clusters {', '.join(missing)}: no source.cluster./target.cluster.bootstrap.servers in the connector "
            "configs: set bootstrap.servers yourself"
        )
    if worker:
        for k in EXACTLY_ONCE_VALUES:  # the workers' exactly-once setting is every flow's
            if k in worker:
                imp.defaults.update(_flow_settings(imp, {k: worker[k]}, "connect worker: "))
    return imp


# What `config import` does with each KafkaMirrorMaker2 field (docs/mm2-compatibility.md is generated
# from this): (verdict, what mirrorflow does). Fields marked "different" are left out with a note.
STRIMZI_FIELDS: dict[str, tuple[str, str]] = {
    "spec.clusters[].alias": ("same", "the cluster's alias under `clusters`"),
    "spec.clusters[].bootstrapServers": ("mapped", "clusters.<alias>.bootstrap.servers"),
    "spec.clusters[].tls.trustedCertificates": (
        "mapped",
        "security.protocol SSL/SASL_SSL and ssl.ca.location (mount the Secret's certificate at the noted path)",
    ),
    "spec.clusters[].authentication": (
        "mapped",
        "tls: ssl.certificate.location + ssl.key.location; scram-sha-256/512, plain: sasl.mechanism, "
        "sasl.username and sasl.password as ${env:...} (the Secret's value is never copied); "
        "oauth: sasl.mechanism OAUTHBEARER, the token settings left to you",
    ),
    "spec.clusters[].config": (
        "mapped",
        "librdkafka client settings of the cluster; Kafka Connect worker settings (group.id, *.storage.*) "
        "are left out with a note",
    ),
    "spec.connectCluster": ("different", "no Kafka Connect cluster: state lives on each flow's target"),
    "spec.replicas": ("different", "no Connect workers: Airflow schedules the runs, Spark runs the copy"),
    "spec.version": ("different", "mirrorflow's own release; any Kafka with transactions (0.11+) works"),
    "spec.mirrors[].sourceCluster": ("mapped", "the flow SOURCE->TARGET"),
    "spec.mirrors[].targetCluster": ("mapped", "the flow SOURCE->TARGET"),
    "spec.mirrors[].topicsPattern": ("mapped", "topics"),
    "spec.mirrors[].groupsPattern": ("mapped", "groups"),
    "spec.mirrors[].topicsExcludePattern": ("mapped", "topics.exclude"),
    "spec.mirrors[].groupsExcludePattern": ("mapped", "groups.exclude"),
    "spec.mirrors[].sourceConnector.config": ("mapped", "the flow's properties (as in an mm2.properties)"),
    "spec.mirrors[].checkpointConnector.config": ("mapped", "the flow's properties (as in an mm2.properties)"),
    "spec.mirrors[].heartbeatConnector.config": ("mapped", "the flow's properties (as in an mm2.properties)"),
    "spec.mirrors[].sourceConnector.tasksMax": ("mapped", "tasks.max (copy units per wave)"),
    "spec.mirrors[].checkpointConnector.tasksMax": (
        "different",
        "one checkpoint pass per flow per DAG run; tasks.max bounds the copy only",
    ),
    "spec.mirrors[].*Connector.state": (
        "mapped",
        "sourceConnector: the flow's `state` (running/paused/stopped); checkpoint/heartbeat connector: "
        "noted (they stop only with the whole flow)",
    ),
    "spec.mirrors[].*Connector.pause": ("mapped", "deprecated: `pause: true` is the state paused"),
    "spec.mirrors[].*Connector.autoRestart*": (
        "different",
        "autoRestart (enabled, maxRestarts): Airflow retries failed tasks (retries in the DAGs) and the next "
        "scheduled run continues; there is no restart count",
    ),
    "spec.resources": ("different", "Airflow worker and Spark executor resources (spark.conf) instead"),
    "spec.logging": ("different", "Airflow task logs and Python logging"),
    "spec.readinessProbe": ("different", "no long-running server: `mirrorflow status` and the DAG states"),
    "spec.livenessProbe": ("different", "no long-running server: `mirrorflow status` and the DAG states"),
    "spec.jvmOptions": ("different", "no JVM of mirrorflow's own (Spark's: spark.conf)"),
    "spec.image": ("different", "mirrorflow is a Python package in the Airflow image"),
    "spec.rack": ("different", "librdkafka's client.rack in clusters.<alias> (fetch from the closest replica)"),
    "spec.template": ("different", "Kubernetes pod templates belong to the Airflow deployment"),
    "spec.tracing": ("different", "Airflow's OpenTelemetry integration"),
    "metadata.annotations[strimzi.io/restart-connector]": (
        "different",
        "nothing to restart: trigger the DAG, or `mirrorflow replicate --once`",
    ),
    "metadata.annotations[strimzi.io/restart-connector-task]": (
        "different",
        "nothing to restart: a failed copy unit is retried by the next run from its committed progress",
    ),
}


STRENGTH = ("running", "paused", "stopped")


def _import_connector_state(
    imp: Imported, body: dict[str, Any], connector: str, conn: dict[str, Any], where: str
) -> None:
    """Strimzi's connector `state` (or the deprecated `pause: true`) -> the flow property `state`.

    The source connector's state is the flow's (paused: no copy or topic sync; stopped: nothing);
    a stopped checkpoint or heartbeat connector cannot stop just that part of a flow, so it is
    noted, never silently dropped."""
    state = str(conn.get("state") or ("paused" if conn.get("pause") in (True, "true") else "")).strip().lower()
    if not state or state == "running":
        return
    if state not in STRENGTH:
        raise ConfigError([(f"{where}.state", f"expected running, paused or stopped, got {state!r}")])
    if connector == "sourceConnector":
        body["state"] = state
        imp.notes.append(f"{where}.state: {state}, imported as the flow's state (see `mirrorflow flow list`)")
    else:
        imp.notes.append(
            f"{where}.state: {state} is not imported: a flow's checkpoints and heartbeats stop only with the "
            "whole flow (state: stopped)"
        )


def _strimzi_cluster(imp: Imported, alias: str, c: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {"bootstrap.servers": str(c.get("bootstrapServers", ""))}
    tls = c.get("tls")
    auth = c.get("authentication") or {}
    atype = str(auth.get("type", "")).lower()
    sasl = atype in ("scram-sha-256", "scram-sha-512", "plain", "oauth")
    if sasl:
        out["security.protocol"] = "SASL_SSL" if tls is not None else "SASL_PLAINTEXT"
    elif tls is not None:
        out["security.protocol"] = "SSL"
    for cert in (tls or {}).get("trustedCertificates") or []:
        # librdkafka's ssl.ca.location takes a file or a directory (for a `pattern` of certificates)
        path = f"/etc/mirrorflow/certs/{cert.get('secretName')}" + (
            f"/{cert['certificate']}" if cert.get("certificate") else ""
        )
        out["ssl.ca.location"] = path
        imp.notes.append(
            f"clusters.{alias}.ssl.ca.location: mount the CA certificate from Secret "
            f"{cert.get('secretName')!r} at {path} (or change the path)"
        )
        break
    if atype in ("scram-sha-256", "scram-sha-512", "plain"):
        out["sasl.mechanism"] = atype.upper() if atype != "plain" else "PLAIN"
        out["sasl.username"] = str(auth.get("username", ""))
        secret = auth.get("passwordSecret") or {}
        out["sasl.password"] = _env(
            imp, alias, "SASL_PASSWORD", f"key {secret.get('password')!r} of Secret {secret.get('secretName')!r}"
        )
    elif atype == "tls":
        ck = auth.get("certificateAndKey") or {}
        base = f"/etc/mirrorflow/certs/{ck.get('secretName')}"
        out["ssl.certificate.location"] = f"{base}/{ck.get('certificate')}"
        out["ssl.key.location"] = f"{base}/{ck.get('key')}"
        imp.notes.append(
            f"clusters.{alias}: mount the client certificate and key from Secret {ck.get('secretName')!r} at {base}/"
        )
    elif atype == "oauth":
        imp.notes.append(
            f"clusters.{alias}: OAuth authentication: configure librdkafka's sasl.oauthbearer.* settings (not imported)"
        )
        out["sasl.mechanism"] = "OAUTHBEARER"
    for k, v in (c.get("config") or {}).items():
        k = str(k)
        if k in EXACTLY_ONCE_VALUES:  # the Connect cluster's exactly-once setting: every flow's
            imp.defaults.update(_flow_settings(imp, {k: str(v)}, f"clusters.{alias}.config."))
            continue
        if k in IGNORED or k.startswith(IGNORED_PREFIXES):
            imp.notes.append(f"clusters.{alias}.config.{k}: not imported ({IGNORED.get(k) or 'no equivalent'})")
            continue
        problem = librdkafka_problem(k, str(v))
        if problem:
            imp.notes.append(f"clusters.{alias}.config.{k}: not imported ({problem})")
        else:
            out[k] = str(v)
    return out
