"""Airflow plugin: the mirrorflow status page (each flow at a glance) inside the Airflow UI.

Thin: the config comes through MirrorflowHook, the numbers from mirrorflow.ops.status, which reads
the target clusters' state topics.
Both routes require an Airflow login (Depends(get_user)); plugin routes are public otherwise.
"""

from __future__ import annotations

import html

from airflow.api_fastapi.core_api.security import get_user
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse

app = FastAPI(title="mirrorflow status")


def _statuses():
    from mirrorflow.ops import status
    from mirrorflow_airflow.hooks import MirrorflowHook

    cfg = MirrorflowHook().get_conn()
    return [status.flow_status(cfg, f) for f in cfg.flows.values()]


@app.get("/api/flows", dependencies=[Depends(get_user)])
def flows() -> list[dict]:
    return [s.to_dict() for s in _statuses()]


@app.get("/", response_class=HTMLResponse, dependencies=[Depends(get_user)])
def index() -> str:
    rows = []
    for s in _statuses():
        state = html.escape(s.error) if s.error else f"{html.escape(s.state)}; lag {s.lag}, {s.records} records copied"
        if s.running:
            state += f"; running: {html.escape(s.running)}"
        rows.append(
            f"<h2>{html.escape(s.flow)}</h2><p>{state}</p><table border=1 cellpadding=4>"
            "<tr><th>topic</th><th>partition</th><th>next</th><th>end</th><th>lag</th><th>lost</th></tr>"
            + "".join(
                f"<tr><td>{html.escape(p.topic)}</td><td>{p.partition}</td><td>{p.next}</td>"
                f"<td>{p.end}</td><td>{p.lag}</td><td>{p.lost}</td></tr>"
                for p in s.partitions
            )
            + "</table>"
        )
    return "<html><body style='font-family:sans-serif'><h1>mirrorflow</h1>" + "".join(rows) + "</body></html>"


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
