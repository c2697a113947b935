"""Secrets in the config: `${env:VAR}` references, Airflow connections, and redaction for logs.

Secret values never sit in the config file: they are `${env:VAR}` references (Kafka's
EnvVarConfigProvider syntax) or come from a named connection (`airflow.conn.id`). Connections are
resolved by a *connection provider* found through the `mirrorflow.connection_providers` entry
point, so the core imports nothing of Airflow: `mirrorflow_airflow` registers the one that reads
Airflow connections. Values are resolved only when a client is built, never logged.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from mirrorflow.errors import ConfigError

ENV_REF_RE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
SECRET_KEY_RE = re.compile(r"(password|secret|jaas|token|key\.pem|\.key$|credentials|user\.info)", re.I)
PROVIDER_GROUP = "mirrorflow.connection_providers"

# A provider maps a connection id to librdkafka settings; it raises LookupError when it has none.
ConnectionProvider = Callable[[str], dict[str, str]]


def redact(conf: dict[str, Any]) -> dict[str, Any]:
    """A copy of a client config fit for logs: secret-looking values replaced by '***'."""
    return {k: ("***" if SECRET_KEY_RE.search(k) else v) for k, v in conf.items()}


def resolve_env(value: Any, where: str) -> str:
    """`value` with every `${env:VAR}` replaced; a missing variable names the config key `where`."""
    value = str(value)

    def sub(m: re.Match[str]) -> str:
        var = m.group(1)
        if var not in os.environ:
            raise ConfigError([(where, f"environment variable {var} is not set")])
        return os.environ[var]

    return ENV_REF_RE.sub(sub, value)


@functools.lru_cache(maxsize=1)
def connection_providers() -> tuple[tuple[str, ConnectionProvider], ...]:
    """The installed connection providers (entry point group `mirrorflow.connection_providers`)."""
    return tuple((ep.name, ep.load()) for ep in entry_points(group=PROVIDER_GROUP))


def connection_settings(alias: str, conn_id: str) -> dict[str, str]:
    """librdkafka settings of the named connection, from the first provider that knows it."""
    where = f"clusters.{alias}.airflow.conn.id"
    providers = connection_providers()
    if not providers:
        raise ConfigError(
            [
                (
                    where,
                    f"connection {conn_id!r} cannot be resolved: no connection provider is "
                    "installed (install mirrorflow with its Airflow adapters)",
                )
            ]
        )
    reasons = []
    for name, provider in providers:
        try:
            return {k: str(v) for k, v in provider(conn_id).items()}
        except LookupError as exc:
            reasons.append(f"{name}: {exc}")
    raise ConfigError([(where, f"connection {conn_id!r} not found ({'; '.join(reasons)})")])
