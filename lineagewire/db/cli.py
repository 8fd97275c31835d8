"""``lineagewire db upgrade|current``: the stores' schema migrations, for operators.

The services upgrade their own database at start; these commands let an operator do it ahead of a
deployment (one upgrade, then every instance starts on the new schema) or see where a database is.
"""

from __future__ import annotations

import importlib

import click
import sqlalchemy as sa

from lineagewire.exceptions import ConfigError

from .migrate import Store, current, head, upgrade

#: store name -> "module:attribute" of its ``Store`` (imported by name: the core knows no service)
STORES: dict[str, str] = {
    "registry": "lineagewire.consumers.audit.registry_model:STORE",
    "alerting": "lineagewire.consumers.alerting.store:STORE",
    "scheduler": "lineagewire.producers.scheduler.store:STORE",
}

_store_option = click.option("--store", "store_name", required=True, type=click.Choice(sorted(STORES)),
                             help="Which service's tables.")
_url_option = click.option("--db-url", required=True, envvar="LINEAGEWIRE_DB_URL",
                           help="SQLAlchemy URL of the database (e.g. sqlite:///registry.db, "
                                "postgresql+psycopg://user@host/db).")


def load_store(name: str) -> Store:
    module, attr = STORES[name].split(":")
    return getattr(importlib.import_module(module), attr)


def _engine(url: str) -> sa.Engine:
    try:
        return sa.create_engine(url)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
        raise ConfigError(f"--db-url {url!r}: {exc}; expected an SQLAlchemy URL such as sqlite:///registry.db "
                          "or postgresql+psycopg://user@host/db") from exc


@click.group()
def db() -> None:
    """Schema migrations of the registry, alerting and scheduler databases."""


@db.command("upgrade")
@_store_option
@_url_option
@click.option("--revision", default="head", show_default=True, help="Upgrade to this revision.")
def upgrade_command(store_name: str, db_url: str, revision: str) -> None:
    """Bring a database to the newest schema (a database made before migrations existed is adopted)."""
    store = load_store(store_name)
    engine = _engine(db_url)
    try:
        before = upgrade(engine, store, revision)
        after = current(engine, store)
    finally:
        engine.dispose()
    click.echo(f"{store.name}: {before or 'no revision'} -> {after}" if before != after
               else f"{store.name}: already at {after}")


@db.command("current")
@_store_option
@_url_option
def current_command(store_name: str, db_url: str) -> None:
    """The revision a database is at, and the newest this lineagewire knows."""
    store = load_store(store_name)
    engine = _engine(db_url)
    try:
        rev = current(engine, store)
    except sa.exc.SQLAlchemyError as exc:
        raise ConfigError(f"--db-url {db_url!r}: cannot read its {store.name} revision: {exc}") from exc
    finally:
        engine.dispose()
    newest = head(store)
    state = "up to date" if rev == newest else f"behind: run `lineagewire db upgrade --store {store.name}`"
    click.echo(f"{store.name}: {rev or 'no revision'} (newest {newest}, {state})")
