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

import difflib
import functools
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
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


def _positive_int(v: Any) -> int:
    n = _int(v)
    if n < 1:
        raise ValueError(f"expected a positive integer, got {v!r}")
    return n


def _replication_factor(v: Any) -> int:
    n = _int(v)
    if n != -1 and n < 1:
        raise ValueError(f"expected -1 (the target broker's default) or a positive integer, got {v!r}")
    return n


def _one_of(*choices: str) -> Callable[[Any], str]:
    def parse(v: Any) -> str:
        s = _str(v)
        if s not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {v!r}")
        return s
    return parse


def _separator(v: Any) -> str:
    """replication.policy.separator: taken literally (no trimming); it may not be empty."""
    s = "" if v is None else str(v)
    if s == "":
        raise ValueError("the separator may not be empty")
    return s


def _policy_class(v: Any) -> str:
    from .policy import POLICY_CLASSES

    s = _str(v)
    if s not in POLICY_CLASSES:
        raise ValueError(f"unknown replication policy {s!r} (use DefaultReplicationPolicy or IdentityReplicationPolicy)"
                         + did_you_mean(s, [k for k in POLICY_CLASSES if "." not in k]))
    return s


def _initial_position(v: Any) -> str:
    s = _str(v)
    if s in ("earliest", "latest") or s.isdigit():
        return s
    try:
        datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(f"expected earliest, latest, or a timestamp (ms since epoch or ISO-8601), got {v!r}") from None
    return s


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
    "use.defaults.from": Prop("target", _one_of("target", "source")),
    "replication.policy.class": Prop("DefaultReplicationPolicy", lambda v: _policy_class(v)),
    "replication.policy.separator": Prop(".", _separator),
    "replication.policy.internal.topic.separator.enabled": Prop(True, _bool),
    # -1: the target broker's default.replication.factor (KIP-464); MM2's default is 2.
    "replication.factor": Prop(-1, _replication_factor),
    "heartbeats.replication.enabled": Prop(True, _bool),
    "refresh.topics.enabled": Prop(True, _bool),
    "refresh.topics.interval.seconds": Prop(600, _positive_int),
    "sync.topic.configs.enabled": Prop(True, _bool),
    "sync.topic.configs.interval.seconds": Prop(600, _positive_int),
    "sync.topic.acls.enabled": Prop(True, _bool),
    "sync.topic.acls.interval.seconds": Prop(600, _positive_int),
    "refresh.groups.enabled": Prop(True, _bool),
    "refresh.groups.interval.seconds": Prop(600, _positive_int),
    "emit.checkpoints.enabled": Prop(True, _bool),
    "emit.checkpoints.interval.seconds": Prop(60, _positive_int),
    "sync.group.offsets.enabled": Prop(False, _bool),
    "sync.group.offsets.interval.seconds": Prop(60, _positive_int),
    "emit.heartbeats.enabled": Prop(True, _bool),
    "emit.heartbeats.interval.seconds": Prop(1, _positive_int),
    "admin.timeout.ms": Prop(60000, _positive_int),
    "consumer.poll.timeout.ms": Prop(1000, _int),
    "tasks.max": Prop(4, _positive_int, doc="parallelism: at most this many copy units per wave"),
    # mirrorflow's own properties
    "exactly.once": Prop(True, _bool, mm2=False, doc="transactional copy (false: idempotent, at-least-once)"),
    "initial.position": Prop("earliest", _initial_position, mm2=False,
                             doc="earliest | latest | a timestamp (ms since epoch or ISO-8601)"),
    "schedule": Prop("*/5 * * * *", _str, mm2=False, doc="cron for the replicate DAG"),
    "unit.max.records": Prop(5_000_000, _int, mm2=False),
    "unit.max.bytes": Prop(2 * 1024**3, _int, mm2=False),
    "transaction.max.records": Prop(20_000, _int, mm2=False),
    "transaction.max.bytes": Prop(32 * 1024**2, _int, mm2=False),
    "state.topic.partitions": Prop(16, _int, mm2=False),
    "state.topic.replication.factor": Prop(-1, _replication_factor, mm2=False),
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
        # MM2 properties that merely start like a client prefix (admin.timeout.ms,
        # consumer.poll.timeout.ms) are flow settings, not client settings.
        return {k[len(prefix):]: str(v) for k, v in self.props.items()
                if k.startswith(prefix) and k not in FLOW_PROPERTIES}

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
        by_id = {f.id: k for k, f in self.flows.items()}
        if key not in self.flows and key in by_id:  # `A-B`, as in DAG ids
            key = by_id[key]
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

    for section in ("clusters", "defaults", "flows", "spark"):
        if raw.get(section) is not None and not isinstance(raw[section], dict):
            problems.append((section, f"must be a mapping, got {type(raw[section]).__name__}"))
    section = lambda name: raw[name] if isinstance(raw.get(name), dict) else {}  # noqa: E731

    clusters: dict[str, ClusterConfig] = {}
    for alias, body in section("clusters").items():
        alias = str(alias)
        if not re.fullmatch(r"[A-Za-z0-9_-]+", alias):
            problems.append((f"clusters.{alias}", "an alias may hold only letters, digits, '_' and '-'"))
        body = body or {}
        if not isinstance(body, dict):
            problems.append((f"clusters.{alias}", "must be a mapping of client settings"))
            continue
        conn_id = body.get("airflow.conn.id")
        client = {str(k): str(v) for k, v in body.items() if k != "airflow.conn.id"}
        for key, value in client.items():
            problem = librdkafka_problem(key, value)
            if problem:
                problems.append((f"clusters.{alias}.{key}", problem))
        if not client.get("bootstrap.servers") and not conn_id:
            problems.append((f"clusters.{alias}.bootstrap.servers", "missing (or set airflow.conn.id)"))
        clusters[alias] = ClusterConfig(alias, client, str(conn_id) if conn_id else None)

    defaults = section("defaults")
    problems += _flow_props(defaults, "defaults", defaults)[1]
    flows: dict[str, FlowConfig] = {}
    for name, body in section("flows").items():
        m = FLOW_NAME_RE.match(str(name))
        if not m:
            problems.append((f"flows.{name}", "a flow is named SOURCE->TARGET"))
            continue
        src, tgt = m.group(1), m.group(2)
        fkey = f"flows.{src}->{tgt}"
        if body is not None and not isinstance(body, dict):
            problems.append((fkey, "must be a mapping of flow properties"))
            continue
        props, flow_problems = _flow_props(body or {}, fkey, defaults)
        problems += flow_problems
        for alias in (src, tgt):
            if alias not in clusters:
                problems.append((fkey, f"unknown cluster alias {alias!r}{did_you_mean(alias, clusters)}"))
        if src == tgt:
            problems.append((fkey, "a flow cannot replicate a cluster into itself"))
        flows[f"{src}->{tgt}"] = FlowConfig(src, tgt, props)

    spark_raw = section("spark")
    spark = SparkConfig(master=str(spark_raw.get("master", "local[*]")),
                        conf={str(k): str(v) for k, v in (spark_raw.get("conf") or {}).items()})
    cfg = Config(path=path, clusters=clusters, flows=flows, spark=spark)
    problems += _cross_checks(cfg)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)), source=source)  # defaults' problems once
    return cfg


