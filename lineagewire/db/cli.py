"""``lineagewire db upgrade|current``: the stores' schema migrations, for operators.

The services upgrade their own database at start; these commands let an operator do it ahead of a
deployment (one upgrade, then every instance starts on the new schema) or see where a database is.
``--db-url`` defaults to the database the store's own service reads (``DB_SETTING``: its variable, its old
name, its key of the YAML file).
"""

from __future__ import annotations

import importlib

import click
import sqlalchemy as sa

from lineagewire.config import renamed
from lineagewire.exceptions import ConfigError

from .migrate import Store, current, head, upgrade

#: store name -> "module:attribute" of its ``Store`` (imported by name: the core knows no service)
STORES: dict[str, str] = {
    "registry": "lineagewire.consumers.audit.registry_model:STORE",
    "alerting": "lineagewire.consumers.alerting.store:STORE",
    "scheduler": "lineagewire.producers.scheduler.store:STORE",
}

#: store name -> ("module:attribute" of its service's settings model, the key of its database); ``--db-url``'s
#: default when the service's settings name one (its variable or YAML key; the services' own defaults do not count)
DB_SETTING: dict[str, tuple[str, str]] = {
    "registry": ("lineagewire.consumers.audit.registry_cli:RegistrySettings", "db_url"),
    "alerting": ("lineagewire.consumers.alerting.config:AlertingConfig", "database"),
    "scheduler": ("lineagewire.producers.scheduler.settings:ServiceConfig", "db_url"),
}
#: store name -> the variable its service reads its database from
DB_URL_ENV: dict[str, str] = {store: f"LINEAGEWIRE_{store.upper()}__{key.upper()}"
                              for store, (_, key) in DB_SETTING.items()}
#: the one variable these commands read before, whatever the store (deprecated: it names no store)
OLD_DB_URL_ENV = "LINEAGEWIRE_DB_URL"

_store_option = click.option("--store", "store_name", required=True, type=click.Choice(sorted(STORES)),
                             help="Which service's tables.")
_url_option = click.option("--db-url", default=None,
                           help="SQLAlchemy URL of the database (e.g. sqlite:///registry.db, "
                                "postgresql+psycopg://user@host/db) [the store's service's: "
                                f"{', '.join(DB_URL_ENV.values())}; YAML "
                                f"{', '.join(f'{s}.{k}' for s, (_, k) in DB_SETTING.items())}].")


def db_url_of(ctx: click.Context, store_name: str, db_url: str | None) -> str:
    """``--db-url``, else the database the store's service reads when its settings name one, else the deprecated
    ``LINEAGEWIRE_DB_URL``."""
    from lineagewire.cli import settings_of

    env = DB_URL_ENV[store_name]
    target, key = DB_SETTING[store_name]
    module, attr = target.split(":")
    settings = settings_of(ctx, getattr(importlib.import_module(module), attr), **{key: db_url})
    found = getattr(settings, key) if key in settings.model_fields_set else renamed(OLD_DB_URL_ENV, env)
    if not found:
        raise click.UsageError(f"no database for --store {store_name}: expected --db-url or {env}")
    return found


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
@click.pass_context
def upgrade_command(ctx: click.Context, store_name: str, db_url: str | None, revision: str) -> None:
    """Bring a database to the newest schema (a database made before migrations existed is adopted)."""
    db_url = db_url_of(ctx, store_name, db_url)
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
@click.pass_context
def current_command(ctx: click.Context, store_name: str, db_url: str | None) -> None:
    """The revision a database is at, and the newest this lineagewire knows."""
    db_url = db_url_of(ctx, store_name, db_url)
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
