"""The web UI's pages and its JSON for the graph and the live updates: ``router``, added to the registry's
app by ``app.add_ui``. Every route reads; none writes.

A route finds what it reads through ``UI``, kept on the app (``app.state``) by ``add_ui`` and handed in by
FastAPI's dependency injection, so the routes are plain functions of this module.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from lineagewire.exceptions import LineagewireError

from ..registry_query import NotFoundError, resolve_dataset
from ..registry_store import RegistryStore
from . import queries as q
from .alerts import AlertsReader
from .freshness import promise_state
from .impact import router as impact_router
from .scheduler import SchedulerReader
from .tables import router as tables_router

__all__ = ["MAX_DEPTH", "UI", "cannot_show", "duration_text", "not_found", "router", "time_text"]

#: the highest depth the graph takes (a wide graph grows by its fan-out at every hop)
MAX_DEPTH = 10
_TIME_KEYS = {"event_time", "transition_time", "nominal_time", "deadline"}


@dataclass(frozen=True)
class UI:
    """What the pages read: the registry, the alert database (if any), the scheduler (if any), the freshness
    promises (``lineagewire.freshness.Promises``, if a datasets file was given), the templates."""

    store: RegistryStore
    templates: Jinja2Templates
    alerts: AlertsReader
    scheduler: SchedulerReader
    promises: Any = None

    def read(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(connection, *args, **kwargs)`` on a connection of the registry's."""
        with self.store.engine.connect() as conn:
            return fn(conn, *args, **kwargs)

    def page(self, request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)


def _ui(request: Request) -> UI:
    return request.app.state.lineagewire_ui


Ctx = Annotated[UI, Depends(_ui)]
Depth = Annotated[int, Query(ge=1, le=MAX_DEPTH)]
PageNo = Annotated[int, Query(alias="page", ge=1)]

router = APIRouter()
router.include_router(impact_router)  # /ui/impact and its CSV: a router of its own (ui/impact.py)
router.include_router(tables_router)  # /ui/tables: the scheduler's materialized tables (ui/tables.py)


def _is_page(request: Request) -> bool:
    return request.url.path.startswith("/ui/") and not request.url.path.startswith("/ui/api/")


async def not_found(request: Request, exc: Exception) -> Response:
    """``NotFoundError``: the error page under ``/ui``, JSON elsewhere (the API's and the registry's routes)."""
    if _is_page(request):
        return _ui(request).page(request, "error.html", status_code=404, title="Not found", message=str(exc))
    return JSONResponse({"detail": str(exc)}, status_code=404)


async def cannot_show(request: Request, exc: Exception) -> Response:
    """Any other ``LineagewireError`` (bad input, a registry that cannot answer): 422, a page or JSON."""
    if _is_page(request):
        return _ui(request).page(request, "error.html", status_code=422, title="Cannot show this", message=str(exc))
    return JSONResponse({"detail": str(exc)}, status_code=422)


@router.get("/", include_in_schema=False)
def root() -> RedirectResponse:
    return RedirectResponse("/ui/jobs")


@router.get("/ui", include_in_schema=False)
@router.get("/ui/", include_in_schema=False)
def ui_root() -> RedirectResponse:
    return RedirectResponse("/ui/jobs")


@router.get("/ui/jobs", response_class=HTMLResponse, tags=["ui"])
def jobs(request: Request, ui: Ctx, text: str = "", namespace: str = "", status: str = "", tag: str = "",
         sort: str = "job", desc: bool = False, page_no: PageNo = 1) -> HTMLResponse:
    data = ui.read(q.jobs_page, text=text, namespace=namespace, status=status, tag=tag, sort=sort, desc=desc,
                   page=page_no)
    open_alerts = ui.alerts.open_by_job() if ui.alerts.enabled else {}
    for job in data["jobs"]:
        job["open_alerts"] = open_alerts.get(f"{job['namespace']}/{job['name']}", 0)
    query = {"text": text, "namespace": namespace, "status": status, "tag": tag, "sort": sort,
             "desc": "1" if desc else ""}
    return ui.page(request, "jobs.html", title="Jobs", data=data, query=query)


