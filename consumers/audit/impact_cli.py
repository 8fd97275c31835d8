"""``lineagewire impact DATASET``: everything downstream of a dataset or column, from the job registry
(``impact.impact``), as text, JSON or CSV; and ``GET /impact`` of the registry's REST API (``add_impact_route``)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import click

from .registry_cli import db_url_option

__all__ = ["add_impact_route", "impact", "parse_depth", "to_csv"]


def parse_depth(text: str | None) -> int | None:
    """``--depth``: a number of hops (1 to ``MAX_DEPTH``), or ``all`` (also when not given) for no limit."""
    from .impact import MAX_DEPTH

    if text is None or text == "all":
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_DEPTH:
        raise click.BadParameter(f"{text!r}; expected a number of hops (1 to {MAX_DEPTH}) or all",
                                 param_hint="--depth")
    return int(text)


def to_csv(result: dict[str, Any]) -> str:
    """The answer as CSV: a header, then a row per job, dataset and column (``impact.csv_rows``)."""
    from .impact import CSV_COLUMNS, csv_rows

    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(result))
    return out.getvalue()


@click.command("impact")
@click.argument("dataset")
@click.option("--namespace", default=None, help="The OpenLineage namespace; DATASET is then its name.")
@click.option("--column", default=None, help="Only what reads this column of DATASET through column lineage.")
@click.option("--depth", default=None, metavar="N|all", help="At most N hops (default: all).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True)
@db_url_option
def impact(dataset: str, namespace: str | None, column: str | None, depth: str | None, fmt: str,
           db_url: str) -> None:
    """Everything downstream of DATASET (a path, a URI, a table name, or --namespace NS NAME): jobs with their
    owners, datasets and columns with their hops, materialized tables, and which jobs' lineage is incomplete."""
    from .impact import impact as run_impact
    from .impact import render_text
    from .registry_store import open_read_only

    hops = parse_depth(depth)
    engine = open_read_only(db_url)
    try:
        with engine.connect() as conn:
            result = run_impact(conn, dataset, namespace=namespace, column=column, depth=hops)
    finally:
        engine.dispose()
    if fmt == "json":
        click.echo(json.dumps(result, indent=2))
    elif fmt == "csv":
        click.echo(to_csv(result), nl=False)
    else:
        for line in render_text(result):
            click.echo(line)


def add_impact_route(app: Any, store: Any) -> None:
    """``GET /impact?dataset=&namespace=&column=&depth=&format=json|csv`` on the registry's app: ``impact``'s
    answer. The JSON is written by ``json.dumps``, not FastAPI's encoder: an answer at ``depth=all`` can hold
    most of the registry, and the encoder walks every value again (seconds for 100k datasets)."""
    from fastapi import Query
    from fastapi.responses import Response

    from .impact import MAX_DEPTH
    from .impact import impact as run_impact

    # the return is annotated Any: FastAPI reads annotations from this module's globals, and Response is imported
    # here, so that the CLI never imports FastAPI
    @app.get("/impact", tags=["lineage"], response_class=Response, response_model=None)
    def impact_route(dataset: str, namespace: str | None = None, column: str | None = None,
                     depth: int | None = Query(None, ge=1, le=MAX_DEPTH, description="At most this many hops; "
                                               "none: all. `more` says whether the graph goes on beyond them."),
                     format: str = Query("json", pattern="^(json|csv)$")) -> Any:  # noqa: A002 - the API's name
        with store.engine.connect() as conn:
            result = run_impact(conn, dataset, namespace=namespace, column=column or None, depth=depth)
        if format == "csv":
            return Response(to_csv(result), media_type="text/csv; charset=utf-8",
                            headers={"Content-Disposition": 'attachment; filename="impact.csv"'})
        return Response(json.dumps(result), media_type="application/json")
