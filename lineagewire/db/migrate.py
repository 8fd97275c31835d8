"""Alembic, applied by the services themselves; see the package docstring."""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass
from importlib.resources import files

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from lineagewire.exceptions import ConfigError

log = logging.getLogger(__name__)

__all__ = ["Store", "current", "head", "run_env", "upgrade"]

#: a racing instance's DDL can still fail on SQLite (no advisory lock there): try again after it finished
_ATTEMPTS = 3


@dataclass(frozen=True)
class Store:
    """One service's tables: ``metadata``, the package whose ``migrations/`` folder holds their history,
    and ``baseline``, the first revision: the schema every database made before migrations existed has."""

    name: str
    metadata: sa.MetaData
    package: str
    baseline: str

    @property
    def version_table(self) -> str:
        return f"lineagewire_{self.name}_version"

    def config(self, connection: sa.Connection | None = None) -> Config:
        cfg = Config()
        cfg.set_main_option("script_location", str(files(self.package) / "migrations"))
        cfg.attributes["store"] = self
        cfg.attributes["connection"] = connection
        return cfg


def run_env() -> None:
    """The body of every store's ``migrations/env.py``: run on the connection ``upgrade`` passes in."""
    from alembic import context

    store: Store | None = context.config.attributes.get("store")
    connection: sa.Connection | None = context.config.attributes.get("connection")
    if store is None or connection is None:
        raise ConfigError("lineagewire's migrations run through `lineagewire db upgrade --store NAME --db-url URL` "
                          "(or a service's start), not through the alembic command")
    # render_as_batch: SQLite cannot ALTER most things; Alembic's batch mode copies the table instead.
    context.configure(connection=connection, target_metadata=store.metadata, version_table=store.version_table,
                      render_as_batch=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def head(store: Store) -> str:
    """The newest revision of ``store``'s history."""
    rev = ScriptDirectory.from_config(store.config()).get_current_head()
    assert rev is not None, f"{store.name}: no migrations"
    return rev


def current(engine: sa.Engine, store: Store) -> str | None:
    """The revision the database is at; None when it has none (new, or made before migrations existed)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn, opts={"version_table": store.version_table}).get_current_revision()


def upgrade(engine: sa.Engine, store: Store, revision: str = "head") -> str | None:
    """Bring the database to ``revision``; return the revision it was at before (None: new or pre-migration)."""
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            return _upgrade_once(engine, store, revision)
        except (sa.exc.OperationalError, sa.exc.ProgrammingError, sa.exc.IntegrityError) as exc:
            if attempt == _ATTEMPTS or engine.dialect.name != "sqlite":
                where = engine.url.render_as_string(hide_password=True)
                raise ConfigError(f"{store.name} database {where}: cannot upgrade its schema to {revision}: "
                                  f"{getattr(exc, 'orig', exc)}") from exc
            log.info("%s: schema upgrade raced another instance (%s); trying again", store.name, exc.orig)
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


def _upgrade_once(engine: sa.Engine, store: Store, revision: str) -> str | None:
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Transactional DDL plus this lock: a second instance waits, then finds the schema up to date.
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"),
                         {"k": zlib.crc32(store.version_table.encode())})
        before = MigrationContext.configure(conn, opts={"version_table": store.version_table}).get_current_revision()
        cfg = store.config(conn)
        if before is None and set(sa.inspect(conn).get_table_names()) & set(store.metadata.tables):
            log.info("%s: tables made before migrations existed; stamping them at %s", store.name, store.baseline)
            command.stamp(cfg, store.baseline)
        command.upgrade(cfg, revision)
        after = MigrationContext.configure(conn, opts={"version_table": store.version_table}).get_current_revision()
    if after != before:
        log.info("%s: schema upgraded from %s to %s", store.name, before or "nothing", after)
    return before
