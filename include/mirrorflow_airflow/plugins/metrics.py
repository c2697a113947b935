"""Airflow plugin: mirrorflow's metrics in the Prometheus text format, at /mirrorflow-metrics/metrics.

Thin: the names and values come from mirrorflow.observe.metrics (MM2's names, read from the targets).
A login is required (an Airflow API token: Prometheus' `authorization` with a bearer token) unless
Airflow's config says `[mirrorflow] metrics_public = True` (AIRFLOW__MIRRORFLOW__METRICS_PUBLIC),
for scrapers inside a trusted network. One scrape per few seconds reaches Kafka; the others get the
cached text, so a storm of scrapes does not hit the clusters.
"""

from __future__ import annotations

import threading
import time
from typing import Annotated

from airflow.api_fastapi.core_api.security import bearer_scheme, get_user
from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials

CACHE_S = 5.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

app = FastAPI(title="mirrorflow metrics")
_lock = threading.Lock()
_cache: dict[str, tuple[float, bytes]] = {}


def _text() -> bytes:
    from mirrorflow.observe import metrics
    from mirrorflow_airflow.hooks import MirrorflowHook

    with _lock:
        at, body = _cache.get("text", (0.0, b""))
        if time.monotonic() - at > CACHE_S:
            body = metrics.prometheus_text(metrics.collect(MirrorflowHook().get_conn()))
            _cache["text"] = (time.monotonic(), body)
        return body


async def _login_unless_public(
    request: Request, bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]
) -> None:
    if conf.getboolean("mirrorflow", "metrics_public", fallback=False):
        return
    await get_user(request, None, bearer)  # 401/403 as on every Airflow API route


@app.get("/metrics", dependencies=[Depends(_login_unless_public)])
def metrics_endpoint() -> Response:
    return Response(_text(), media_type=CONTENT_TYPE)


class MirrorflowMetricsPlugin(AirflowPlugin):
    name = "mirrorflow_metrics"
    fastapi_apps = [{"app": app, "url_prefix": "/mirrorflow-metrics", "name": "mirrorflow metrics"}]
