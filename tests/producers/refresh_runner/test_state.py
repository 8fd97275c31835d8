"""The completed-commands store under Alembic: a new file gets the declared table, a file the runner wrote
before its store had migrations is adopted with every row readable, and ``:memory:`` is one database for
every thread (the runtime's thread asks, the refresh worker records)."""

from __future__ import annotations

import pathlib
import sqlite3
import threading

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from lineagewire.db import current, head
from lineagewire.producers.refresh_runner import CompletedStore
from lineagewire.producers.refresh_runner.state import STORE

#: the table and the write of the store before it had migrations, verbatim
OLD_TABLE = ("CREATE TABLE IF NOT EXISTS completed (command_id TEXT PRIMARY KEY, attempt INTEGER, "
             "finished_at TEXT, status TEXT)")
OLD_INSERT = "INSERT OR REPLACE INTO completed VALUES (?, ?, ?, ?)"


def _schema_diff(path: pathlib.Path) -> tuple[list[object], str | None]:
    """What the file's tables lack against the code's, and the revision the file is at."""
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            mc = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = [d for d in compare_metadata(mc, STORE.metadata)
                    if not (d[0] == "remove_table" and d[1].name.startswith("lineagewire_"))]
        return diff, current(engine, STORE)
    finally:
        engine.dispose()


def test_a_new_file_gets_the_declared_table_at_the_newest_revision(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "state.db"
    CompletedStore(path).close()
    assert _schema_diff(path) == ([], head(STORE))


def test_a_file_from_before_migrations_is_adopted_with_every_row(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "state.db"
    old = sqlite3.connect(path)
    with old:
        old.execute(OLD_TABLE)
        old.executemany(OLD_INSERT, [(f"c{i}", i, f"2026-11-2{i}T00:00:00+00:00", "COMPLETED") for i in range(5)])
    old.close()
    assert _schema_diff(path) == ([], None)  # today's table is the baseline's, with no version table yet

    store = CompletedStore(path)
    try:
        assert store.count() == 5 and all(store.completed(f"c{i}") for i in range(5)) and not store.completed("c9")
        store.mark("c3", 7, "COMPLETED")  # a command id recorded again replaces its row, as before
        store.mark("c9", 1)
        assert store.count() == 6 and store.completed("c9")
    finally:
        store.close()
    assert _schema_diff(path) == ([], head(STORE))
    with sqlite3.connect(path) as again:
        rows = dict((r[0], r[1:]) for r in again.execute("SELECT * FROM completed"))
    again.close()
    assert rows["c0"] == (0, "2026-11-20T00:00:00+00:00", "COMPLETED") and rows["c3"][0] == 7
    CompletedStore(path).close()  # opened again at the newest revision: nothing to do, nothing lost
    assert _schema_diff(path) == ([], head(STORE))


def test_in_memory_store_is_one_database_for_every_thread() -> None:
    store = CompletedStore(":memory:")
    try:
        worker = threading.Thread(target=store.mark, args=("c1", 1))
        worker.start()
        worker.join(timeout=30)
        assert not worker.is_alive()
        assert store.completed("c1") and store.count() == 1
    finally:
        store.close()
