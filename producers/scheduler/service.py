"""The scheduler service: FastAPI over the embedded scheduler, plus the loop and the status tracker.

Reads are open; every change needs ``Authorization: Bearer <token>``, checked
before the request body is read (``_Guard``), and request bodies are capped at
``limits.MAX_BODY`` bytes (413). The OpenAPI docs are at ``/docs``. Errors
answer with the scheduler error's status (404 unknown workflow or table, 422
bad cron, value or request, 409 wrong state) and ``{"detail": "<message
naming the field, value and expectation>"}``; a malformed body or parameter
also gets a one-string ``detail`` (422).

Configuration: ``ServiceConfig`` (``settings.py``: flags, then
``LINEAGEWIRE_SCHEDULER__<FIELD>``, then the YAML config's ``scheduler:``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import secrets
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from lineagewire.config import Settings
from lineagewire.exceptions import require

from .commands import CommandSink, KafkaCommandSink
from .embedded import EmbeddedWorkflowScheduler
from .exceptions import SchedulerError
from .limits import MAX_BODY, MAX_CATCHUP_CAP, MAX_CRON, MAX_LIMIT, MAX_NAME, MAX_REASON, MAX_TABLE, MAX_ZONE
from .settings import ServiceConfig
from .tables import TableCatalog
from .upstream import DbInputs

if TYPE_CHECKING:
    from .inputs import InputTracker
    from .status import StatusTracker

fastapi = require("fastapi", "scheduler", "The scheduler service")
from fastapi import Depends, FastAPI, HTTPException, Query, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

log = logging.getLogger(__name__)

__all__ = ["SchedulerService", "ServiceConfig", "create_app", "serve"]

_CHANGES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class SchedulerService:
    """The running parts: scheduler loop, status tracker (when ``settings`` given) and the sink."""

    def __init__(self, config: ServiceConfig, settings: Settings | None, *, sink: CommandSink | None = None,
                 catalog: TableCatalog | None = None, track_status: bool = True) -> None:
        self.config = config
        self.settings = settings
        self.catalog = catalog if catalog is not None else TableCatalog.from_file(config.tables)
        self._own_sink = sink is None
        if sink is None:
            if settings is None:
                raise SchedulerError("the scheduler service needs Kafka settings or a command sink")
            sink = KafkaCommandSink(settings)
        self.scheduler = EmbeddedWorkflowScheduler(self.catalog, url=config.db_url, sink=sink,
                                                   options=config.options())
        _promises(self.scheduler, config.tables)
        try:
            # Now, not when the server starts: a wrong URL or an unreachable database is one clear error.
            self.scheduler.open()
        except Exception as exc:  # noqa: BLE001 - driver errors of every database; all mean "cannot open"
            if self._own_sink:
                sink.close()
            raise SchedulerError(f"cannot open the scheduler database {config.safe_db_url()}: "
                                 f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc
        self.tracker: StatusTracker | None = None
        self.inputs_tracker: InputTracker | None = None
        if track_status and settings is not None:
            self.tracker, self.inputs_tracker = self._trackers(settings)
        if config.token is None:
            self.token = secrets.token_urlsafe(24)
            log.warning("no LINEAGEWIRE_SCHEDULER__TOKEN set; changes need this generated token: %s", self.token)
        else:
            self.token = config.token.get_secret_value()

    def _trackers(self, settings: Settings) -> tuple[StatusTracker, InputTracker]:
        """The refresh status tracker, and the inputs tracker (the inputs' writes and writers, for trigger:
        upstream and holds), both on lineage.jobs and the scheduler's database."""
        from lineagewire.consumers.runtime import RetryPolicy

        from .inputs import InputTracker
        from .status import StatusTracker

        config = self.config
        retry = RetryPolicy(initial=config.status_retry_initial, maximum=config.status_retry_max)
        assert self.scheduler.engine is not None  # opened by __init__ before
        return (StatusTracker(settings, self.scheduler, group_id=config.status_group,
                              metrics_port=config.status_metrics_port, retry=retry),
                InputTracker(settings, self.scheduler.engine, group_id=config.inputs_group, retry=retry))

    def start(self) -> None:
        if self.inputs_tracker is not None:
            self.inputs_tracker.start()
        self.scheduler.start()
        if self.tracker is not None:
            self.tracker.start()

    def stop(self) -> None:
        if self.tracker is not None:
            self.tracker.stop()
        if self.inputs_tracker is not None:
            self.inputs_tracker.stop()
        self.scheduler.close()
        if self._own_sink:
            self.scheduler.sink.close()


def _promises(scheduler: EmbeddedWorkflowScheduler, tables: str | None) -> None:
    """The freshness promises of the ``datasets:`` section beside the tables, which INPUT_STALE judges inputs by."""
    if tables and isinstance(scheduler.inputs, DbInputs):
        from lineagewire.freshness import load_promises

        scheduler.inputs.promises = load_promises(tables)


