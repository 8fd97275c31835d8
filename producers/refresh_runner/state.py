"""Which command ids this runner completed, in a small SQLite file, so a duplicate command is skipped."""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import threading

__all__ = ["CompletedStore"]


class CompletedStore:
    """``command_id -> (attempt, finished_at, status)``; ``path=':memory:'`` keeps it in memory (tests)."""

    def __init__(self, path: str | os.PathLike[str] = "refresh-runner-state.db") -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock, self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS completed (command_id TEXT PRIMARY KEY, attempt INTEGER, "
                             "finished_at TEXT, status TEXT)")

    def completed(self, command_id: str) -> bool:
        with self._lock:
            row = self._db.execute("SELECT 1 FROM completed WHERE command_id = ?", (command_id,)).fetchone()
        return row is not None

    def mark(self, command_id: str, attempt: int, status: str = "COMPLETED") -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO completed VALUES (?, ?, ?, ?)",
                             (command_id, attempt, dt.datetime.now(dt.UTC).isoformat(), status))

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM completed").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
