"""The web UI's routes, added to the registry's FastAPI app (``registry_api.create_app``).

Server-rendered pages (Jinja2, autoescaped: a dataset named ``<script>`` is text) under ``/ui``, JSON for
the graph and the live updates under ``/ui/api``, and two small scripts under ``/ui/static`` (the graph's
layout and drawing, the live poll). Nothing is fetched from anywhere but this server.
Every route reads; none writes.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import pathlib
import secrets
from typing import Any

from lineagewire.exceptions import LineagewireError, MissingExtraError

try:
    import httpx
    from fastapi import FastAPI, Query, Request
    from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
    from fastapi.staticfiles import StaticFiles
    from fastapi.templating import Jinja2Templates
    from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("jinja2", "audit", "lineagewire ui") from exc

from ..registry_query import NotFoundError, resolve_dataset
from ..registry_store import RegistryStore
from . import queries as q
from .alerts import AlertsReader

log = logging.getLogger(__name__)

__all__ = ["add_ui"]

_HERE = pathlib.Path(__file__).parent
#: seconds the live script waits between polls
POLL_SECONDS = 2.0
#: the highest depth the graph takes (a wide graph grows by its fan-out at every hop)
MAX_DEPTH = 10
STATUSES = ["CREATED", "QUEUED", "RUNNING", "FINISHED", "FAILED", "CANCELLED", "NONE"]
_TIME_KEYS = {"event_time", "transition_time", "nominal_time", "deadline"}


def _duration(ms: Any) -> str:
    if ms is None:
        return "–"
    seconds = int(ms) / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _time(value: dt.datetime | None) -> str:
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def _sparkline(values: list[Any]) -> str:
    """SVG points of a sparkline 100×20 (durations, oldest first; a run without one is left out)."""
    nums = [(i, v) for i, v in enumerate(values) if v is not None]
    if not nums:
        return ""
    top = max(v for _, v in nums) or 1
    step = 100 / max(1, len(values) - 1)
    return " ".join(f"{i * step:.1f},{20 - 18 * v / top:.1f}" for i, v in nums)


def _revive(value: Any, key: str = "") -> Any:
    """A stored event's JSON with its times as datetimes again (as the codec decodes them)."""
    if isinstance(value, dict):
        return {k: _revive(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_revive(v) for v in value]
    if key in _TIME_KEYS and isinstance(value, str):
        return dt.datetime.fromisoformat(value)
    return value


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
           token: str | None = None) -> FastAPI:
    """Add the UI's pages to ``app`` (the registry's REST app over ``store``); with ``token``, every route
    of the app needs it."""
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    env = templates.env
    env.filters.update(duration=_duration, time=_time, sparkline=_sparkline)
    env.globals.update(statuses=STATUSES, poll_seconds=POLL_SECONDS, alerts_enabled=alerts_db is not None,
                       max_depth=MAX_DEPTH)
    alerts = AlertsReader(alerts_db)
    app.mount("/ui/static", StaticFiles(directory=str(_HERE / "static")), name="ui-static")
    if token is not None:
        app.add_middleware(_Auth, token=token)

    def read(fn: Any, *args: Any, **kwargs: Any) -> Any:
        with store.engine.connect() as conn:
            return fn(conn, *args, **kwargs)

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    @app.exception_handler(NotFoundError)
    async def _not_found(request: Request, exc: NotFoundError) -> Response:
        if request.url.path.startswith("/ui/") and not request.url.path.startswith("/ui/api/"):
            return page(request, "error.html", status_code=404, title="Not found", message=str(exc))
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(LineagewireError)
    async def _bad(request: Request, exc: LineagewireError) -> Response:
        if request.url.path.startswith("/ui/") and not request.url.path.startswith("/ui/api/"):
            return page(request, "error.html", status_code=422, title="Cannot show this", message=str(exc))
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/jobs")

    @app.get("/ui", include_in_schema=False)
    @app.get("/ui/", include_in_schema=False)
    def ui_root() -> RedirectResponse:
        return RedirectResponse("/ui/jobs")

    @app.get("/ui/jobs", response_class=HTMLResponse, tags=["ui"])
    def jobs(request: Request, text: str = "", namespace: str = "", status: str = "", tag: str = "",
             sort: str = "job", desc: bool = False, page_no: int = Query(1, alias="page", ge=1)) -> HTMLResponse:
        data = read(q.jobs_page, text=text, namespace=namespace, status=status, tag=tag, sort=sort, desc=desc,
                    page=page_no)
        open_alerts = alerts.open_by_job() if alerts.enabled else {}
        for job in data["jobs"]:
            job["open_alerts"] = open_alerts.get(f"{job['namespace']}/{job['name']}", 0)
        query = {"text": text, "namespace": namespace, "status": status, "tag": tag, "sort": sort,
                 "desc": "1" if desc else ""}
        return page(request, "jobs.html", title="Jobs", data=data, query=query)

    @app.get("/ui/jobs/{job_id}", response_class=HTMLResponse, tags=["ui"])
    def job(request: Request, job_id: int, page_no: int = Query(1, alias="page", ge=1),
            depth: int = Query(2, ge=1, le=MAX_DEPTH)) -> HTMLResponse:
        data = read(q.job_page, job_id, page=page_no)
        return page(request, "job.html", title=f"{data['namespace']}/{data['name']}", job=data, depth=depth,
                    alerts=alerts.for_job(data["namespace"], data["name"]) if alerts.enabled else [],
                    refresh=_refresh_health(scheduler_url, data["workflows"]), timeline=_timeline(data["runs"]))

    @app.get("/ui/runs/{run_id}", response_class=HTMLResponse, tags=["ui"])
    def run(request: Request, run_id: str) -> HTMLResponse:
        data = read(q.run_page, run_id)
        return page(request, "run.html", title=f"run {run_id}", run=data)

    @app.get("/ui/events/{event_id}.json", tags=["ui"])
    def raw_event(event_id: str) -> JSONResponse:
        return JSONResponse(read(q.event_body, event_id))

    @app.get("/ui/events/{event_id}/openlineage.json", tags=["ui"])
    def openlineage_event(event_id: str) -> Response:
        from lineagewire.consumers.runtime import Record, load_handler_class

        event = _revive(read(q.event_body, event_id))
        try:  # the OpenLineage service's own rendering, through the runtime's handler registry
            # not prepare_process(): its GC and switch-interval tuning is for the service's own process, not this one
            handler = load_handler_class("openlineage").from_options()
            texts = handler.render(Record(topic="registry", partition=0, offset=0, key=None, timestamp_ms=0,
                                          event=event))
        except (LineagewireError, ImportError) as exc:
            return JSONResponse({"detail": f"no OpenLineage rendering: {exc}"}, status_code=501)
        return Response("[" + ",\n".join(texts) + "]", media_type="application/json")

    @app.get("/ui/find", include_in_schema=False)
    def find(dataset: str = Query(..., max_length=5000), namespace: str | None = None,
             graph: bool = False) -> RedirectResponse:
        """The page (or graph) of the dataset named as the CLI takes it: a path, a URI or a catalog table name."""
        ds_id = read(resolve_dataset, dataset, namespace)[0]
        return RedirectResponse(f"/ui/graph?dataset={ds_id}" if graph else f"/ui/datasets/{ds_id}", status_code=303)

    @app.get("/ui/datasets/{dataset_id}", response_class=HTMLResponse, tags=["ui"])
    def dataset(request: Request, dataset_id: int, column: str | None = None,
                depth: int = Query(2, ge=1, le=MAX_DEPTH)) -> HTMLResponse:
        data = read(q.dataset_page, dataset_id)
        return page(request, "dataset.html", title=data["name"], ds=data, column=column, depth=depth)

    @app.get("/ui/graph", response_class=HTMLResponse, tags=["ui"])
    def graph_page(request: Request, dataset: int | None = None, job: int | None = None, column: str | None = None,
                   depth: int = Query(2, ge=1, le=MAX_DEPTH), color: str = "status") -> HTMLResponse:
        if dataset is None and job is None:
            raise NotFoundError("a graph needs a dataset or a job; expected ?dataset=ID or ?job=ID")
        if dataset is not None:
            subject = read(q.dataset_page, dataset)
            columns, title = subject["columns"], subject["name"]
        else:
            subject = read(q.job_page, job, page_size=1)
            columns, title = [], f"{subject['namespace']}/{subject['name']}"
        return page(request, "graph.html", title=f"Lineage of {title}", subject_title=title, dataset=dataset,
                    job=job, column=column, depth=depth, color=color, columns=columns)

    @app.get("/ui/api/graph", tags=["ui"])
    def graph_api(dataset: int | None = None, job: int | None = None, column: str | None = None,
                  depth: int = Query(2, ge=1, le=MAX_DEPTH)) -> dict[str, Any]:
        return read(q.graph, dataset_id=dataset, job_id=job, column=column or None, depth=depth)

    @app.get("/ui/alerts", response_class=HTMLResponse, tags=["ui"])
    def alerts_page(request: Request) -> HTMLResponse:
        return page(request, "alerts.html", title="Alerts", alerts=alerts.alerts(), silences=alerts.silences(),
                    outbox=alerts.outbox())

    @app.get("/ui/search", response_class=HTMLResponse, tags=["ui"])
    def search(request: Request, q_text: str = Query("", alias="q", max_length=5000)) -> HTMLResponse:
        return page(request, "search.html", title="Search", q=q_text, found=read(q.search, q_text.strip()))

    @app.get("/ui/api/live", tags=["ui"])
    def live(runs: str = "", jobs: str = "") -> dict[str, Any]:
        """Current status of the runs and jobs a page shows (comma-separated ids), for its live update."""
        run_ids = [x for x in runs.split(",") if x][:500]
        job_ids = [int(x) for x in jobs.split(",") if x.isdigit()][:500]
        with store.engine.connect() as conn:
            return {"runs": q.run_status(conn, run_ids) if run_ids else {},
                    "jobs": {str(k): v for k, v in q.job_status(conn, job_ids).items()} if job_ids else {}}

    return app


