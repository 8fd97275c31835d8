"""The web UI, added to the registry's FastAPI app (``registry_api.create_app``) by ``add_ui``: its templates,
static files, optional token and error pages here, its routes in ``routes``.

Server-rendered pages (Jinja2, autoescaped: a dataset named ``<script>`` is text) under ``/ui``, JSON for
the graph and the live updates under ``/ui/api``, and two small scripts under ``/ui/static`` (the graph's
layout and drawing, the live poll). Nothing is fetched from anywhere but this server.
Every route reads; none writes.
"""

from __future__ import annotations

import base64
import pathlib
import secrets
from typing import Any

from lineagewire.exceptions import LineagewireError, MissingExtraError

try:
    from fastapi import FastAPI, Request
    from fastapi.responses import Response
    from fastapi.staticfiles import StaticFiles
    from fastapi.templating import Jinja2Templates
    from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("jinja2", "audit", "lineagewire ui") from exc

from ..registry_query import NotFoundError
from ..registry_store import RegistryStore
from .alerts import AlertsReader
from .routes import MAX_DEPTH, UI, cannot_show, duration_text, not_found, router, time_text
from .scheduler import SchedulerReader, hold_text

__all__ = ["add_ui"]

_HERE = pathlib.Path(__file__).parent
#: seconds the live script waits between polls
POLL_SECONDS = 2.0
STATUSES = ["CREATED", "QUEUED", "RUNNING", "FINISHED", "FAILED", "CANCELLED", "NONE"]


def _sparkline(values: list[Any]) -> str:
    """SVG points of a sparkline 100×20 (durations, oldest first; a run without one is left out)."""
    nums = [(i, v) for i, v in enumerate(values) if v is not None]
    if not nums:
        return ""
    top = max(v for _, v in nums) or 1
    step = 100 / max(1, len(values) - 1)
    return " ".join(f"{i * step:.1f},{20 - 18 * v / top:.1f}" for i, v in nums)


class _Auth(BaseHTTPMiddleware):
    """Every request needs the token: ``Authorization: Bearer <token>`` or basic auth with it as password."""

    def __init__(self, app: Any, token: str) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        given = ""
        if scheme.lower() == "bearer":
            given = value.strip()
        elif scheme.lower() == "basic":
            try:
                given = base64.b64decode(value.strip()).decode().partition(":")[2]
            except (ValueError, UnicodeDecodeError):
                given = ""
        if given and secrets.compare_digest(given.encode(), self.token.encode()):
            return await call_next(request)
        return Response("a valid 'Authorization: Bearer <token>' header or basic auth with the token as password "
                        "is required", status_code=401,
                        headers={"WWW-Authenticate": 'Basic realm="lineagewire", charset="UTF-8"'})


def add_ui(app: FastAPI, store: RegistryStore, *, alerts_db: str | None = None, scheduler_url: str | None = None,
           token: str | None = None, promises: Any = None) -> FastAPI:
    """Add the UI's pages (``routes.router``) to ``app`` (the registry's REST app over ``store``); with
    ``token``, every route of the app needs it; ``promises`` (``lineagewire.freshness.Promises``): the freshness
    promises the dataset pages show."""
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    env = templates.env
    env.filters.update(duration=duration_text, time=time_text, sparkline=_sparkline, hold=hold_text)
    env.globals.update(statuses=STATUSES, poll_seconds=POLL_SECONDS, alerts_enabled=alerts_db is not None,
                       max_depth=MAX_DEPTH, scheduler_enabled=bool(scheduler_url),
                       promises_given=promises is not None)
    app.state.lineagewire_ui = UI(store, templates, AlertsReader(alerts_db), SchedulerReader(scheduler_url),
                                  promises)
    app.mount("/ui/static", StaticFiles(directory=str(_HERE / "static")), name="ui-static")
    if token is not None:
        app.add_middleware(_Auth, token=token)
    app.add_exception_handler(NotFoundError, not_found)
    app.add_exception_handler(LineagewireError, cannot_show)
    app.include_router(router)
    return app
