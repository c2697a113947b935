"""Airflow plugin: the mirrorflow status page (Browse > Mirrorflow) inside the Airflow UI.

Thin: the config comes through MirrorflowHook, the page's contents from mirrorflow.observe.status_page
(the target clusters' state topics, cached a few seconds so a refresh storm reads Kafka once) and
its HTML from mirrorflow_airflow.status_html. Every route requires an Airflow login (GetUserDep:
the UI's JWT cookie or a bearer token); plugin routes are public otherwise.

A user sees a flow (its card on the page, its entry in GET /api/flows: topics, groups, who operated
it) only when the auth manager lets them read one of the flow's DAGs (`mirrorflow_<kind>__<flow.id>`,
DAG-level GET: Simple's viewer reads every DAG, a team's users the DAGs of their team's bundles; FAB
and Keycloak per DAG), the same unit Airflow's own UI filters DAGs by.

Pause, resume and stop (POST /api/flows/<flow.id>/control, a JSON body: a cross-site form cannot send
one) need the permission to trigger the flow's control DAG (`mirrorflow_control__<flow.id>`, DAG run
POST in the auth manager: Simple's viewer is refused, user and above may); the change is recorded on
the target with the Airflow user's name (ops.control.flow_control), like a run of that DAG.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from mirrorflow.observe.status_page import PageCache
from mirrorflow.ops.registry import linked_dag_kinds
from mirrorflow.state.names import dag_id

CACHE_S = 5.0
# the DAGs every flow has (the schemas DAG exists only for flows whose clusters name registries)
LINKED = linked_dag_kinds()

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
    return [(kind, f"{base}/dags/{dag_id(kind, flow_id)}") for kind in LINKED]


def control_dag_id(flow_id: str) -> str:
    return dag_id("control", flow_id)


def may_read(request: Request, user: BaseUser, flow_id: str, known: Collection[str]) -> bool:
    """Whether `user` may read one of the flow's DAGs that Airflow knows (`known`: in its database, where
    their teams are; the auth manager's own DAG-level check). A flow none of whose DAGs Airflow has
    parsed yet is checked as its control DAG without a team, as Airflow checks a DAG it does not know."""
    ids = [dag_id(kind, flow_id) for kind in LINKED]
    for one in [i for i in ids if i in known] or [control_dag_id(flow_id)]:
        try:
            requires_access_dag("GET", param_dag_id=one)(request, user)
        except HTTPException:
            continue
        return True
    return False


def _readable(request: Request, user: BaseUser) -> list:
    """The flows' pages this user may read (may_read)."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    pages = _pages()
    with create_session() as session:
        known = set(session.scalars(select(DagModel.dag_id).where(DagModel.dag_id.like("mirrorflow\\_%", escape="\\"))))
    return [p for p in pages if may_read(request, user, p.flow.replace("->", "-"), known)]


def may_control(request: Request, user: BaseUser, flow_id: str) -> bool:
    """Whether `user` may trigger the flow's control DAG (the auth manager's own check, teams included)."""
    try:
        requires_access_dag("POST", DagAccessEntity.RUN, param_dag_id=control_dag_id(flow_id))(request, user)
    except HTTPException:
        return False
    return True


class ControlRequest(BaseModel):
    action: Literal["pause", "resume", "stop"]
    reason: str | None = None
    force: bool = False  # resume a flow its failover stopped (its applications never moved), as the CLI's --force


@app.get("/api/flows")
def flows(request: Request, user: GetUserDep) -> list[dict]:
    """The flows this user may read (may_read)."""
    return [p.status.to_dict() for p in _readable(request, user)]


@app.post("/api/flows/{flow_id}/control")
def control(flow_id: str, body: ControlRequest, request: Request, user: GetUserDep) -> dict:
    """Pause, resume or stop the flow for the logged-in user (403 without the permission)."""
    from mirrorflow.errors import MirrorflowError
    from mirrorflow.ops.control.flow_control import control_flow

    if not may_control(request, user, flow_id):
        raise HTTPException(403, f"user {user.get_name()!r} may not trigger {control_dag_id(flow_id)}")
    cfg = _config()
    flow = next((f for f in cfg.flows.values() if f.id == flow_id), None)
    if flow is None:
        raise HTTPException(404, f"no flow {flow_id!r} in the config")
    try:
        st = control_flow(cfg, flow, body.action, user.get_name(), "status-page", body.reason or "", body.force)
    except MirrorflowError as exc:
        raise HTTPException(409, str(exc)) from None
    finally:
        cache.invalidate()
    return {"flow": flow.name, "by": user.get_name(), **st.to_dict(), "message": f"{flow.name}: {st.describe()}"}


@app.get("/", response_class=HTMLResponse)
def index(request: Request, user: GetUserDep, fragment: bool = False) -> str:
    from mirrorflow_airflow import status_html

    pages = _readable(request, user)
    # buttons only on the flows this user may control (the POST checks again)
    controls = {p.flow for p in pages if may_control(request, user, p.flow.replace("->", "-"))}
    if fragment:
        return status_html.render_flows(pages, dag_links, controls)
    return status_html.render_page(pages, dag_links, controls=controls)


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
