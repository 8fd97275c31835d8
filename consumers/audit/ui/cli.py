"""``lineagewire ui``: serve the web UI on 127.0.0.1 (another ``--host`` needs ``--token``)."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import click
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from lineagewire.cli import setting, settings_of
from lineagewire.config import SettingsBase
from lineagewire.exceptions import ConfigError

from ..registry_cli import db_url_option

log = logging.getLogger(__name__)

__all__ = ["UISettings", "ui"]


class UISettings(SettingsBase):
    """The web UI's own settings (``ui:``); the databases it reads are their services' settings."""

    model_config = SettingsConfigDict(env_prefix="LINEAGEWIRE_UI__", extra="forbid")
    config_section = "ui"
    title = "UI settings"

    host: str = Field("127.0.0.1", description="address to bind (loopback by default; any other needs a token)")
    port: int = Field(8767, ge=0, le=65535, description="port to bind")
    token: str | None = Field(None, description="require this token on every request: 'Authorization: Bearer "
                              "TOKEN', or basic auth with it as password (at least 16 characters)")
    datasets_file: str | None = Field(None, description="a YAML file with a `datasets:` section of freshness "
                                      "promises (the scheduler's or the alerting file): each dataset's page shows "
                                      "its promise and whether it is kept (default: `alerting.datasets`)")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("ui")
@db_url_option
@click.option("--alerts-db", default=None, help="SQLAlchemy URL of the alerting service's database, read only "
              "[as `alerts --database`: LINEAGEWIRE_ALERTING__DATABASE, YAML alerting.database].")
@click.option("--scheduler-url", default=None, help="The scheduler's REST API, for refresh workflows and health "
              "[as `workflows --url`: LINEAGEWIRE_SCHEDULER__URL, YAML scheduler.url].")
@setting(UISettings, "host", "--host", help="Address to bind (any but loopback needs --token).")
@setting(UISettings, "port", "--port", type=click.IntRange(0, 65535), help="Port to bind.")
@setting(UISettings, "token", "--token", help="Require this token on every request: 'Authorization: Bearer TOKEN', "
         "or basic auth with it as password (at least 16 characters).")
@setting(UISettings, "datasets_file", "--datasets-file", help="YAML file whose `datasets:` section declares freshness "
         "promises (the scheduler's or the alerting file); dataset pages show whether each is kept (default: the "
         "alerting settings' datasets).")
@click.pass_context
def ui(ctx: click.Context, db_url: str, alerts_db: str | None, scheduler_url: str | None, host: str | None,
       port: int | None, token: str | None, datasets_file: str | None) -> None:
    """Read-only web UI: jobs, runs, datasets, the lineage graph, alerts (http://127.0.0.1:8767/)."""
    import uvicorn

    from lineagewire.consumers.alerting.config import AlertingConfig
    from lineagewire.producers.scheduler.cli import SchedulerClientSettings

    from ..registry_store import RegistryStore
    from .server import build_app

    cfg = settings_of(ctx, UISettings, host=host, port=port, token=token, datasets_file=datasets_file)
    host, port, token = cfg.host, cfg.port, cfg.token
    alerting = settings_of(ctx, AlertingConfig, database=alerts_db)
    alerts_db = alerting.database
    promises = _promises(cfg.datasets_file, alerting)
    scheduler_url = settings_of(ctx, SchedulerClientSettings, url=scheduler_url).url
    if token is not None and len(token) < 16:
        raise ConfigError(f"--token is {len(token)} characters; expected at least 16")
    if token is None and not _loopback(host):
        raise ConfigError(f"--host {host!r} is not a loopback address; expected --token (or "
                          "LINEAGEWIRE_UI__TOKEN) with it, so that the registry is not readable by anyone on the "
                          "network")
    app = build_app(RegistryStore(db_url, engine=_read_only(db_url)), alerts_db=alerts_db,
                    scheduler_url=scheduler_url, token=token, promises=promises)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"lineagewire ui on http://{shown}:{port}/ui/jobs", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def _promises(datasets_file: str | None, alerting: Any) -> Any:
    """The freshness promises the UI shows: the datasets file's (a bad one fails here, naming the entry and the
    field), else those the alerting service checks (``alerting.datasets``: the page and the page-out agree), else
    None (no promise section)."""
    if datasets_file is not None:
        from lineagewire.freshness import load_promises

        return load_promises(datasets_file)
    return alerting.promises() if alerting.datasets else None


def _read_only(db_url: str) -> Any:
    """The registry opened read-only: the UI never creates a database or migrates one; a registry whose schema is
    older than this lineagewire's is named with the command that upgrades it."""
    from lineagewire.db import current, head

    from ..registry_model import STORE
    from ..registry_store import open_read_only

    engine = open_read_only(db_url)
    at, newest = current(engine, STORE), head(STORE)
    if at != newest:
        engine.dispose()
        raise ConfigError(f"the registry database {db_url!r} has schema revision {at or 'none'}; this lineagewire's "
                          f"UI reads revision {newest}: run `lineagewire db upgrade --store registry --db-url ...` "
                          "or start `lineagewire consume registry` on it, which upgrades it")
    return engine
