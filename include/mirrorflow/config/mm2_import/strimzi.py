"""A Strimzi `KafkaMirrorMaker2` resource: clusters with tls and authentication, the mirrors' connector
configs, patterns and states, and where its Connect cluster keeps the offsets (for the takeover).
What happens to each field is `names.STRIMZI_FIELDS`."""

from __future__ import annotations

from typing import Any

from mirrorflow.config.client_settings import librdkafka_problem
from mirrorflow.config.mm2_import.flow_settings import flow_settings, typed
from mirrorflow.config.mm2_import.names import EXACTLY_ONCE_VALUES, IGNORED, IGNORED_PREFIXES
from mirrorflow.config.mm2_import.result import Imported
from mirrorflow.config.model import FLOW_NAME_RE
from mirrorflow.errors import ConfigError
from mirrorflow.mm2.connect_offsets import STRIMZI_OFFSETS_TOPIC, strimzi_connector

# A mirror's pattern fields (v1beta2 and v1 names, and the deprecated ones) -> flow properties
PATTERN_FIELDS = (
    ("topicsPattern", "topics"),
    ("topicsExcludePattern", "topics.exclude"),
    ("excludedTopicsPattern", "topics.exclude"),
    ("groupsPattern", "groups"),
    ("groupsExcludePattern", "groups.exclude"),
    ("excludedGroupsPattern", "groups.exclude"),
    ("topicsBlacklistPattern", "topics.exclude"),
    ("groupsBlacklistPattern", "groups.exclude"),
)


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
        body = _mirror(imp, m, f"spec.mirrors[{i}]")
        if FLOW_NAME_RE.match(f"{src}->{tgt}") is None:
            why = f"cannot tell the source and target clusters ({src!r} -> {tgt!r})"
            raise ConfigError([(f"spec.mirrors[{i}]", why)], source=source)
        imp.flows[f"{src}->{tgt}"] = body
        # Strimzi runs the connectors on one Connect cluster (on connectCluster, v1: the target) whose
        # offsets topic is its config's offset.storage.topic, by default mirrormaker2-cluster-offsets
        connect = clusters.get(str(spec.get("connectCluster") or (spec.get("target") or {}).get("alias"))) or {}
        offsets = str((connect.get("config") or {}).get("offset.storage.topic") or STRIMZI_OFFSETS_TOPIC)
        imp.takeover[f"{src}->{tgt}"] = {"mm2-offsets-topic": offsets, "mm2-connector": strimzi_connector(src, tgt)}
    return imp


def _mirror(imp: Imported, m: dict[str, Any], where: str) -> dict[str, Any]:
    """A mirror's flow properties: its three connectors' configs and states, its patterns."""
    body: dict[str, Any] = {"enabled": True}
    for connector in ("sourceConnector", "checkpointConnector", "heartbeatConnector"):
        conn = m.get(connector) or {}
        cfg = {
            str(k): ("" if v is None else str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in (conn.get("config") or {}).items()
        }
        body.update(flow_settings(imp, cfg, f"{where}.{connector}.config."))
        if connector == "sourceConnector" and conn.get("tasksMax") is not None:
            body["tasks.max"] = int(conn["tasksMax"])
        _import_connector_state(imp, body, connector, conn, f"{where}.{connector}")
    for field_, prop in PATTERN_FIELDS:
        if m.get(field_) is not None:
            body[prop] = typed(prop, str(m[field_]))
    return body


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
        out["sasl.password"] = imp.env(
            alias, "SASL_PASSWORD", f"key {secret.get('password')!r} of Secret {secret.get('secretName')!r}"
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
            imp.defaults.update(flow_settings(imp, {k: str(v)}, f"clusters.{alias}.config."))
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
