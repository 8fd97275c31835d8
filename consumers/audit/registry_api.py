"""The job registry over REST (FastAPI): ``lineagewire registry serve``.

Reads are open: ``GET /jobs``, ``/jobs/{job}``, ``/jobs/{job}/history``,
``/runs/{run_id}``, ``/runs/{run_id}/diff[?against=RUN]`` (what changed since the job's previous successful
run), ``/lineage/{upstream|downstream}?dataset=...``, ``/datasets?dataset=...`` (a dataset's
lifecycle: its changes, dropped by which run, renamed from or to which name).
Anything that changes data needs ``Authorization: Bearer <token>``, checked
before the body is read: ``POST /events`` applies one event given as it is on
the topic (``application/octet-stream``, at most ``MAX_BODY`` bytes).
OpenAPI docs at ``/docs``.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

from lineagewire.exceptions import DecodeError, LineagewireError, MissingExtraError

try:
    from fastapi import Depends, FastAPI, HTTPException, Query, Request
    from fastapi.responses import JSONResponse
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
    from starlette.concurrency import run_in_threadpool
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("fastapi", "audit", "lineagewire registry serve") from exc

from lineagewire.schemas import Codec

from . import registry_query as q
from .impact_cli import add_impact_route
from .registry_store import RegistryStore

__all__ = ["MAX_BODY", "create_app"]

#: the largest event body POST /events takes
MAX_BODY = 1 << 20


def create_app(store: RegistryStore, token: str) -> FastAPI:
    """The REST app over ``store``; changes need ``token``."""
    app = FastAPI(title="lineagewire job registry", version="1",
                  description="Jobs, runs, spec history and lineage. Changes need a bearer token.")
    bearer = HTTPBearer(auto_error=False)
    codec = Codec()

    def auth(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:  # noqa: B008
        if creds is None or not secrets.compare_digest(creds.credentials, token):
            raise HTTPException(401, "a valid 'Authorization: Bearer <token>' header is required for changes",
                                headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(q.NotFoundError)
    async def _not_found(_req: Request, exc: q.NotFoundError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(LineagewireError)
    async def _bad(_req: Request, exc: LineagewireError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    def read(fn: Any, *args: Any, **kwargs: Any) -> Any:
        with store.engine.connect() as conn:
            return fn(conn, *args, **kwargs)

    @app.get("/jobs")
    def jobs() -> list[dict[str, Any]]:
        return read(q.list_jobs)

    @app.get("/jobs/{job:path}/history")
    def history(job: str) -> dict[str, Any]:
        return read(q.job_history, job)

    @app.get("/jobs/{job:path}")
    def job(job: str) -> dict[str, Any]:
        return read(q.job_runs, job)

    @app.get("/runs/{run_id}")
    def run(run_id: str) -> dict[str, Any]:
        return read(q.run_detail, run_id)

    @app.get("/runs/{run_id}/diff")
    def run_diff(run_id: str, against: str | None = Query(None, description="Another run of the same job to "
                                                             "compare with; default: its previous successful run."),
                 ) -> dict[str, Any]:
        return read(q.run_diff, run_id, against)

    @app.get("/datasets")
    def dataset(dataset: str, namespace: str | None = None) -> dict[str, Any]:
        return read(q.dataset_detail, dataset, namespace)

    @app.get("/lineage/{direction}")
    def lineage(direction: str, dataset: str, namespace: str | None = None, column: str | None = None,
                depth: int | None = Query(q.DEFAULT_DEPTH, ge=1, le=1000,
                                          description="At most this many hops; `more` says whether the graph "
                                          "goes on beyond them."),
                since: dt.datetime | None = None) -> dict[str, Any]:
        if since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=dt.UTC)
        return read(q.lineage, dataset, direction=direction, namespace=namespace,
                    column=column, depth=depth, since=since)

    @app.post("/events", dependencies=[Depends(auth)], status_code=200)
    async def post_event(request: Request) -> dict[str, Any]:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            raise HTTPException(413, f"body of {length} bytes; expected at most {MAX_BODY}")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                raise HTTPException(413, f"body over {MAX_BODY} bytes; expected one encoded event")
        try:
            event = codec.decode(body)
        except DecodeError as exc:
            raise HTTPException(422, f"not a lineagewire event ({exc.reason}): {exc}") from exc
        applied = await run_in_threadpool(store.apply, event)  # the database call must not block the loop
        return {"applied": applied, "event_id": event["header"]["event_id"]}

    add_impact_route(app, store)  # GET /impact: everything downstream of a dataset or column (impact_cli)
    return app