def _flow_props(body: dict[str, Any], where: str, defaults: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Effective properties of a flow: MM2 defaults, then `defaults`, then the flow's own `body`.

    Problems in `defaults` are reported once, under `defaults.KEY`, not again for every flow.
    """
    problems: list[tuple[str, str]] = []
    props: dict[str, Any] = {k: (list(p.default) if isinstance(p.default, list) else p.default)
                             for k, p in FLOW_PROPERTIES.items()}
    own = body if where != "defaults" else {}
    for key, value in {**defaults, **own}.items():
        key = str(key)
        report = key in own or where == "defaults"
        origin = where if key in own else "defaults"
        if key in FLOW_PROPERTIES:
            try:
                props[key] = FLOW_PROPERTIES[key].parse(value)
            except ValueError as exc:
                if report:
                    problems.append((f"{origin}.{key}", str(exc)))
                continue
            if key in ("topics", "topics.exclude", "groups", "groups.exclude", "config.properties.exclude"):
                for pattern in props[key]:
                    try:
                        re.compile(pattern)
                    except re.error as exc:
                        if report:
                            problems.append((f"{origin}.{key}", f"invalid regex {pattern!r}: {exc}"))
        elif key.startswith(CLIENT_PREFIXES):
            props[key] = value
        elif report:
            problems.append((f"{origin}.{key}", "unknown property" + did_you_mean(key, FLOW_PROPERTIES)))
    return props, problems


def _cross_checks(cfg: Config) -> list[tuple[str, str]]:
    """Checks that need the whole file: identity-policy flows on a cycle of enabled flows.

    IdentityReplicationPolicy keeps topic names, so a record that went A->B comes back B->A
    (and again, forever): MM2 can only tell a cycle from a prefixed name. One identity flow on a
    cycle is enough to loop, whatever the policy of the others.
    """
    problems: list[tuple[str, str]] = []
    enabled = [f for f in cfg.flows.values() if f.enabled]
    edges: dict[str, set[str]] = {}
    for f in enabled:
        edges.setdefault(f.source, set()).add(f.target)
    for f in enabled:
        if "Identity" not in str(f.props.get("replication.policy.class", "")) and \
                str(f.props.get("replication.policy.class")) != "identity":
            continue
        path = _path(edges, f.target, f.source)
        if path:
            cycle = "->".join([f.source, *path])
            problems.append((f"flows.{f.name}.replication.policy.class",
                             f"IdentityReplicationPolicy on a cycle of flows ({cycle}): remote topics keep their "
                             "names, so records would be replicated back and forth forever; use "
                             "DefaultReplicationPolicy for flows on a cycle"))
    return problems


def _path(edges: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A path start -> ... -> goal through `edges` (breadth first), or None."""
    queue: list[list[str]] = [[start]]
    seen = {start}
    while queue:
        path = queue.pop(0)
        if path[-1] == goal:
            return path
        for nxt in sorted(edges.get(path[-1], ())):
            if nxt not in seen:
                seen.add(nxt)
                queue.append([*path, nxt])
    return None


JAVA_ONLY_HINTS = {
    "sasl.jaas.config": "a Java setting: use sasl.username and sasl.password (`mirrorflow config import` translates it)",
    "ssl.truststore.location": "a Java setting: use ssl.ca.location with a PEM file",
}


def librdkafka_problem(key: str, value: str = "") -> str | None:
    """Why librdkafka would refuse a client setting's name (None: it knows it). Values are not
    checked: they may be ${env:...} references, and checking must not touch any cluster."""
    return _librdkafka_problem(key)


@functools.lru_cache(maxsize=None)
def _librdkafka_problem(key: str) -> str | None:
    if key in JAVA_ONLY_HINTS:
        return JAVA_ONLY_HINTS[key]
    if key in ("bootstrap.servers", "plugin.library.paths"):  # known; and never load a plugin here
        return None
    try:
        from confluent_kafka import KafkaException, Producer
    except ImportError:  # pragma: no cover
        return None
    try:
        # no bootstrap.servers: the client connects nowhere; a dummy value: nothing is loaded
        Producer({key: "x", "log_level": 0})
    except KafkaException as exc:
        msg = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        if "No such configuration property" in msg:
            return "unknown client setting (not a librdkafka property)"
        if "Java" in msg:
            return f"a Java client setting librdkafka does not support: {msg.split(' See ')[0]}"
    except (TypeError, ValueError):
        return None
    return None
