"""The web UI's impact page: ``/ui/impact?dataset=ID[&column=NAME][&depth=N]`` and its CSV download
(``/ui/impact.csv``, the same query), over ``impact.impact``; linked from the dataset page.

A router of its own, included by ``routes.router``. A page at ``depth`` all can list most of the registry, so
it shows every job and materialized table, and at most ``SHOWN`` datasets and columns (nearest first), saying how
many more the CSV holds.
"""

from __future__ import annotations

from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from .. import registry_model as m
from ..impact import MAX_DEPTH, impact
from ..impact_cli import to_csv
from ..registry_query import NotFoundError

__all__ = ["SHOWN", "router"]

#: datasets and columns a page lists (the CSV holds them all)
SHOWN = 500

router = APIRouter()


def _answer(request: Request, dataset: int, column: str | None, depth: int | None) -> dict[str, Any]:
    """``impact`` of the dataset with id ``dataset``, through the UI's connection."""
    ui = request.app.state.lineagewire_ui
    with ui.store.engine.connect() as conn:
        d = m.datasets.c
        row = conn.execute(sa.select(d.namespace, d.name).where(d.id == dataset)).first()
        if row is None:
            raise NotFoundError(f"dataset id {dataset} is not in the registry; expected the id of a dataset "
                                "(see the search page)")
        result: dict[str, Any] = impact(conn, row[1], namespace=row[0], column=column or None, depth=depth)
    return result


Depth = Annotated[int | None, Query(ge=1, le=MAX_DEPTH)]


@router.get("/ui/impact", response_class=HTMLResponse, tags=["ui"])
def impact_page(request: Request, dataset: int, column: str | None = None, depth: Depth = None) -> HTMLResponse:
    result = _answer(request, dataset, column, depth)
    query = {"dataset": dataset, **({"column": column} if column else {}), **({"depth": depth} if depth else {})}
    ui = request.app.state.lineagewire_ui
    root = result["root"]
    page: HTMLResponse = ui.page(request, "impact.html", title=f"Impact of {root['name']}", result=result,
                                 query=query, shown=SHOWN, dataset_id=dataset, column=column, depth=depth)
    return page


@router.get("/ui/impact.csv", tags=["ui"])
def impact_csv(request: Request, dataset: int, column: str | None = None, depth: Depth = None) -> Response:
    result = _answer(request, dataset, column, depth)
    name = f"impact-{dataset}" + (f"-{column}" if column else "")
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)
    return Response(to_csv(result), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{safe}.csv"'})
