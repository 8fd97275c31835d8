"""``lineagewire consume openlineage``: the OpenLineage service on the shared consumer runtime."""

from __future__ import annotations

from typing import Any

import click

from lineagewire.consumers.cli import run_service, runtime_options

__all__ = ["openlineage"]


@click.command("openlineage")
@click.option("--url", default=None,
              help="OpenLineage HTTP backend (e.g. http://127.0.0.1:5000 for Marquez). Default: the OpenLineage "
                   "configuration (openlineage.yml, OPENLINEAGE__TRANSPORT__*, OPENLINEAGE_URL).")
@click.option("--openlineage-config", "ol_config", type=click.Path(dir_okay=False, exists=True), default=None,
              help="An openlineage.yml with the transport (http, kafka, file, console, composite).")
@click.option("--concurrency", type=click.IntRange(min=0), default=32, show_default=True,
              help="HTTP requests in flight (http transport); the events of one job are still sent in order. "
                   "0: one event at a time.")
@click.option("--max-pending", type=click.IntRange(min=1), default=2048, show_default=True,
              help="Events handed over and not yet confirmed by the backend before consuming waits.")
@runtime_options
@click.pass_context
def openlineage(ctx: click.Context, url: str | None, ol_config: str | None, concurrency: int, max_pending: int,
                **runtime: Any) -> None:
    """Translate events to OpenLineage RunEvents and send them through an OpenLineage transport."""
    from .handler import OpenLineageHandler, load_openlineage_config

    OpenLineageHandler.prepare_process()
    handler = OpenLineageHandler(config=load_openlineage_config(ol_config, url), concurrency=concurrency,
                                 max_pending=max_pending)
    run_service(ctx, handler, **runtime)
