"""The scheduler service: FastAPI over the embedded scheduler, plus the loop and the status tracker.

Reads are open; every change needs ``Authorization: Bearer <token>``. The
OpenAPI docs are at ``/docs``. Errors answer with the scheduler error's
status (404 unknown workflow or table, 422 bad cron or request, 409 wrong
state) and ``{"detail": "<message naming the field, value and expectation>"}``.

Configuration (flags of ``lineagewire scheduler serve`` override these):
``LINEAGEWIRE_SCHEDULER_DB_URL``, ``..._TABLES``, ``..._TOKEN``, ``..._HOST``,
``..._PORT``, ``..._MISFIRE_GRACE``, ``..._MAX_ATTEMPTS``, ``..._RETRY_BACKOFF``,
``..._ABANDON_AFTER``, ``..._LEAD``, ``..._STATUS_GROUP``.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from contextlib import asynccontextmanager
from typing import Any

from lineagewire.config import Settings
from lineagewire.exceptions import require

from .commands import CommandSink, KafkaCommandSink
from .embedded import EmbeddedWorkflowScheduler, SchedulerOptions
from .exceptions import SchedulerError
from .tables import TableCatalog

fastapi = require("fastapi", "scheduler", "The scheduler service")
from fastapi import Depends, FastAPI, HTTPException, Request  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer  # noqa: E402
from pydantic import BaseModel, Field, SecretStr  # noqa: E402
from pydantic_settings import BaseSettings, SettingsConfigDict  # noqa: E402

log = logging.getLogger(__name__)

__all__ = ["SchedulerService", "ServiceConfig", "create_app"]


class ServiceConfig(BaseSettings):
    """Settings of the scheduler service (env ``LINEAGEWIRE_SCHEDULER_<FIELD>``)."""

    model_config = SettingsConfigDict(env_prefix="LINEAGEWIRE_SCHEDULER_", extra="ignore")

    db_url: str = Field("sqlite:///lineagewire-scheduler.db", description="Any SQLAlchemy URL")
    tables: str | None = Field(None, description="YAML file declaring the materialized tables")
    token: SecretStr | None = Field(None, description="Bearer token required for changes")
    host: str = "127.0.0.1"
    port: int = 8765
    misfire_grace: float = 60.0
    max_attempts: int = 3
    retry_backoff: float = 30.0
    abandon_after: float = 600.0
    lead: float = Field(2.0, description="Claim fires this many seconds ahead and hold them, so they go out on time")
    status_group: str = "lineagewire-scheduler-status"

    def options(self) -> SchedulerOptions:
        return SchedulerOptions(misfire_grace=self.misfire_grace, max_attempts=self.max_attempts,
                                retry_backoff=self.retry_backoff, abandon_after=self.abandon_after, lead=self.lead)


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
        self.tracker = None
        if track_status and settings is not None:
            from .status import StatusTracker

            self.tracker = StatusTracker(settings, self.scheduler, group_id=config.status_group)
        if config.token is None:
            self.token = secrets.token_urlsafe(24)
            log.warning("no LINEAGEWIRE_SCHEDULER_TOKEN set; changes need this generated token: %s", self.token)
        else:
            self.token = config.token.get_secret_value()

    def start(self) -> None:
        self.scheduler.start()
        if self.tracker is not None:
            self.tracker.start()

    def stop(self) -> None:
        if self.tracker is not None:
            self.tracker.stop()
        self.scheduler.close()
        if self._own_sink:
            self.scheduler.sink.close()


class CreateWorkflow(BaseModel):
    """A periodic workflow (cron, or the table's cron/freshness) or, with ``once``, a one-time refresh."""

    table: str = Field(..., description="Declared materialized table identifier")
    cron: str | None = Field(None, description="5 fields, or 6 with seconds first; default: the table's")
    name: str | None = None
    time_zone: str | None = Field(None, description="IANA zone; default: the table's")
    misfire_policy: str | None = Field(None, description="skip | fire_once | catch_up")
    catchup_cap: int | None = None
    start: dt.datetime | None = Field(None, description="First nominal time at or after this (default: now)")


class OneTime(BaseModel):
    nominal_time: dt.datetime | None = Field(None, description="Default: now")
    name: str | None = None


class Resume(BaseModel):
    catch_up: bool = Field(False, description="Fire the paused past (through the misfire policy)")


class SetCron(BaseModel):
    cron: str
    time_zone: str | None = None


class Backfill(BaseModel):
    start: dt.datetime
    end: dt.datetime


class Cancel(BaseModel):
    reason: str = ""


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

    def auth(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:  # noqa: B008
        if creds is None or not secrets.compare_digest(creds.credentials, service.token):
            raise HTTPException(401, "a valid 'Authorization: Bearer <token>' header is required for changes",
                                headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(SchedulerError)
    async def _scheduler_error(_req: Request, exc: SchedulerError) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "error": type(exc).__name__}, status_code=exc.http_status)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "instance": sched.options.instance, "fired": sched.fired,
                "status_tracker": None if service.tracker is None else service.tracker.alive}

    @app.get("/tables")
    def tables() -> list[dict[str, Any]]:
        return [t.as_dict() for t in service.catalog]

    @app.get("/tables/{table}/status")
    def table_status(table: str) -> dict[str, Any]:
        return sched.table_status(table).as_dict()

    @app.post("/tables/{table}/refresh", dependencies=[Depends(auth)], status_code=201)
    def refresh_table(table: str, body: OneTime | None = None) -> dict[str, Any]:
        body = body or OneTime(nominal_time=None)
        return sched.create_one_time(table, nominal_time=body.nominal_time, name=body.name).as_dict()

    @app.get("/workflows")
    def list_workflows(table: str | None = None) -> list[dict[str, Any]]:
        return [w.as_dict() for w in sched.list_workflows(table=table)]

    @app.post("/workflows", dependencies=[Depends(auth)], status_code=201)
    def create(body: CreateWorkflow) -> dict[str, Any]:
        return sched.create_periodic(body.table, body.cron, name=body.name, time_zone=body.time_zone,
                                     misfire_policy=body.misfire_policy, catchup_cap=body.catchup_cap,
                                     start=body.start).as_dict()

    @app.get("/workflows/{workflow_id}")
    def show(workflow_id: str, limit: int = 20) -> dict[str, Any]:
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
    def list_refreshes(table: str | None = None, workflow_id: str | None = None, limit: int = 50) -> list[Any]:
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