@router.get("/ui/jobs/{job_id}", response_class=HTMLResponse, tags=["ui"])
def job(request: Request, ui: Ctx, job_id: int, page_no: PageNo = 1, depth: Depth = 2) -> HTMLResponse:
    data = ui.read(q.job_page, job_id, page=page_no)
    return ui.page(request, "job.html", title=f"{data['namespace']}/{data['name']}", job=data, depth=depth,
                   alerts=ui.alerts.for_job(data["namespace"], data["name"]) if ui.alerts.enabled else [],
                   refresh=ui.scheduler.workflows(data["workflows"]), timeline=_timeline(data["runs"]))


@router.get("/ui/runs/{run_id}", response_class=HTMLResponse, tags=["ui"])
def run(request: Request, ui: Ctx, run_id: str) -> HTMLResponse:
    data = ui.read(q.run_page, run_id)
    return ui.page(request, "run.html", title=f"run {run_id}", run=data)


@router.get("/ui/events/{event_id}.json", tags=["ui"])
def raw_event(ui: Ctx, event_id: str) -> JSONResponse:
    return JSONResponse(ui.read(q.event_body, event_id))


@router.get("/ui/events/{event_id}/openlineage.json", tags=["ui"])
def openlineage_event(ui: Ctx, event_id: str) -> Response:
    from lineagewire.consumers.runtime import Record, load_handler_class

    event = _revive(ui.read(q.event_body, event_id))
    try:  # the OpenLineage service's own rendering, through the runtime's handler registry
        # not prepare_process(): its GC and switch-interval tuning is for the service's own process, not this one
        handler = load_handler_class("openlineage").from_options()
        texts = handler.render(Record(topic="registry", partition=0, offset=0, key=None, timestamp_ms=0,
                                      event=event))
    except (LineagewireError, ImportError) as exc:
        return JSONResponse({"detail": f"no OpenLineage rendering: {exc}"}, status_code=501)
    return Response("[" + ",\n".join(texts) + "]", media_type="application/json")


@router.get("/ui/find", include_in_schema=False)
def find(ui: Ctx, dataset: Annotated[str, Query(max_length=5000)], namespace: str | None = None,
         graph: bool = False) -> RedirectResponse:
    """The page (or graph) of the dataset named as the CLI takes it: a path, a URI or a catalog table name."""
    ds_id = ui.read(resolve_dataset, dataset, namespace)[0]
    return RedirectResponse(f"/ui/graph?dataset={ds_id}" if graph else f"/ui/datasets/{ds_id}", status_code=303)


@router.get("/ui/datasets/{dataset_id}", response_class=HTMLResponse, tags=["ui"])
def dataset(request: Request, ui: Ctx, dataset_id: int, column: str | None = None, depth: Depth = 2) -> HTMLResponse:
    data = ui.read(q.dataset_page, dataset_id)
    promise = None
    if ui.promises is not None:
        found = ui.promises.promise_for(data["namespace"], data["name"], [a["name"] for a in data["aliases"]])
        promise = promise_state(found, ui.read(q.last_successful_write, dataset_id) if found else None,
                                dt.datetime.now(dt.UTC))
    return ui.page(request, "dataset.html", title=data["name"], ds=data, column=column, depth=depth,
                   promises_enabled=ui.promises is not None, promise=promise,
                   tables=_refreshed_tables(data["producers"]) if ui.scheduler.enabled else [])


@router.get("/ui/promises", response_class=HTMLResponse, tags=["ui"])
def promises(request: Request, ui: Ctx) -> HTMLResponse:
    """Every freshness promise of the datasets file and whether it is kept, a promise of a dataset the registry
    has not seen included ("never written")."""
    if ui.promises is None:
        raise NotFoundError("no freshness promises were given: start the UI with --datasets-file "
                            "(LINEAGEWIRE_UI__DATASETS_FILE), a file with a datasets: section")
    now = dt.datetime.now(dt.UTC)
    rows = []
    with ui.store.engine.connect() as conn:
        for p in ui.promises:
            found = q.promised_datasets(conn, p)
            states = [{"dataset": ds, **(promise_state(p, q.last_successful_write(conn, ds["id"]), now) or {})}
                      for ds in found] or [{"dataset": None, **(promise_state(p, None, now) or {})}]
            rows += [{"promise": p, **x} for x in states]
    return ui.page(request, "promises.html", title="Freshness promises", rows=rows)


