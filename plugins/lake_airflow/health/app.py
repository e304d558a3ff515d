"""The table-health FastAPI app, mounted by the plugin at ``/lake``.

Airflow gives plugin apps no authentication, so every route here checks the caller's Airflow
login itself, the way Airflow's own API does: a bearer token, else the UI's ``_token`` cookie,
validated by the configured auth manager (401 when absent or expired, 403 when invalid or not
allowed to view plugins). With ``simple_auth_manager_all_admins`` Airflow's own middleware
supplies the token, so the page works without a login exactly when the rest of the UI does.
A browser (``Accept: text/html``) without a login is sent to Airflow's login page instead of
the 401; API clients keep the JSON 401. The page reloads itself every
``$LAKECORE_HEALTH_REFRESH_SECONDS`` seconds (default 60; ``?refresh=N`` per request, 0: off).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from lake_airflow.health.page import render_page
from lake_airflow.health.report import health_report

Authenticate = Callable[[Request], Awaitable[Any]]
TOKEN_COOKIE = "_token"  # airflow.api_fastapi.auth.managers.base_auth_manager
REFRESH_ENV = "LAKECORE_HEALTH_REFRESH_SECONDS"
DEFAULT_REFRESH_SECONDS = 60


def airflow_login_url(next_url: str) -> str:
    """Airflow's login page (its auth manager's), returning to ``next_url``."""
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager().get_url_login(next_url=next_url)


def refresh_seconds(request: Request) -> int:
    """``?refresh=N``, else ``$LAKECORE_HEALTH_REFRESH_SECONDS``, else 60; 0 turns it off."""
    text = request.query_params.get("refresh") or os.environ.get(REFRESH_ENV) or ""
    try:
        return max(0, int(text)) if text.strip() else DEFAULT_REFRESH_SECONDS
    except ValueError:
        return DEFAULT_REFRESH_SECONDS


def wants_html(request: Request) -> bool:
    """A browser navigating: it asks for HTML (an API client asks for JSON or anything)."""
    return "text/html" in request.headers.get("accept", "")


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
               report: Callable[[], dict[str, Any]] = health_report,
               login_url: Callable[[str], str] = airflow_login_url) -> FastAPI:
    app = FastAPI(title="lakecore table health", docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.authenticate = authenticate

    @app.exception_handler(HTTPException)
    async def to_login(request: Request, exc: HTTPException) -> Response:
        """A browser with no login goes to the login page; everyone else gets the error."""
        if exc.status_code == status.HTTP_401_UNAUTHORIZED and wants_html(request):
            # the path as the browser asked for it (a mounted app's includes its prefix)
            return RedirectResponse(login_url(request.url.path), status.HTTP_303_SEE_OTHER)
        return await http_exception_handler(request, exc)

    async def current_report() -> dict[str, Any]:
        return await asyncio.to_thread(report)  # file and DB I/O off the event loop

    @app.get("/", response_class=HTMLResponse)
    async def page(request: Request, user: UserDep) -> HTMLResponse:
        return HTMLResponse(render_page(await current_report(), _name(user),
                                        refresh_seconds(request)))

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
