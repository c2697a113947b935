"""The configuration model: clusters, flows and Spark settings, as the rest of mirrorflow sees them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirrorflow.config.overrides import Kind, Side
from mirrorflow.config.overrides import scoped as scoped_overrides
from mirrorflow.config.properties import FLOW_PROPERTIES, did_you_mean
from mirrorflow.config.registry_settings import is_registry_key
from mirrorflow.config.secrets import connection_settings, redact, resolve_env
from mirrorflow.errors import ConfigError

FLOW_NAME_RE = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*->\s*([A-Za-z0-9_.-]+)\s*$")


@dataclass(frozen=True)
class ClusterConfig:
    """A Kafka cluster by alias. `client` holds librdkafka settings as written in the file."""

    alias: str
    client: dict[str, str]
    airflow_conn_id: str | None = None
    registry: dict[str, str] = field(default_factory=dict)  # its schema registry (config.registry_settings)

    @property
    def bootstrap_servers(self) -> str:
        return self.client.get("bootstrap.servers", "")

    def client_config(self) -> dict[str, str]:
        """librdkafka settings with secrets resolved. Never log the result: use `redacted()`."""
        conf: dict[str, str] = {}
        if self.airflow_conn_id:  # a connection's extra may name the registry too: not for Kafka clients
            conf.update(
                {
                    k: v
                    for k, v in connection_settings(self.alias, self.airflow_conn_id).items()
                    if not is_registry_key(k)
                }
            )
        for key, value in self.client.items():
            conf[key] = resolve_env(value, f"clusters.{self.alias}.{key}")
        return conf

    def redacted(self) -> dict[str, str]:
        return redact(self.client)

    def registry_config(self) -> dict[str, str]:
        """The schema registry's settings with secrets resolved ({} without a registry): the cluster's
        Airflow connection's registry keys (its extra), then the config's. Never log the result."""
        conf: dict[str, str] = {}
        if self.airflow_conn_id:
            conf.update(
                {k: v for k, v in connection_settings(self.alias, self.airflow_conn_id).items() if is_registry_key(k)}
            )
        conf.update({k: resolve_env(v, f"clusters.{self.alias}.{k}") for k, v in self.registry.items()})
        return conf


@dataclass(frozen=True)
class FlowConfig:
    """One replication flow source -> target with its effective properties."""

    source: str
    target: str
    props: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def id(self) -> str:
        """A name usable in topic names, transactional ids and DAG ids."""
        return f"{self.source}-{self.target}"

    @property
    def namespace(self) -> str:
        """`state.namespace`: the deployment's prefix in every state name ('' when unset)."""
        return str(self.props.get("state.namespace") or "")

    @property
    def state_name(self) -> str:
        """The flow in state topic names (`mirrorflow.<state_name>.progress.internal`):
        `<namespace>.<id>` under a state.namespace, else `<id>` (the names before namespaces)."""
        return f"{self.namespace}.{self.id}" if self.namespace else self.id

    @property
    def client_name(self) -> str:
        """The flow in transactional ids and consumer group names (`mirrorflow-<client_name>-...`):
        `<namespace>-<id>` under a state.namespace, else `<id>`."""
        return f"{self.namespace}-{self.id}" if self.namespace else self.id

    @property
    def deployment(self) -> str:
        """Who runs this flow, as recorded in its lease: `deployment.id`, else the namespace ('' when
        neither is set: a deployment that does not say who it is)."""
        return str(self.props.get("deployment.id") or "") or self.namespace

    def __getitem__(self, key: str) -> Any:
        return self.props[key]

    def client_overrides(self, side: Side, kind: Kind) -> dict[str, str]:
        """The librdkafka settings this flow overrides for clients of `kind` on the `side` cluster
        (scoping rules: config/overrides.py), `${env:...}` resolved. Never log the result."""
        # MM2 properties that merely start like a client prefix (admin.timeout.ms) are flow
        # settings, not client settings.
        props = {k: v for k, v in self.props.items() if k not in FLOW_PROPERTIES}
        return {
            name: resolve_env(value, f"flows.{self.name}.{key}")
            for name, (value, key) in scoped_overrides(props, side, kind).items()
        }

    # The properties used everywhere, as attributes.
    enabled = property(lambda self: self.props["enabled"])
    exactly_once = property(lambda self: self.props["exactly.once"])
    parallelism = property(lambda self: self.props["tasks.max"])
    replication_factor = property(lambda self: self.props["replication.factor"])


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    remote: str | None = None  # sc://host:port of a running Spark Connect server: the `connect` copy mode


@dataclass(frozen=True)
class Config:
    path: Path | None
    clusters: dict[str, ClusterConfig]
    flows: dict[str, FlowConfig]
    spark: SparkConfig = field(default_factory=SparkConfig)

    def cluster(self, alias: str) -> ClusterConfig:
        if alias not in self.clusters:
            raise ConfigError(
                [("clusters", f"unknown cluster alias {alias!r}{did_you_mean(alias, self.clusters)}")],
                source=str(self.path) if self.path else None,
            )
        return self.clusters[alias]

    def flow(self, name: str) -> FlowConfig:
        m = FLOW_NAME_RE.match(name or "")
        key = f"{m.group(1)}->{m.group(2)}" if m else name
        by_id = {f.id: k for k, f in self.flows.items()}
        if key not in self.flows and key in by_id:  # `A-B`, as in DAG ids
            key = by_id[key]
        if key not in self.flows:
            raise ConfigError(
                [
                    (
                        "flows",
                        f"unknown flow {name!r}{did_you_mean(key, self.flows)}"
                        + ("" if self.flows else " (no flows are configured)"),
                    )
                ],
                source=str(self.path) if self.path else None,
            )
        return self.flows[key]
