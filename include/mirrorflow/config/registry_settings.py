"""A cluster's schema registry in the config: `schema.registry.url` beside its client settings, with the
registry client's settings spelled as Confluent's clients spell them.

    clusters:
      A:
        bootstrap.servers: a-kafka:9092
        schema.registry.url: https://registry.a.example:8081
        basic.auth.credentials.source: USER_INFO
        basic.auth.user.info: ${env:A_REGISTRY_USER_INFO}     # user:password

These keys are not librdkafka settings: the loader takes them out of the cluster's client settings
(`ClusterConfig.registry`), so no Kafka client ever sees them. `basic.auth.user.info` is a secret: write it
as a `${env:...}` reference (or let the cluster's Airflow connection carry it); it is resolved only when the
registry client is built and never logged.
"""

from __future__ import annotations

URL = "schema.registry.url"
# name -> what it is (for the config's error messages)
KEYS = {
    URL: "the registry's Confluent-compatible API (comma-separated: the first that answers)",
    "basic.auth.credentials.source": "USER_INFO (basic.auth.user.info) or URL (user:password@ in the URL)",
    "basic.auth.user.info": "user:password for HTTP basic authentication (a secret: use ${env:...})",
    "schema.registry.basic.auth.credentials.source": "the same, as Java serializers spell it",
    "schema.registry.basic.auth.user.info": "the same, as Java serializers spell it",
    "schema.registry.ssl.ca.location": "a PEM file of the CA that signed the registry's certificate",
    "schema.registry.request.timeout.ms": "how long one request to the registry may take (default 30000)",
}
SOURCES = ("USER_INFO", "URL")
SECRET_KEYS = ("basic.auth.user.info", "schema.registry.basic.auth.user.info")


def is_registry_key(key: str) -> bool:
    return key in KEYS or key.startswith("schema.registry.") or key.startswith("basic.auth.")


def problem(key: str, value: str) -> str | None:
    """Why a registry setting is refused (None: it is fine). Values holding ${env:...} are not checked."""
    if key not in KEYS:
        return f"unknown schema registry setting (known: {', '.join(KEYS)})"
    if "${env:" in value:
        return None
    if key.endswith("basic.auth.credentials.source") and value.upper() not in SOURCES:
        return f"expected one of {', '.join(SOURCES)}, got {value!r}"
    if key == URL and not all(u.strip().startswith(("http://", "https://")) for u in value.split(",")):
        return f"expected http(s)://HOST:PORT[/path], got {value!r}"
    if key.endswith("basic.auth.user.info") and ":" not in value:
        return "expected user:password"
    return None
