"""The UI's pages of the scheduler's materialized tables (issue 41): ``/ui/tables`` lists them, and
``/ui/tables/{table}`` shows a table's health, its inputs (each with its last write, its writer's run and its
health) and why a refresh of it is held, all from the scheduler's REST API (``--scheduler-url``), with links into
the registry (the inputs' datasets, the writers' runs, the table's refresh job).

A router of its own, included by ``routes.router``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from .. import registry_model as m
from ..registry_query import NotFoundError

__all__ = ["HEALTH", "router"]

router = APIRouter()

#: an input's health (the scheduler's ``InputState.health``) -> (the words shown, the colour's class)
HEALTH = {"ok": ("ok", "h-ok"), "failed": ("failed", "h-bad"), "running": ("running", "s-RUNNING"),
          "breaking": ("breaking change", "h-bad"), "stale": ("stale", "h-bad"),
          "never_written": ("never written", "s-NONE")}


def _no_scheduler() -> NotFoundError:
    return NotFoundError("no scheduler was given: start the UI with --scheduler-url (LINEAGEWIRE_SCHEDULER__URL) "
                         "to see materialized tables, their inputs and held refreshes")


@router.get("/ui/tables", response_class=HTMLResponse, tags=["ui"])
def tables(request: Request) -> HTMLResponse:
    ui = request.app.state.lineagewire_ui
    if not ui.scheduler.enabled:
        raise _no_scheduler()
    return ui.page(request, "tables.html", title="Materialized tables", answer=ui.scheduler.tables())


@router.get("/ui/tables/{table}", response_class=HTMLResponse, tags=["ui"])
def table(request: Request, table: str) -> HTMLResponse:
    ui = request.app.state.lineagewire_ui
    if not ui.scheduler.enabled:
        raise _no_scheduler()
    answers = ui.scheduler.table(table)
    if answers["status"].missing and answers["inputs"].missing:
        raise NotFoundError(f"table {table!r}: {answers['status'].error}; expected a table the scheduler declares "
                            "(see /ui/tables)")
    inputs = answers["inputs"].data or {}
    for x in inputs.get("inputs") or []:
        x["health_text"], x["health_class"] = HEALTH.get(x.get("health"), (x.get("health") or "unknown", "s-NONE"))
    return ui.page(request, "table.html", title=table, table=table, status=answers["status"], inputs=answers["inputs"],
                   jobs=ui.read(_refresh_jobs, table))


def _refresh_jobs(conn: sa.Connection, table: str) -> list[dict[str, Any]]:
    """The registry's jobs that refresh ``table`` (the refresh runner names its runs ``refresh <table>``)."""
    j = m.jobs.c
    return [{"id": x.id, "namespace": x.namespace, "name": x.name} for x in conn.execute(
        sa.select(j.id, j.namespace, j.name).where(j.name == f"refresh {table}").order_by(j.namespace))]