@router.get("/ui/graph", response_class=HTMLResponse, tags=["ui"])
def graph_page(request: Request, ui: Ctx, dataset: int | None = None, job: int | None = None,
               column: str | None = None, depth: Depth = 2, color: str = "status") -> HTMLResponse:
    if dataset is None and job is None:
        raise NotFoundError("a graph needs a dataset or a job; expected ?dataset=ID or ?job=ID")
    if dataset is not None:
        subject = ui.read(q.dataset_page, dataset)
        columns, title = subject["columns"], subject["name"]
    else:
        subject = ui.read(q.job_page, job, page_size=1)
        columns, title = [], f"{subject['namespace']}/{subject['name']}"
    return ui.page(request, "graph.html", title=f"Lineage of {title}", subject_title=title, dataset=dataset,
                   job=job, column=column, depth=depth, color=color, columns=columns)


@router.get("/ui/api/graph", tags=["ui"])
def graph_api(ui: Ctx, dataset: int | None = None, job: int | None = None, column: str | None = None,
              depth: Depth = 2) -> dict[str, Any]:
    return ui.read(q.graph, dataset_id=dataset, job_id=job, column=column or None, depth=depth)


@router.get("/ui/alerts", response_class=HTMLResponse, tags=["ui"])
def alerts_page(request: Request, ui: Ctx) -> HTMLResponse:
    return ui.page(request, "alerts.html", title="Alerts", alerts=ui.alerts.alerts(), silences=ui.alerts.silences(),
                   outbox=ui.alerts.outbox())


@router.get("/ui/search", response_class=HTMLResponse, tags=["ui"])
def search(request: Request, ui: Ctx, q_text: Annotated[str, Query(alias="q", max_length=5000)] = "") -> HTMLResponse:
    return ui.page(request, "search.html", title="Search", q=q_text, found=ui.read(q.search, q_text.strip()))


@router.get("/ui/api/live", tags=["ui"])
def live(ui: Ctx, runs: str = "", jobs: str = "") -> dict[str, Any]:
    """Current status of the runs and jobs a page shows (comma-separated ids), for its live update."""
    run_ids = [x for x in runs.split(",") if x][:500]
    job_ids = [int(x) for x in jobs.split(",") if x.isdigit()][:500]
    with ui.store.engine.connect() as conn:
        return {"runs": q.run_status(conn, run_ids) if run_ids else {},
                "jobs": {str(k): v for k, v in q.job_status(conn, job_ids).items()} if job_ids else {}}


def _revive(value: Any, key: str = "") -> Any:
    """A stored event's JSON with its times as datetimes again (as the codec decodes them)."""
    if isinstance(value, dict):
        return {k: _revive(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_revive(v) for v in value]
    if key in _TIME_KEYS and isinstance(value, str):
        return dt.datetime.fromisoformat(value)
    return value


def duration_text(ms: Any) -> str:
    """A run's duration for people (the ``duration`` filter of the templates)."""
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


def time_text(value: dt.datetime | str | None) -> str:
    """A time for people, in UTC (the ``time`` filter of the templates); ISO text (``registry_query``'s answers,
    such as a dataset's lifecycle) is read first."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def _timeline(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bars (x and width in % of the span) of the runs on one page, oldest left; a running run reaches now."""
    spans = _spans(runs, dt.datetime.now(dt.UTC))
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
                    "label": f"{r['status'] or 'NONE'}, {duration_text(r['duration_ms'])}, started {time_text(s)}"})
    return out


def _spans(runs: list[dict[str, Any]], now: dt.datetime
           ) -> list[tuple[dict[str, Any], dt.datetime, dt.datetime | None]]:
    """(run, start, end or None) of the runs that started (or were created), oldest first; a running run ends
    ``now``."""
    return [(r, r["started_at"] or r["created_at"], r["ended_at"] or (now if r["status"] == "RUNNING" else None))
            for r in reversed(runs) if (r["started_at"] or r["created_at"]) is not None]


def _refreshed_tables(producers: list[dict[str, Any]]) -> list[str]:
    """The materialized tables among a dataset's writers: a refresh runner's job is named ``refresh <table>``."""
    return sorted({p["name"].removeprefix("refresh ") for p in producers if p["name"].startswith("refresh ")})
