"""A schema registry's Confluent REST API over HTTP: what the source is read through, and what both
writers use for the target's subjects, versions, ids and compatibility.

Built from a cluster's registry settings (`config.registry_settings`): `schema.registry.url` (several,
comma-separated: the first that answers), basic auth as Confluent's clients take it
(`basic.auth.credentials.source` USER_INFO with `basic.auth.user.info`, or URL with `user:password@` in
the URL), a CA file for TLS. Every failure is a `RegistryError` naming the cluster's registry and the
request (method and path), never a credential: an unreachable registry, a refused credential (401/403), an
answer that is not JSON.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from mirrorflow.config import ClusterConfig
from mirrorflow.errors import ConfigError, MirrorflowError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
DEFAULT_TIMEOUT_S = 30.0
# A registry may close a connection it accepted before answering (seen on Apicurio's Vert.x server under
# load: "Remote end closed connection without response", the request never reached its access log). A
# request whose repetition changes nothing more is sent again after these pauses; a POST never is.
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE"})
DROPPED_RETRY_PAUSES_S = (0.2, 1.0)


class RegistryError(MirrorflowError):
    """A schema registry could not be used, or refused a request: names the registry (alias and URL
    without credentials), the request, and the subject and id concerned when there is one."""

    def __init__(self, where: str, message: str, status: int | None = None):
        self.where, self.detail, self.status = where, message, status
        super().__init__(f"{where}: {message}")


class NotFound(RegistryError):
    """404: the subject, version, id or setting does not exist (Confluent's error_code in `code`)."""

    def __init__(self, where: str, message: str, code: int | None = None):
        super().__init__(where, message, 404)
        self.code = code


@dataclass(frozen=True)
class Endpoint:
    """One registry: its base URLs (credentials taken out), the Authorization header, TLS, a timeout."""

    alias: str
    urls: tuple[str, ...]
    auth: str | None  # the Authorization header's value: never logged, never in an error
    ca_file: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def name(self) -> str:
        return f"{self.alias}'s schema registry ({self.urls[0]})"

    @classmethod
    def of(cls, cluster: ClusterConfig) -> Endpoint | None:
        """The cluster's registry, None when it has none. ConfigError for settings that cannot work."""
        conf = cluster.registry_config()
        raw = conf.get("schema.registry.url", "").strip()
        if not raw:
            return None
        where = f"clusters.{cluster.alias}"
        source = (
            conf.get("basic.auth.credentials.source") or conf.get("schema.registry.basic.auth.credentials.source") or ""
        ).upper()
        info = conf.get("basic.auth.user.info") or conf.get("schema.registry.basic.auth.user.info")
        urls, url_info = [], None
        for u in raw.split(","):
            parts = urlsplit(u.strip())
            if parts.username is not None:
                url_info = f"{parts.username}:{parts.password or ''}"
            host = parts.hostname or ""
            netloc = f"{host}:{parts.port}" if parts.port else host
            urls.append(urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", "")))
        if source == "URL":
            info = url_info
            if not info:
                raise ConfigError(
                    [(f"{where}.basic.auth.credentials.source", "URL, but schema.registry.url holds no user:password@")]
                )
        elif source in ("", "USER_INFO") and url_info and not info:
            info = url_info
        if source == "USER_INFO" and not info:
            raise ConfigError(
                [(f"{where}.basic.auth.user.info", "missing (basic.auth.credentials.source is USER_INFO)")]
            )
        auth = "Basic " + base64.b64encode(info.encode()).decode() if info else None
        timeout = float(conf.get("schema.registry.request.timeout.ms", DEFAULT_TIMEOUT_S * 1000)) / 1000.0
        return cls(cluster.alias, tuple(urls), auth, conf.get("schema.registry.ssl.ca.location") or None, timeout)


class RegistryClient:
    """JSON requests to one registry's Confluent API (`get`, `post`, `put`), and raw requests to other
    paths of the same server (`request`: Apicurio's native API beside its Confluent one)."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self._context = ssl.create_default_context(cafile=endpoint.ca_file) if endpoint.ca_file else None
        self.base = endpoint.urls[0]

    @property
    def name(self) -> str:
        return self.endpoint.name

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params=params)

    def post(self, path: str, body: Any, **params: Any) -> Any:
        return self.call("POST", path, body, params=params)

    def put(self, path: str, body: Any, **params: Any) -> Any:
        return self.call("PUT", path, body, params=params)

    def call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        """One JSON request to the Confluent API; the answer's JSON (None when empty)."""
        data = None if body is None else json.dumps(body).encode()
        raw = self.request(method, path, data, CONTENT_TYPE, params=params)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise RegistryError(self.name, f"{method} {path}: the answer is not JSON: {raw[:200]!r}") from None

    def request(
        self,
        method: str,
        path: str,
        data: bytes | None = None,
        content_type: str = CONTENT_TYPE,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        root: str | None = None,
    ) -> bytes:
        """One request to `path` under the Confluent API's base URL (or under `root`, another base URL
        of the same server); each of the registry's URLs in turn while none answers."""
        query = "&".join(
            f"{k}={quote(str(v).lower() if isinstance(v, bool) else str(v))}" for k, v in (params or {}).items()
        )
        last: Exception | None = None
        for base in [root] if root else self.endpoint.urls:
            url = base + path + (f"?{query}" if query else "")
            req = urllib.request.Request(url, data=data, method=method)
            req.add_header("Accept", "application/json")
            if data is not None:
                req.add_header("Content-Type", content_type)
            if self.endpoint.auth:
                req.add_header("Authorization", self.endpoint.auth)
            for k, v in (headers or {}).items():
                req.add_header(k, v)
            pauses = DROPPED_RETRY_PAUSES_S if method in IDEMPOTENT else ()
            for attempt in range(len(pauses) + 1):
                try:
                    with urllib.request.urlopen(req, timeout=self.endpoint.timeout_s, context=self._context) as resp:
                        return resp.read()
                except urllib.error.HTTPError as exc:
                    raise self._refused(method, path, exc) from None
                except (urllib.error.URLError, OSError) as exc:
                    last = exc
                    if attempt < len(pauses) and _dropped(exc):
                        time.sleep(pauses[attempt])
                        continue
                    break
        reason = getattr(last, "reason", last)
        raise RegistryError(self.name, f"unreachable ({method} {path}: {reason})")

    def _refused(self, method: str, path: str, exc: urllib.error.HTTPError) -> RegistryError:
        try:
            body = exc.read().decode(errors="replace")
        except OSError:
            body = ""
        message, code = body[:300], None
        try:
            d = json.loads(body)
            message = str(d.get("message") or d.get("detail") or d.get("title") or message)
            code = d.get("error_code")
        except (ValueError, AttributeError):
            pass
        if exc.code in (401, 403):
            who = "refused our credential" if exc.code == 401 else "refused the request (not authorized)"
            hint = "" if self.endpoint.auth else " (no basic.auth.user.info is configured)"
            return RegistryError(self.name, f"{who}{hint}: HTTP {exc.code} on {method} {path}", exc.code)
        if exc.code == 404:
            return NotFound(self.name, f"{method} {path}: {message}", code)
        return RegistryError(self.name, f"{method} {path}: HTTP {exc.code}: {message}", exc.code)


def client_for(cluster: ClusterConfig) -> RegistryClient | None:
    """The cluster's registry client, None when its config names no registry."""
    endpoint = Endpoint.of(cluster)
    return RegistryClient(endpoint) if endpoint else None


def quote_subject(subject: str) -> str:
    return quote(subject, safe="")


def _dropped(exc: BaseException) -> bool:
    """The server took the connection and closed it without an answer (not: refused, timed out)."""
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))
