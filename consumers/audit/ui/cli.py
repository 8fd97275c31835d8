"""``lineagewire ui``: serve the web UI on 127.0.0.1 (another ``--host`` needs ``--token``)."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import click

from lineagewire.cli import env_fallback
from lineagewire.exceptions import ConfigError

from ..registry_cli import db_url_option

log = logging.getLogger(__name__)

__all__ = ["TOKEN_ENV", "ui"]

TOKEN_ENV = "LINEAGEWIRE_UI__TOKEN"
#: the variables of the alerting service's database and of the scheduler's URL, as their own commands read them
ALERTS_DB_ENV = "LINEAGEWIRE_ALERTING__DATABASE"
SCHEDULER_URL_ENV = "LINEAGEWIRE_SCHEDULER__URL"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("ui")
@db_url_option
@click.option("--alerts-db", envvar=ALERTS_DB_ENV, callback=env_fallback(ALERTS_DB_ENV),
              help=f"SQLAlchemy URL of the alerting service's database (its rules file's `database`, env "
                   f"{ALERTS_DB_ENV}); read only.")
@click.option("--scheduler-url", envvar=SCHEDULER_URL_ENV, callback=env_fallback(SCHEDULER_URL_ENV),
              help=f"The scheduler's REST API, for refresh workflows and health (env {SCHEDULER_URL_ENV}).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (loopback by default; any other needs --token).")
@click.option("--port", type=click.IntRange(0, 65535), default=8767, show_default=True)
@click.option("--token", envvar=TOKEN_ENV, callback=env_fallback(TOKEN_ENV),
              help=f"Require this token on every request: 'Authorization: Bearer TOKEN', or basic auth with it as "
                   f"password (env {TOKEN_ENV}; at least 16 characters).")
def ui(db_url: str, alerts_db: str | None, scheduler_url: str | None, host: str, port: int,
       token: str | None) -> None:
    """Read-only web UI: jobs, runs, datasets, the lineage graph, alerts (http://127.0.0.1:8767/)."""
    import uvicorn

    from ..registry_store import RegistryStore
    from .server import build_app

    if token is not None and len(token) < 16:
        raise ConfigError(f"--token is {len(token)} characters; expected at least 16")
    if token is None and not _loopback(host):
        raise ConfigError(f"--host {host!r} is not a loopback address; expected --token (or {TOKEN_ENV}) with it, "
                          "so that the registry is not readable by anyone on the network")
    app = build_app(RegistryStore(db_url, engine=_read_only(db_url)), alerts_db=alerts_db,
                    scheduler_url=scheduler_url, token=token)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"lineagewire ui on http://{shown}:{port}/ui/jobs", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")


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
