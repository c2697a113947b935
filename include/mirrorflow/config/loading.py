"""Reading and validating the config file: every problem is reported at once, with its key."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from mirrorflow.config.client_settings import librdkafka_problem
from mirrorflow.config.model import FLOW_NAME_RE, ClusterConfig, Config, FlowConfig, SparkConfig
from mirrorflow.config.overrides import PREFIXES as CLIENT_PREFIXES
from mirrorflow.config.overrides import problem as override_problem
from mirrorflow.config.properties import FLOW_PROPERTIES, REFUSED, did_you_mean
from mirrorflow.config.registry_settings import URL, is_registry_key
from mirrorflow.config.registry_settings import problem as registry_problem
from mirrorflow.errors import ConfigError
from mirrorflow.mm2.filters import compile_list


def project_dir() -> Path:
    """The mirrorflow project folder: $MIRRORFLOW_HOME, else the checkout this package runs from
    (an editable install: the folder holding `include/mirrorflow`), else the working directory."""
    if os.environ.get("MIRRORFLOW_HOME"):
        return Path(os.environ["MIRRORFLOW_HOME"])
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "include" / "mirrorflow").is_dir():
        return checkout
    return Path.cwd()


def default_config_path() -> Path:
    return project_dir() / "include" / "config" / "mirrorflow.yaml"


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--config PATH, else $MIRRORFLOW_CONFIG, else include/config/mirrorflow.yaml of the project."""
    if explicit:
        return Path(explicit)
    if os.environ.get("MIRRORFLOW_CONFIG"):
        return Path(os.environ["MIRRORFLOW_CONFIG"])
    return default_config_path()


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


SECTIONS = ("clusters", "defaults", "flows", "spark")


def parse(raw: Any, source: str | None = None, path: Path | None = None) -> Config:
    """Validate a config document; raises ConfigError listing every problem (each once)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("the top level must be a mapping with clusters and flows", source=source)
    problems = [
        (str(key), "unknown top-level key" + did_you_mean(str(key), SECTIONS)) for key in raw if key not in SECTIONS
    ]
    for name in SECTIONS:
        if raw.get(name) is not None and not isinstance(raw[name], dict):
            problems.append((name, f"must be a mapping, got {type(raw[name]).__name__}"))
    section = {name: raw[name] if isinstance(raw.get(name), dict) else {} for name in SECTIONS}
    clusters, found = _clusters(section["clusters"])
    problems += found + _flow_props(section["defaults"], "defaults", section["defaults"])[1]
    flows, found = _flows(section["flows"], section["defaults"], clusters)
    problems += found
    spark, found = _spark(section["spark"])
    problems += found
    cfg = Config(path=path, clusters=clusters, flows=flows, spark=spark)
    problems += _cross_checks(cfg)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)), source=source)  # defaults' problems once
    return cfg


def _clusters(section: dict[str, Any]) -> tuple[dict[str, ClusterConfig], list[tuple[str, str]]]:
    """The clusters section: alias -> client settings, each checked against librdkafka."""
    problems: list[tuple[str, str]] = []
    clusters: dict[str, ClusterConfig] = {}
    for alias, body in section.items():
        alias = str(alias)
        if not re.fullmatch(r"[A-Za-z0-9_-]+", alias):
            problems.append((f"clusters.{alias}", "an alias may hold only letters, digits, '_' and '-'"))
        body = body or {}
        if not isinstance(body, dict):
            problems.append((f"clusters.{alias}", "must be a mapping of client settings"))
            continue
        conn_id = body.get("airflow.conn.id")
        client = {str(k): str(v) for k, v in body.items() if k != "airflow.conn.id" and not is_registry_key(str(k))}
        registry = {str(k): str(v) for k, v in body.items() if is_registry_key(str(k))}
        for key, value in registry.items():
            why = registry_problem(key, value)
            if why:
                problems.append((f"clusters.{alias}.{key}", why))
        if registry and URL not in registry:
            problems.append((f"clusters.{alias}.{URL}", "missing: the registry settings need the registry's URL"))
        for key, value in client.items():
            problem = librdkafka_problem(key, value)
            if problem:
                problems.append((f"clusters.{alias}.{key}", problem))
        if not client.get("bootstrap.servers") and not conn_id:
            problems.append((f"clusters.{alias}.bootstrap.servers", "missing (or set airflow.conn.id)"))
        clusters[alias] = ClusterConfig(alias, client, str(conn_id) if conn_id else None, registry)
    return clusters, problems


def _flows(
    section: dict[str, Any], defaults: dict[str, Any], clusters: dict[str, ClusterConfig]
) -> tuple[dict[str, FlowConfig], list[tuple[str, str]]]:
    """The flows section: SOURCE->TARGET -> the flow's effective properties."""
    problems: list[tuple[str, str]] = []
    flows: dict[str, FlowConfig] = {}
    for name, body in section.items():
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
    return flows, problems


def _spark(section: dict[str, Any]) -> tuple[SparkConfig, list[tuple[str, str]]]:
    """The spark section: master, Spark settings, the Spark Connect URL."""
    problems: list[tuple[str, str]] = []
    for key in section:
        if key not in ("master", "conf", "remote"):
            problems.append((f"spark.{key}", "unknown key" + did_you_mean(str(key), ["master", "conf", "remote"])))
    remote = section.get("remote")
    if remote is not None and not str(remote).startswith("sc://"):
        problems.append(("spark.remote", f"must be a Spark Connect URL sc://HOST:PORT, got {remote!r}"))
    spark_conf = section.get("conf") or {}
    if not isinstance(spark_conf, dict):
        problems.append(("spark.conf", f"must be a mapping of Spark settings, got {type(spark_conf).__name__}"))
        spark_conf = {}
    spark = SparkConfig(
        master=str(section.get("master", "local[*]")),
        conf={str(k): str(v) for k, v in spark_conf.items()},
        remote=str(remote) if remote else None,
    )
    return spark, problems


