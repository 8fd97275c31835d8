"""The stores' schema migrations, on SQLite and on a real PostgreSQL.

A user who upgrades lineagewire with a year of runs in the registry needs the schema migrated, not
recreated: a database made before migrations existed (today's ``create_all`` schema, the baseline
revision) and full of rows is opened by the new code the way each service opens it, and every row of
every table is still there, column for column.
"""

from __future__ import annotations

import datetime as dt
import json
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner

from lineagewire.cli import main_group
from lineagewire.db import Store, current, head, upgrade
from lineagewire.db.cli import STORES, load_store
from tests.postgres import LocalPostgres


def _open_registry(url: str) -> None:
    from lineagewire.consumers.audit.registry_store import engine_for

    engine_for(url).dispose()


def _open_alerting(url: str) -> None:
    from lineagewire.consumers.alerting.store import AlertStore

    AlertStore(url).close()


def _open_scheduler(url: str) -> None:
    from lineagewire.producers.scheduler.embedded import EmbeddedWorkflowScheduler
    from lineagewire.producers.scheduler.tables import TableCatalog

    sched = EmbeddedWorkflowScheduler(TableCatalog({}), url=url)
    sched.open()
    sched.close()


#: how each service opens its database at start (and so upgrades it)
OPEN: dict[str, Callable[[str], None]] = {"registry": _open_registry, "alerting": _open_alerting,
                                          "scheduler": _open_scheduler}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
    else:
        pg: LocalPostgres = request.getfixturevalue("postgres")
        yield pg.new_database()


def _value(col: sa.Column[Any], i: int, parents: dict[str, list[dict[str, Any]]]) -> Any:
    for fk in col.foreign_keys:
        rows = parents[fk.column.table.name]
        return rows[i % len(rows)][fk.column.name]
    t = col.type
    if isinstance(t, sa.Boolean):
        return i % 2 == 0
    if isinstance(t, sa.Integer):  # BigInteger too
        return 1_000_000_000_000 + i if isinstance(t, sa.BigInteger) else i + 1
    if isinstance(t, sa.Float):
        return i + 0.5
    if isinstance(t, sa.DateTime):
        return dt.datetime(2025, 11, 26, 12, tzinfo=dt.UTC) + dt.timedelta(minutes=i)
    if isinstance(t, sa.JSON):
        return {"row": i, "labels": {"job": f"j{i}"}, "list": [i, "é"]}
    if isinstance(t, sa.LargeBinary):
        return bytes([i % 256]) * 8
    length = getattr(t, "length", None) or 64
    return f"{col.name}-{i}-é"[:length]


def _fill(engine: sa.Engine, rows_per_table: int = 25) -> dict[str, list[dict[str, Any]]]:
    """Rows in every table of the database as it is (reflected), parents before children."""
    meta = sa.MetaData()
    meta.reflect(engine)
    made: dict[str, list[dict[str, Any]]] = {}
    with engine.begin() as conn:
        for table in meta.sorted_tables:
            if table.name.startswith("lineagewire_"):
                continue
            rows = [{c.name: _value(c, i, made) for c in table.columns} for i in range(rows_per_table)]
            conn.execute(table.insert(), rows)
            made[table.name] = rows
    return made


def _dump(engine: sa.Engine, tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Every row of ``tables``, only their original columns, in a comparable form."""
    meta = sa.MetaData()
    meta.reflect(engine)
    out: dict[str, list[str]] = {}
    with engine.connect() as conn:
        for name, rows in tables.items():
            table = meta.tables[name]
            cols = [table.c[c] for c in rows[0]]
            out[name] = sorted(json.dumps([_plain(v) for v in r], default=str)
                               for r in conn.execute(sa.select(*cols)))
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is None:
        return v.replace(tzinfo=dt.UTC)  # SQLite gives naive times back
    if isinstance(v, str) and v.startswith("{"):
        return json.loads(v)
    return v


@pytest.mark.parametrize("name", sorted(STORES))
def test_migrations_build_exactly_the_tables_the_code_declares(name: str, db_url: str) -> None:
    store = load_store(name)
    engine = sa.create_engine(db_url)
    try:
        upgrade(engine, store)
        with engine.connect() as conn:
            mc = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = [d for d in compare_metadata(mc, store.metadata)
                    if not (d[0] == "remove_table" and d[1].name.startswith("lineagewire_"))]
        assert diff == [], f"{name}: the code's tables differ from what its migrations make: {diff}"
        assert current(engine, store) == head(store)
    finally:
        engine.dispose()


@pytest.mark.parametrize("name", sorted(STORES))
def test_a_database_from_before_migrations_is_upgraded_with_every_row_kept(name: str, db_url: str) -> None:
    store: Store = load_store(name)
    engine = sa.create_engine(db_url)
    try:
        # Today's schema as the code before migrations made it: the baseline, with no version table.
        upgrade(engine, store, store.baseline)
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE {store.version_table}"))
        assert current(engine, store) is None
        baseline_tables = set(sa.inspect(engine).get_table_names())
        rows = _fill(engine)
        assert set(rows) == baseline_tables and all(len(r) == 25 for r in rows.values())
        assert baseline_tables and baseline_tables <= set(store.metadata.tables)  # later revisions only add
        before = _dump(engine, rows)

        OPEN[name](db_url)  # the service starts on it: migrated at start

        assert current(engine, store) == head(store)
        assert _dump(engine, rows) == before
    finally:
        engine.dispose()


def test_db_commands_report_and_upgrade(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    runner = CliRunner()
    newest = head(load_store("registry"))
    res = runner.invoke(main_group, ["db", "current", "--store", "registry", "--db-url", url])
    assert res.exit_code == 0 and f"registry: no revision (newest {newest}, behind" in res.output
    res = runner.invoke(main_group, ["db", "upgrade", "--store", "registry", "--db-url", url])
    assert res.exit_code == 0 and res.output.strip() == f"registry: no revision -> {newest}"
    res = runner.invoke(main_group, ["db", "upgrade", "--store", "registry", "--db-url", url])
    assert res.exit_code == 0 and res.output.strip() == f"registry: already at {newest}"
    res = runner.invoke(main_group, ["db", "current", "--store", "registry", "--db-url", url])
    assert res.output.strip() == f"registry: {newest} (newest {newest}, up to date)"


def test_alerting_0002_fills_the_group_key_of_outbox_rows_from_before(tmp_path: pathlib.Path) -> None:
    """Rows written before 0002 get their group key from their payload, so a group's rows go out in order."""
    url = f"sqlite:///{tmp_path / 'alerts.db'}"
    store = load_store("alerting")
    engine = sa.create_engine(url)
    try:
        upgrade(engine, store, "0001")
        now = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO alerting_outbox (channel, payload, created_at, state, attempts, "
                                 "next_attempt_at) VALUES (:ch, :p, :t, 'pending', 0, :t)"),
                         [{"ch": "hook", "p": json.dumps({"group_key": f"g{i}", "alerts": []}), "t": now}
                          for i in range(3)] + [{"ch": "hook", "p": json.dumps({"alerts": []}), "t": now}])
        upgrade(engine, store)
        with engine.connect() as conn:
            keys = conn.execute(sa.text("SELECT group_key FROM alerting_outbox ORDER BY id")).scalars().all()
        assert keys == ["g0", "g1", "g2", None]
    finally:
        engine.dispose()