def _timeline(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bars (x and width in % of the span) of the runs on one page, oldest left; a running run reaches now."""
    now = dt.datetime.now(dt.UTC)
    spans = [(r, r["started_at"] or r["created_at"], r["ended_at"] or (now if r["status"] == "RUNNING" else None))
             for r in reversed(runs) if (r["started_at"] or r["created_at"]) is not None]
    if not spans:
        return []
    lo = min(s for _, s, _ in spans)
    hi = max((e or s) for _, s, e in spans)
    width = max((hi - lo).total_seconds(), 1.0)
    longest = max(((e - s).total_seconds() for _, s, e in spans if e), default=0.0)
    out = []
    for r, s, e in spans:
        seconds = (e - s).total_seconds() if e else 0.0
        out.append({"run_id": r["run_id"], "status": r["status"] or "NONE",
                    "x": 100 * (s - lo).total_seconds() / width, "w": max(0.4, 100 * seconds / width),
                    "slow": bool(longest) and seconds >= longest and len(spans) > 2,
                    "label": f"{r['status'] or 'NONE'}, {_duration(r['duration_ms'])}, started {_time(s)}"})
    return out


def _refresh_health(scheduler_url: str | None, workflows: list[str]) -> list[dict[str, Any]]:
    """The scheduler's answer for each refresh workflow of the job (``GET /workflows/{id}``)."""
    if not scheduler_url or not workflows:
        return []
    out = []
    with httpx.Client(base_url=scheduler_url, timeout=2.0) as client:
        for wf in workflows[:5]:
            try:
                resp = client.get(f"/workflows/{wf}")
                resp.raise_for_status()
                out.append({"workflow_id": wf, "info": resp.json(), "error": None})
            except (httpx.HTTPError, json.JSONDecodeError) as exc:
                out.append({"workflow_id": wf, "info": None, "error": f"scheduler at {scheduler_url}: {exc}"})
    return out
