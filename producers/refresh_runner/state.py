"""Which command ids this runner completed, in a small SQLite file, so a duplicate command is skipped.

The table is a store like the services' (``lineagewire.db``): declared here, its history in ``migrations/``
beside this code, brought up to date when the runner opens the file. A file written before the store had
migrations (its one table, no version table) is adopted at the first revision, rows kept.
"""

from __future__ import annotations

import datetime as dt
import os
import threading

import sqlalchemy as sa

from lineagewire.db import Store, upgrade, upsert

__all__ = ["STORE", "CompletedStore", "completed_t"]

metadata = sa.MetaData()

#: one row per command id this runner finished (the table the runner has always written, column for column)
completed_t = sa.Table(
    "completed", metadata,
    # nullable as SQLite made it: a TEXT PRIMARY KEY without NOT NULL (the runner never writes a null id)
    sa.Column("command_id", sa.Text, primary_key=True, nullable=True),
    sa.Column("attempt", sa.Integer),
    sa.Column("finished_at", sa.Text),  # ISO 8601, UTC
    sa.Column("status", sa.Text),
)

#: the table above and its migration history (``migrations/`` beside this package's code)
STORE = Store("refresh_runner", metadata, "lineagewire.producers.refresh_runner", baseline="0001")


class CompletedStore:
    """``command_id -> (attempt, finished_at, status)``; ``path=':memory:'`` keeps it in memory (tests).

    Errors of the file (locked, unreadable) are ``sqlalchemy.exc.SQLAlchemyError``."""

    def __init__(self, path: str | os.PathLike[str] = "refresh-runner-state.db") -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        if self.path == ":memory:":
            # One connection for every thread, or each thread would see a database of its own.
            self._engine = sa.create_engine("sqlite://", poolclass=sa.StaticPool,
                                            connect_args={"check_same_thread": False})
        else:
            self._engine = sa.create_engine(sa.URL.create("sqlite", database=self.path), connect_args={"timeout": 30})
        upgrade(self._engine, STORE)

    def completed(self, command_id: str) -> bool:
        with self._lock, self._engine.connect() as conn:
            row = conn.execute(sa.select(sa.literal(1)).where(completed_t.c.command_id == command_id)).first()
        return row is not None

    def mark(self, command_id: str, attempt: int, status: str = "COMPLETED") -> None:
        row = {"command_id": command_id, "attempt": attempt, "finished_at": dt.datetime.now(dt.UTC).isoformat(),
               "status": status}
        with self._lock, self._engine.begin() as conn:
            upsert(conn, completed_t, [row], keys=["command_id"])

    def count(self) -> int:
        with self._lock, self._engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(completed_t)).scalar_one())

    def close(self) -> None:
        with self._lock:
            self._engine.dispose()