class CreateWorkflow(BaseModel):
    """A periodic workflow (cron, or the table's cron/freshness)."""

    table: str = Field(..., max_length=MAX_TABLE, description="Declared materialized table identifier")
    cron: str | None = Field(None, max_length=MAX_CRON,
                             description="5 fields, or 6 with seconds first; default: the table's")
    name: str | None = Field(None, max_length=MAX_NAME)
    time_zone: str | None = Field(None, max_length=MAX_ZONE, description="IANA zone; default: the table's")
    misfire_policy: str | None = Field(None, max_length=20, description="skip | fire_once | catch_up")
    catchup_cap: int | None = Field(None, ge=1, le=MAX_CATCHUP_CAP)
    start: dt.datetime | None = Field(None, description="First nominal time at or after this (default: now)")


class OneTime(BaseModel):
    nominal_time: dt.datetime | None = Field(default=None, description="Default: now")
    name: str | None = Field(default=None, max_length=MAX_NAME)
    force: bool = Field(default=False, description="Override holds: publish the table's HELD refreshes now, or a "
                        "one-time refresh that is never held")


class Resume(BaseModel):
    catch_up: bool = Field(False, description="Fire the paused past (through the misfire policy)")


class SetCron(BaseModel):
    cron: str = Field(..., max_length=MAX_CRON)
    time_zone: str | None = Field(None, max_length=MAX_ZONE)


class Backfill(BaseModel):
    start: dt.datetime
    end: dt.datetime


class Cancel(BaseModel):
    reason: str = Field("", max_length=MAX_REASON)


class _Guard:
    """ASGI middleware: the bearer token of a change is checked before its body is read, and bodies are capped.

    Hand-written because neither Starlette nor FastAPI caps request bodies, and FastAPI parses the body before
    it runs a route's dependencies (so a token dependency alone answers 422 to a malformed unauthenticated body).
    """

    def __init__(self, app: Any, *, token: str, max_body: int = MAX_BODY) -> None:
        self.app = app
        self.token = token.encode()
        self.max_body = max_body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", ())}
        if scope["method"] in _CHANGES:
            scheme, _, given = headers.get("authorization", b"").partition(b" ")
            if scheme.lower() != b"bearer" or not secrets.compare_digest(given.strip(), self.token):
                await self._answer(send, 401, "a valid 'Authorization: Bearer <token>' header is required for "
                                   "changes", [(b"www-authenticate", b"Bearer")])
                return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await self._answer(send, 413, f"request body of {length.decode('latin-1')[:20]} bytes; expected at most "
                               f"{self.max_body}")
            return
        seen = 0

        async def capped() -> Any:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:  # a chunked body without Content-Length
                raise HTTPException(413, f"request body over {self.max_body} bytes; expected at most "
                                    f"{self.max_body}")
            return message

        await self.app(scope, capped, send)

    @staticmethod
    async def _answer(send: Any, status: int, detail: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
        body = json.dumps({"detail": detail}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()), *(extra or [])]})
        await send({"type": "http.response.body", "body": body})


def _validation_detail(exc: RequestValidationError) -> str:
    """One line naming each bad field, what was wrong and (shortened) what was given."""
    parts = []
    for err in exc.errors()[:10]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        got = err.get("input")
        shown = "" if isinstance(got, dict | list) or got is None else f" (got {repr(got)[:60]})"
        parts.append(f"{loc}: {err.get('msg')}{shown}")
    return "; ".join(parts)


