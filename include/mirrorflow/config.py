"""The mirrorflow configuration: clusters, flows and their MirrorMaker 2 properties.

One YAML file (see include/config/mirrorflow.yaml) holds:

    clusters:            alias -> librdkafka client settings (+ `airflow.conn.id`)
    defaults:            MM2 properties applied to every flow (MM2's top-level properties)
    flows:               "A->B" -> MM2 properties for that flow (MM2's `A->B.` prefix)
    spark:               master and submit settings for the copy job

Property names are MirrorMaker 2's wherever one exists (`topics`, `groups.exclude`,
`replication.policy.separator`, `sync.group.offsets.enabled`, `tasks.max`, ...); mirrorflow's own
additions are listed in FLOW_PROPERTIES with `mm2=False`. Secret values are written as
`${env:VAR}` (Kafka's EnvVarConfigProvider syntax) or come from an Airflow Kafka connection, and
are resolved only when a client is built.
"""
from __future__ import annotations

import dataclasses
import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from .errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG_PATH = ROOT / "include" / "config" / "mirrorflow.yaml"

FLOW_NAME_RE = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*->\s*([A-Za-z0-9_.-]+)\s*$")
ENV_REF_RE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise ValueError(f"expected true or false, got {v!r}")


def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError(f"expected an integer, got {v!r}")
    try:
        return int(str(v).strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {v!r}") from None


def _list(v: Any) -> list[str]:
    """MM2 LIST type: comma separated, items trimmed; a YAML list is accepted too."""
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [str(x).strip() for x in v if str(x).strip()]
    return [x.strip() for x in str(v).split(",") if x.strip()]


def _str(v: Any) -> str:
    return "" if v is None else str(v).strip()


@dataclass(frozen=True)
class Prop:
    default: Any
    parse: Callable[[Any], Any]
    mm2: bool = True  # False: a mirrorflow extension without an MM2 equivalent
    doc: str = ""


DEFAULT_CONFIG_EXCLUDE = [
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
]

# Every property a flow (or `defaults`) may set. Unknown keys are an error with a "did you mean".
FLOW_PROPERTIES: dict[str, Prop] = {
    "enabled": Prop(True, _bool),
    "topics": Prop([".*"], _list),
    "topics.exclude": Prop([r".*[\-\.]internal", r".*\.replica", "__.*"], _list),
    "groups": Prop([".*"], _list),
    "groups.exclude": Prop(["console-consumer-.*", "connect-.*", "__.*"], _list),
    "config.properties.exclude": Prop(DEFAULT_CONFIG_EXCLUDE, _list),
    "use.defaults.from": Prop("target", _str),
    "replication.policy.class": Prop("DefaultReplicationPolicy", _str),
    "replication.policy.separator": Prop(".", _str),
    "replication.policy.internal.topic.separator.enabled": Prop(True, _bool),
    # -1: the target broker's default.replication.factor (KIP-464); MM2's default is 2.
    "replication.factor": Prop(-1, _int),
    "heartbeats.replication.enabled": Prop(True, _bool),
    "refresh.topics.enabled": Prop(True, _bool),
    "refresh.topics.interval.seconds": Prop(600, _int),
    "sync.topic.configs.enabled": Prop(True, _bool),
    "sync.topic.configs.interval.seconds": Prop(600, _int),
    "sync.topic.acls.enabled": Prop(True, _bool),
    "sync.topic.acls.interval.seconds": Prop(600, _int),
    "refresh.groups.enabled": Prop(True, _bool),
    "refresh.groups.interval.seconds": Prop(600, _int),
    "emit.checkpoints.enabled": Prop(True, _bool),
    "emit.checkpoints.interval.seconds": Prop(60, _int),
    "sync.group.offsets.enabled": Prop(False, _bool),
    "sync.group.offsets.interval.seconds": Prop(60, _int),
    "emit.heartbeats.enabled": Prop(True, _bool),
    "emit.heartbeats.interval.seconds": Prop(1, _int),
    "admin.timeout.ms": Prop(60000, _int),
    "consumer.poll.timeout.ms": Prop(1000, _int),
    "tasks.max": Prop(4, _int, doc="parallelism: at most this many copy units per wave"),
    # mirrorflow's own properties
    "exactly.once": Prop(True, _bool, mm2=False, doc="transactional copy (false: idempotent, at-least-once)"),
    "initial.position": Prop("earliest", _str, mm2=False,
                             doc="earliest | latest | a timestamp (ms since epoch or ISO-8601)"),
    "schedule": Prop("*/5 * * * *", _str, mm2=False, doc="cron for the replicate DAG"),
    "unit.max.records": Prop(5_000_000, _int, mm2=False),
    "unit.max.bytes": Prop(2 * 1024**3, _int, mm2=False),
    "transaction.max.records": Prop(20_000, _int, mm2=False),
    "transaction.max.bytes": Prop(32 * 1024**2, _int, mm2=False),
    "state.topic.partitions": Prop(16, _int, mm2=False),
    "state.topic.replication.factor": Prop(-1, _int, mm2=False),
}

# Client overrides, MM2 style: `producer.acks`, `consumer.fetch.max.bytes`, `admin.*`.
CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")


@dataclass(frozen=True)
class ClusterConfig:
    """A Kafka cluster by alias. `client` holds librdkafka settings as written in the file."""

    alias: str
    client: dict[str, str]
    airflow_conn_id: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        return self.client.get("bootstrap.servers", "")

    def client_config(self) -> dict[str, str]:
        """librdkafka settings with secrets resolved. Never log the result: use `redacted()`."""
        conf: dict[str, str] = {}
        if self.airflow_conn_id:
            conf.update(_airflow_connection_extra(self.alias, self.airflow_conn_id))
        for key, value in self.client.items():
            conf[key] = _resolve_env(self.alias, key, value)
        return conf

    def redacted(self) -> dict[str, str]:
        return redact(self.client)


SECRET_KEY_RE = re.compile(r"(password|secret|jaas|token|key\.pem|\.key$|credentials)", re.I)


def redact(conf: dict[str, Any]) -> dict[str, Any]:
    """A copy of a client config fit for logs: secret-looking values replaced by '***'."""
    return {k: ("***" if SECRET_KEY_RE.search(k) else v) for k, v in conf.items()}


def _resolve_env(alias: str, key: str, value: Any) -> str:
    value = str(value)

    def sub(m: re.Match[str]) -> str:
        var = m.group(1)
        if var not in os.environ:
            raise ConfigError([(f"clusters.{alias}.{key}", f"environment variable {var} is not set")])
        return os.environ[var]

    return ENV_REF_RE.sub(sub, value)


def _airflow_connection_extra(alias: str, conn_id: str) -> dict[str, str]:
    """librdkafka settings from an Airflow connection of the Kafka provider's type."""
    try:
        from airflow.sdk import BaseHook  # imported lazily: the core runs without Airflow
    except ImportError as exc:  # pragma: no cover - Airflow is in requirements.txt
        raise ConfigError([(f"clusters.{alias}.airflow.conn.id", f"Airflow is not installed ({exc})")])
    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:  # noqa: BLE001 - Airflow raises its own not-found types
        raise ConfigError([(f"clusters.{alias}.airflow.conn.id",
                            f"Airflow connection {conn_id!r} not found ({type(exc).__name__})")])
    return {k: str(v) for k, v in (conn.extra_dejson or {}).items()}


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

    def __getitem__(self, key: str) -> Any:
        return self.props[key]

    def client_overrides(self, kind: str) -> dict[str, str]:
        """`producer.*` / `consumer.*` / `admin.*` overrides with the prefix removed."""
        prefix = f"{kind}."
        return {k[len(prefix):]: str(v) for k, v in self.props.items() if k.startswith(prefix)}

    # The properties used everywhere, as attributes.
    enabled = property(lambda self: self.props["enabled"])
    exactly_once = property(lambda self: self.props["exactly.once"])
    parallelism = property(lambda self: self.props["tasks.max"])
    replication_factor = property(lambda self: self.props["replication.factor"])


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    path: Path | None
    clusters: dict[str, ClusterConfig]
    flows: dict[str, FlowConfig]
    spark: SparkConfig = field(default_factory=SparkConfig)

    def cluster(self, alias: str) -> ClusterConfig:
        if alias not in self.clusters:
            raise ConfigError([("clusters", f"unknown cluster alias {alias!r}{did_you_mean(alias, self.clusters)}")],
                              source=str(self.path) if self.path else None)
        return self.clusters[alias]

    def flow(self, name: str) -> FlowConfig:
        m = FLOW_NAME_RE.match(name or "")
        key = f"{m.group(1)}->{m.group(2)}" if m else name
        if key not in self.flows:
            raise ConfigError([("flows", f"unknown flow {name!r}{did_you_mean(key, self.flows)}"
                                + ("" if self.flows else " (no flows are configured)"))],
                              source=str(self.path) if self.path else None)
        return self.flows[key]


def did_you_mean(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--config PATH, else $MIRRORFLOW_CONFIG, else include/config/mirrorflow.yaml."""
    if explicit:
        return Path(explicit)
    if os.environ.get("MIRRORFLOW_CONFIG"):
        return Path(os.environ["MIRRORFLOW_CONFIG"])
    return DEFAULT_CONFIG_PATH


def load(path: str | os.PathLike[str] | None = None) -> Config:
    """Read and validate the config file; raises ConfigError listing every problem."""
    p = config_path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror}", source=str(p)) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"malformed YAML{where}: {problem}", source=str(p)) from None
    return parse(raw, source=str(p), path=p)


def parse(raw: Any, source: str | None = None, path: Path | None = None) -> Config:
    problems: list[tuple[str, str]] = []
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("the top level must be a mapping with clusters and flows", source=source)
    for key in raw:
        if key not in ("clusters", "defaults", "flows", "spark"):
            problems.append((str(key), "unknown top-level key" + did_you_mean(str(key), ["clusters", "defaults", "flows", "spark"])))

    clusters: dict[str, ClusterConfig] = {}
    for alias, body in (raw.get("clusters") or {}).items():
        alias = str(alias)
        if not re.fullmatch(r"[A-Za-z0-9_-]+", alias):
            problems.append((f"clusters.{alias}", "an alias may hold only letters, digits, '_' and '-'"))
        body = body or {}
        if not isinstance(body, dict):
            problems.append((f"clusters.{alias}", "must be a mapping of client settings"))
            continue
        conn_id = body.get("airflow.conn.id")
        client = {str(k): str(v) for k, v in body.items() if k != "airflow.conn.id"}
        if not client.get("bootstrap.servers") and not conn_id:
            problems.append((f"clusters.{alias}.bootstrap.servers", "missing (or set airflow.conn.id)"))
        clusters[alias] = ClusterConfig(alias, client, str(conn_id) if conn_id else None)

    defaults = raw.get("defaults") or {}
    if not isinstance(defaults, dict):
        problems.append(("defaults", "must be a mapping of flow properties"))
        defaults = {}
    flows: dict[str, FlowConfig] = {}
    for name, body in (raw.get("flows") or {}).items():
        m = FLOW_NAME_RE.match(str(name))
        if not m:
            problems.append((f"flows.{name}", "a flow is named SOURCE->TARGET"))
            continue
        src, tgt = m.group(1), m.group(2)
        fkey = f"flows.{src}->{tgt}"
        if body is not None and not isinstance(body, dict):
            problems.append((fkey, "must be a mapping of flow properties"))
            continue
        props, flow_problems = _flow_props({**defaults, **(body or {})}, fkey, defaults)
        problems += flow_problems
        for alias in (src, tgt):
            if alias not in clusters:
                problems.append((fkey, f"unknown cluster alias {alias!r}{did_you_mean(alias, clusters)}"))
        if src == tgt:
            problems.append((fkey, "a flow cannot replicate a cluster into itself"))
        flows[f"{src}->{tgt}"] = FlowConfig(src, tgt, props)

    spark_raw = raw.get("spark") or {}
    spark = SparkConfig(master=str(spark_raw.get("master", "local[*]")),
                        conf={str(k): str(v) for k, v in (spark_raw.get("conf") or {}).items()})
    cfg = Config(path=path, clusters=clusters, flows=flows, spark=spark)
    problems += _cross_checks(cfg)
    if problems:
        raise ConfigError(problems, source=source)
    return cfg


def _flow_props(body: dict[str, Any], where: str, defaults: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    props: dict[str, Any] = {k: (list(p.default) if isinstance(p.default, list) else p.default)
                             for k, p in FLOW_PROPERTIES.items()}
    for key, value in body.items():
        key = str(key)
        origin = "defaults" if key in defaults and where and body.get(key) is defaults.get(key) else where
        if key in FLOW_PROPERTIES:
            try:
                props[key] = FLOW_PROPERTIES[key].parse(value)
            except ValueError as exc:
                problems.append((f"{origin}.{key}", str(exc)))
        elif key.startswith(CLIENT_PREFIXES):
            props[key] = value
        else:
            problems.append((f"{origin}.{key}", "unknown property" + did_you_mean(key, FLOW_PROPERTIES)))
    for key in ("topics", "topics.exclude", "groups", "groups.exclude", "config.properties.exclude"):
        for pattern in props[key] if isinstance(props[key], list) else []:
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append((f"{where}.{key}", f"invalid regex {pattern!r}: {exc}"))
    return props, problems


def _cross_checks(cfg: Config) -> list[tuple[str, str]]:
    """Checks that need the whole file (policies and cycles); extended by the control plane."""
    return []


def replace_props(flow: FlowConfig, **changes: Any) -> FlowConfig:
    """A copy of `flow` with some properties changed (tests and the CLI use it)."""
    return dataclasses.replace(flow, props={**flow.props, **changes})
