"""``lineagewire consume openlineage``: the OpenLineage service on the shared consumer runtime.

Its options are ``OpenLineageSettings`` (flags, ``LINEAGEWIRE_OPENLINEAGE__<KEY>``, the ``openlineage:`` section
of the YAML file, defaults); ``lineagewire replay --into openlineage`` reads the same ``url`` and config file.
"""

from __future__ import annotations

from typing import Any

import click
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from lineagewire.cli import setting, settings_of
from lineagewire.config import SettingsBase
from lineagewire.consumers.cli import run_service, runtime_options

__all__ = ["OpenLineageSettings", "openlineage"]


class OpenLineageSettings(SettingsBase):
    """The OpenLineage output: where it sends, and how much it keeps in flight."""

    model_config = SettingsConfigDict(env_prefix="LINEAGEWIRE_OPENLINEAGE__", extra="forbid")
    config_section = "openlineage"
    title = "OpenLineage settings"

    url: str | None = Field(None, description="OpenLineage HTTP backend (e.g. http://127.0.0.1:5000 for Marquez); "
                            "default: the OpenLineage configuration (openlineage.yml, OPENLINEAGE__TRANSPORT__*, "
                            "OPENLINEAGE_URL)")
    openlineage_config: str | None = Field(None, description="an openlineage.yml with the transport (http, kafka, "
                                           "file, console, composite)")
    concurrency: int = Field(32, ge=0, description="HTTP requests in flight (http transport); the events of one job "
                             "are still sent in order; 0: one event at a time")
    max_pending: int = Field(2048, ge=1, description="events handed over and not yet confirmed by the backend "
                             "before consuming waits")


def ol_options(f: Any) -> Any:
    """``--url`` and ``--openlineage-config``, shared with ``replay --into openlineage``."""
    f = setting(OpenLineageSettings, "openlineage_config", "--openlineage-config",
                type=click.Path(dir_okay=False, exists=True), help="An openlineage.yml with the transport.")(f)
    return setting(OpenLineageSettings, "url", "--url", help="OpenLineage HTTP backend.")(f)


@click.command("openlineage")
@ol_options
@setting(OpenLineageSettings, "concurrency", "--concurrency", type=click.IntRange(min=0),
         help="HTTP requests in flight (http transport); the events of one job are still sent in order. "
              "0: one event at a time.")
@setting(OpenLineageSettings, "max_pending", "--max-pending", type=click.IntRange(min=1),
         help="Events handed over and not yet confirmed by the backend before consuming waits.")
@runtime_options
@click.pass_context
def openlineage(ctx: click.Context, url: str | None, openlineage_config: str | None, concurrency: int | None,
                max_pending: int | None, **runtime: Any) -> None:
    """Translate events to OpenLineage RunEvents and send them through an OpenLineage transport."""
    from .handler import OpenLineageHandler, load_openlineage_config

    cfg = settings_of(ctx, OpenLineageSettings, url=url, openlineage_config=openlineage_config,
                      concurrency=concurrency, max_pending=max_pending)
    OpenLineageHandler.prepare_process()
    handler = OpenLineageHandler(config=load_openlineage_config(cfg.openlineage_config, cfg.url),
                                 concurrency=cfg.concurrency, max_pending=cfg.max_pending)
    run_service(ctx, handler, **runtime)
