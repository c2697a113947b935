"""MM2 connectors as a Kafka Connect cluster runs them (the DR guide's `{"name": ..., "config": {...}}`,
a bare config with `name`, or a connector `.properties`): each source -> target alias pair is a
flow, the connectors' `source.cluster.*` / `target.cluster.*` settings its clusters, and the
source connector's offsets topic and name what the takeover needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mirrorflow.config.mm2_import.flow_settings import flow_settings
from mirrorflow.config.mm2_import.java_clients import librdkafka_settings
from mirrorflow.config.mm2_import.names import EXACTLY_ONCE_VALUES
from mirrorflow.config.mm2_import.result import Imported
from mirrorflow.config.model import FLOW_NAME_RE
from mirrorflow.errors import ConfigError

MIRROR_CONNECTORS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")
CONNECTOR_KEYS = ("name", "connector.class", "source.cluster.alias", "target.cluster.alias")
WORKER_OFFSETS = "OFFSET_STORAGE_TOPIC"  # the takeover's placeholder when the worker's config is not given


@dataclass(frozen=True)
class Connector:
    """One MM2 connector as Connect runs it: its name there, its class, its settings and its flow's
    cluster aliases."""

    name: str
    kind: str  # MirrorSourceConnector | MirrorCheckpointConnector | MirrorHeartbeatConnector
    conf: dict[str, str]
    aliases: tuple[str, str]  # source, target


def from_connectors(docs: list[Any], source: str = "connectors", worker: dict[str, str] | None = None) -> Imported:
    """MM2 connector configs as a Kafka Connect cluster runs them (the DR guide's
    `{"name": ..., "config": {...}}`, a bare config with `name`, or a connector .properties): each
    `source.cluster.alias -> target.cluster.alias` pair is a flow, the `source.cluster.*` and
    `target.cluster.*` client settings its clusters. `worker`: the Connect worker's properties,
    whose offset.storage.topic holds the source connector's offsets (for the takeover)."""
    imp = Imported()
    for i, doc in enumerate(docs):
        connector = _connector(doc, f"connector {i + 1}", source)
        _import_clusters(imp, connector)
        _import_flow(imp, connector, source, worker)
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
                imp.defaults.update(flow_settings(imp, {k: worker[k]}, "connect worker: "))
    return imp


def _connector(doc: Any, where: str, source: str) -> Connector:
    """The connector of one config, refused unless it is named, one of MM2's and names its flow."""
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
        why = f"{conf.get('connector.class')!r} is not one of MM2's connectors ({', '.join(MIRROR_CONNECTORS)})"
        raise ConfigError([(f"{name}.connector.class", why)], source=source)
    src = conf.get("source.cluster.alias", "source").strip()  # MirrorConnectorConfig's defaults
    tgt = conf.get("target.cluster.alias", "target").strip()
    if FLOW_NAME_RE.match(f"{src}->{tgt}") is None:
        raise ConfigError([(name, f"cannot tell the source and target clusters ({src!r} -> {tgt!r})")], source=source)
    return Connector(name, kind, conf, (src, tgt))


def _import_clusters(imp: Imported, connector: Connector) -> None:
    """The connector's `source.cluster.*` / `target.cluster.*` client settings (the first connector's win)."""
    for alias, prefix in zip(connector.aliases, ("source.cluster.", "target.cluster."), strict=True):
        java = {
            k[len(prefix) :]: v for k, v in connector.conf.items() if k.startswith(prefix) and k not in CONNECTOR_KEYS
        }
        if java:
            settings = librdkafka_settings(imp, alias, java, f"{connector.name}.{prefix}")
            imp.clusters[alias] = {**settings, **imp.clusters.get(alias, {})}


def _import_flow(imp: Imported, connector: Connector, source: str, worker: dict[str, str] | None) -> None:
    """The connector's flow properties into its flow; a source connector's offsets for the takeover."""
    name, flow = connector.name, "->".join(connector.aliases)
    body = {
        k: v
        for k, v in connector.conf.items()
        if k not in CONNECTOR_KEYS and not k.startswith(("source.cluster.", "target.cluster."))
    }
    offsets = body.pop("offsets.storage.topic", None)  # KIP-618: the connector's own offsets topic
    tasks = body.pop("tasks.max", None) if connector.kind != "MirrorSourceConnector" else None
    if tasks is not None:
        imp.notes.append(
            f"{name}.tasks.max: not imported (one checkpoint or heartbeat pass per flow per run; "
            "tasks.max bounds the copy only)"
        )
    settings = imp.flows.setdefault(flow, {"enabled": True})
    settings.update(flow_settings(imp, body, f"{name}."))
    if connector.kind != "MirrorSourceConnector":
        return
    if flow in imp.takeover:
        first = imp.takeover[flow]["mm2-connector"]
        why = f"a second MirrorSourceConnector for {flow} ({first!r} is the first)"
        raise ConfigError([(name, why)], source=source)
    topic = offsets or (worker or {}).get("offset.storage.topic") or WORKER_OFFSETS
    imp.takeover[flow] = {"mm2-offsets-topic": topic.strip(), "mm2-connector": name}
    if topic == WORKER_OFFSETS:
        imp.notes.append(
            f"{name}: its offsets are in the offset.storage.topic of the Connect workers that ran it: put "
            f"that name for {WORKER_OFFSETS} in the takeover command below (or import again with "
            "--connect-worker connect-distributed.properties)"
        )