def _flow_props(
    body: dict[str, Any], where: str, defaults: dict[str, Any]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Effective properties of a flow: MM2 defaults, then `defaults`, then the flow's own `body`.

    Problems in `defaults` are reported once, under `defaults.KEY`, not again for every flow.
    """
    problems: list[tuple[str, str]] = []
    props: dict[str, Any] = {
        k: (list(p.default) if isinstance(p.default, list) else p.default) for k, p in FLOW_PROPERTIES.items()
    }
    own = body if where != "defaults" else {}
    for key, value in {**defaults, **own}.items():
        key = str(key)
        report = key in own or where == "defaults"
        origin = where if key in own else "defaults"
        if key in REFUSED:  # before the client prefixes: `consumer.poll.timeout.ms` is no client setting
            if report:
                problems.append((f"{origin}.{key}", f"not supported: {REFUSED[key]}"))
            continue
        if key in FLOW_PROPERTIES:
            try:
                props[key] = FLOW_PROPERTIES[key].parse(value)
            except ValueError as exc:
                if report:
                    problems.append((f"{origin}.{key}", str(exc)))
                continue
            if key in REGEX_LISTS and report:
                problems += [(f"{origin}.{key}", p) for p in _regex_list_problems(props[key])]
        elif key.startswith(CLIENT_PREFIXES):
            why = override_problem(key)
            if why and report:
                problems.append((f"{origin}.{key}", why))
            props[key] = value
        elif report:
            problems.append((f"{origin}.{key}", "unknown property" + did_you_mean(key, FLOW_PROPERTIES)))
    # per flow (defaults may set the interval for flows that choose `interval` themselves)
    if where != "defaults" and "transaction.boundary.interval.ms" in {**defaults, **own}:
        origin = where if "transaction.boundary.interval.ms" in own else "defaults"
        if props["transaction.boundary"] != "interval":
            problems.append(
                (
                    f"{origin}.transaction.boundary.interval.ms",
                    f"has no effect with transaction.boundary: {props['transaction.boundary']} "
                    "(set transaction.boundary: interval, or remove it)",
                )
            )
    return props, problems


REGEX_LISTS = ("topics", "topics.exclude", "groups", "groups.exclude", "config.properties.exclude")


def _regex_list_problems(patterns: list[str]) -> list[str]:
    """Each pattern compiled alone, then the list joined with `|` as MM2's filters use it: a flag
    like `(?i)` is fine alone but invalid inside the joined pattern, so it fails here, not at run time."""
    problems = []
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            problems.append(f"invalid regex {pattern!r}: {exc}")
    if not problems and len(patterns) > 1:
        try:
            compile_list(patterns)
        except re.error as exc:
            bad = next((p for p in patterns if p.startswith("(?") and re.match(r"\(\?[aiLmsux]+\)", p)), None)
            where = f" ({bad!r}: an inline flag applies only at the start of the whole list)" if bad else ""
            problems.append(f"the patterns cannot be combined into one regex: {exc}{where}")
    return problems


def _cross_checks(cfg: Config) -> list[tuple[str, str]]:
    """Checks that need the whole file: flow ids that collide; identity-policy flows on a cycle.

    IdentityReplicationPolicy keeps topic names, so a record that went A->B comes back B->A
    (and again, forever): MM2 can only tell a cycle from a prefixed name. One identity flow on a
    cycle is enough to loop, whatever the policy of the others.
    """
    problems: list[tuple[str, str]] = []
    by_id: dict[str, str] = {}
    for f in cfg.flows.values():  # the id names state topics, transactional ids and DAGs
        if f.id in by_id:
            problems.append(
                (
                    f"flows.{f.name}",
                    f"flows {by_id[f.id]} and {f.name} would share the id {f.id!r} (state "
                    "topics, transactional ids, DAG ids): rename a cluster alias",
                )
            )
        by_id.setdefault(f.id, f.name)
    enabled = [f for f in cfg.flows.values() if f.enabled]
    edges: dict[str, set[str]] = {}
    for f in enabled:
        edges.setdefault(f.source, set()).add(f.target)
    for f in enabled:
        if (
            "Identity" not in str(f.props.get("replication.policy.class", ""))
            and str(f.props.get("replication.policy.class")) != "identity"
        ):
            continue
        path = _path(edges, f.target, f.source)
        if path == [f.target, f.source] and (f.props.get("standby") or _standby(cfg, f.target, f.source)):
            continue  # a failover/failback pair: only one of them runs at a time (ops.dr.failback)
        if path:
            cycle = "->".join([f.source, *path])
            problems.append(
                (
                    f"flows.{f.name}.replication.policy.class",
                    f"IdentityReplicationPolicy on a cycle of flows ({cycle}): remote topics keep their "
                    "names, so records would be replicated back and forth forever; use "
                    "DefaultReplicationPolicy for flows on a cycle",
                )
            )
    return problems


def _standby(cfg: Config, source: str, target: str) -> bool:
    """Whether the flow source->target exists and is a `standby` flow (stopped until a failback)."""
    return any(f.source == source and f.target == target and f.props.get("standby") for f in cfg.flows.values())


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