def create_app(service: SchedulerService, *, manage_lifecycle: bool = True) -> Any:
    """The FastAPI app; with ``manage_lifecycle`` the scheduler and tracker start and stop with it."""

    @asynccontextmanager
    async def lifespan(_app: Any):  # noqa: ANN202
        if manage_lifecycle:
            service.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                service.stop()

    app = FastAPI(title="lineagewire scheduler", version="1", lifespan=lifespan,
                  description="Refresh workflows for materialized tables. Changes need a bearer token.")
    bearer = HTTPBearer(auto_error=False)
    sched = service.scheduler

    app.add_middleware(_Guard, token=service.token)

    def auth(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:  # noqa: B008
        # _Guard already refused a missing or wrong token; this documents the scheme in OpenAPI.
        if creds is None or not secrets.compare_digest(creds.credentials, service.token):
            raise HTTPException(401, "a valid 'Authorization: Bearer <token>' header is required for changes",
                                headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(SchedulerError)
    async def _scheduler_error(_req: Request, exc: SchedulerError) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "error": type(exc).__name__}, status_code=exc.http_status)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_req: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _validation_detail(exc), "error": "BadRequestError"}, status_code=422)

    @app.get("/health")
    def health() -> dict[str, Any]:
        inputs = service.inputs_tracker
        return {"status": "ok", "instance": sched.options.instance, "fired": sched.fired,
                "status_tracker": None if service.tracker is None else service.tracker.alive,
                "inputs_tracker": None if inputs is None else inputs.alive,
                "inputs_lag": None if inputs is None else inputs.lag}

    @app.get("/tables")
    def tables() -> list[dict[str, Any]]:
        return [t.as_dict() for t in service.catalog]

    @app.get("/tables/{table}/status")
    def table_status(table: str) -> dict[str, Any]:
        return sched.table_status(table).as_dict()

    @app.get("/tables/{table}/inputs")
    def table_inputs(table: str) -> dict[str, Any]:
        return sched.table_inputs(table)

    @app.post("/tables/{table}/refresh", dependencies=[Depends(auth)], status_code=201)
    def refresh_table(table: str, body: OneTime | None = None) -> dict[str, Any]:
        body = body or OneTime(nominal_time=None)
        if body.force:
            released, w = sched.force_refresh(table, nominal_time=body.nominal_time, name=body.name)
            return {"released": [r.as_dict() for r in released], "workflow": w.as_dict() if w else None}
        return sched.create_one_time(table, nominal_time=body.nominal_time, name=body.name,
                                     trigger="MANUAL").as_dict()

    @app.get("/workflows")
    def list_workflows(table: str | None = None) -> list[dict[str, Any]]:
        return [w.as_dict() for w in sched.list_workflows(table=table)]

    @app.post("/workflows", dependencies=[Depends(auth)], status_code=201)
    def create(body: CreateWorkflow) -> dict[str, Any]:
        return sched.create_periodic(body.table, body.cron, name=body.name, time_zone=body.time_zone,
                                     misfire_policy=body.misfire_policy, catchup_cap=body.catchup_cap,
                                     start=body.start).as_dict()

    @app.get("/workflows/{workflow_id}")
    def show(workflow_id: str, limit: int = Query(20, ge=1, le=MAX_LIMIT)) -> dict[str, Any]:  # noqa: B008
        info = sched.get(workflow_id)
        return {**info.as_dict(), "refreshes": [r.as_dict() for r in sched.refreshes(workflow_id=workflow_id,
                                                                                      limit=limit)],
                "table_status": sched.table_status(info.table).as_dict()}

    @app.post("/workflows/{workflow_id}/suspend", dependencies=[Depends(auth)])
    def suspend(workflow_id: str) -> dict[str, Any]:
        return sched.suspend(workflow_id).as_dict()

    @app.post("/workflows/{workflow_id}/resume", dependencies=[Depends(auth)])
    def resume(workflow_id: str, body: Resume | None = None) -> dict[str, Any]:
        return sched.resume(workflow_id, catch_up=(body or Resume(catch_up=False)).catch_up).as_dict()

    @app.put("/workflows/{workflow_id}/cron", dependencies=[Depends(auth)])
    def set_cron(workflow_id: str, body: SetCron) -> dict[str, Any]:
        return sched.set_cron(workflow_id, body.cron, time_zone=body.time_zone).as_dict()

    @app.delete("/workflows/{workflow_id}", dependencies=[Depends(auth)], status_code=204)
    def delete(workflow_id: str) -> None:
        sched.delete(workflow_id)

    @app.post("/workflows/{workflow_id}/backfill", dependencies=[Depends(auth)], status_code=201)
    def backfill(workflow_id: str, body: Backfill) -> list[dict[str, Any]]:
        return [r.as_dict() for r in sched.backfill(workflow_id, body.start, body.end)]

    @app.get("/refreshes")
    def list_refreshes(table: str | None = None, workflow_id: str | None = None,
                       limit: int = Query(50, ge=1, le=MAX_LIMIT)) -> list[Any]:  # noqa: B008
        return [r.as_dict() for r in sched.refreshes(table=table, workflow_id=workflow_id, limit=limit)]

    @app.get("/refreshes/{command_id}")
    def show_refresh(command_id: str) -> dict[str, Any]:
        return sched.refresh(command_id).as_dict()

    @app.post("/refreshes/{command_id}/cancel", dependencies=[Depends(auth)])
    def cancel(command_id: str, body: Cancel | None = None) -> dict[str, Any]:
        return sched.cancel(command_id, (body or Cancel(reason="")).reason).as_dict()

    return app


def serve(service: SchedulerService, *, host: str, port: int, log_level: str = "warning") -> None:
    """Run the service with uvicorn until interrupted (SIGINT/SIGTERM stop it cleanly)."""
    uvicorn = require("uvicorn", "scheduler", "The scheduler service")
    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving the scheduler on %s: reachable from other machines", host)
    uvicorn.run(create_app(service), host=host, port=port, log_level=log_level)
