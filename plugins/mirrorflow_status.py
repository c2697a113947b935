"""Airflow plugin: the mirrorflow status page (Browse > Mirrorflow) inside the Airflow UI.

Thin: the config comes through MirrorflowHook, the page's contents from mirrorflow.ops.status_page
(the target clusters' state topics, cached a few seconds so a refresh storm reads Kafka once) and
its HTML from mirrorflow.ops.status_html. Every route requires an Airflow login (Depends(get_user):
the UI's JWT cookie or a bearer token); plugin routes are public otherwise.
"""

from __future__ import annotations

from airflow.api_fastapi.core_api.security import get_user
from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse

from mirrorflow.ops.status_page import PageCache

CACHE_S = 5.0
KINDS = ("replicate", "sync", "checkpoint", "verify", "backfill", "failover", "failback", "reseed")

app = FastAPI(title="mirrorflow status")
cache = PageCache(CACHE_S)


def _config():
    from mirrorflow_airflow.hooks import MirrorflowHook

    return MirrorflowHook().get_conn()


def _pages():
    return cache.get(_config())


def dag_links(flow_name: str) -> list[tuple[str, str]]:
    """The flow's DAGs in Airflow's UI (the page is in an iframe: links open at the top)."""
    base = conf.get("api", "base_url", fallback="").rstrip("/")
    flow_id = flow_name.replace("->", "-")
    return [(kind, f"{base}/dags/mirrorflow_{kind}__{flow_id}") for kind in KINDS]


@app.get("/api/flows", dependencies=[Depends(get_user)])
def flows() -> list[dict]:
    return [p.status.to_dict() for p in _pages()]


@app.get("/", response_class=HTMLResponse, dependencies=[Depends(get_user)])
def index(fragment: bool = False) -> str:
    from mirrorflow.ops import status_html

    pages = _pages()
    return status_html.render_flows(pages, dag_links) if fragment else status_html.render_page(pages, dag_links)


class MirrorflowStatusPlugin(AirflowPlugin):
    name = "mirrorflow_status"
    fastapi_apps = [{"app": app, "url_prefix": "/mirrorflow", "name": "mirrorflow status"}]
    external_views = [
        {
            "name": "Mirrorflow",
            "href": "mirrorflow/",
            "url_route": "mirrorflow",
            "destination": "nav",
            "category": "browse",
        }
    ]
