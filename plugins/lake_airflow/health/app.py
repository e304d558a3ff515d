"""The table-health FastAPI app, mounted by the plugin at ``/lake``.

Airflow gives plugin apps no authentication, so every route here checks the caller's Airflow
login itself, the way Airflow's own API does: a bearer token, else the UI's ``_token`` cookie,
validated by the configured auth manager (401 when absent or expired, 403 when invalid or not
allowed to view plugins). With ``simple_auth_manager_all_admins`` Airflow's own middleware
supplies the token, so the page works without a login exactly when the rest of the UI does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.responses import HTMLResponse, JSONResponse

from lake_airflow.health.page import render_page
from lake_airflow.health.report import health_report

Authenticate = Callable[[Request], Awaitable[Any]]
TOKEN_COOKIE = "_token"  # airflow.api_fastapi.auth.managers.base_auth_manager


def request_token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, credentials = auth.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return request.cookies.get(TOKEN_COOKIE)


async def airflow_user(request: Request) -> Any:
    """The Airflow user behind the request, or an HTTPException (401/403)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import resolve_user_from_token

    user = await resolve_user_from_token(request_token(request))
    if not get_auth_manager().is_authorized_view(access_view=AccessView.PLUGINS, user=user):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "not allowed to view lake tables")
    return user


async def current_user(request: Request) -> Any:
    """The app's authenticate hook (``app.state.authenticate``) applied to the request."""
    return await request.app.state.authenticate(request)


UserDep = Annotated[Any, Depends(current_user)]


def _name(user: Any) -> str | None:
    getter = getattr(user, "get_name", None)
    return str(getter()) if callable(getter) else None


def create_app(authenticate: Authenticate = airflow_user,
               report: Callable[[], dict[str, Any]] = health_report) -> FastAPI:
    app = FastAPI(title="lakecore table health", docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.authenticate = authenticate

    async def current_report() -> dict[str, Any]:
        return await asyncio.to_thread(report)  # file and DB I/O off the event loop

    @app.get("/", response_class=HTMLResponse)
    async def page(user: UserDep) -> HTMLResponse:
        return HTMLResponse(render_page(await current_report(), _name(user)))

    @app.get("/api/tables")
    async def tables(user: UserDep) -> JSONResponse:
        return JSONResponse(await current_report())

    @app.get("/api/tables/{name}")
    async def table(name: str, user: UserDep) -> JSONResponse:
        for t in (await current_report())["tables"]:
            if name in (t["name"], t.get("slug")):
                return JSONResponse(t)
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no declared table {name!r}")

    return app
