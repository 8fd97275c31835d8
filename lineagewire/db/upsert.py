"""``INSERT ... ON CONFLICT`` for the stores, on SQLite and PostgreSQL (other databases: row by row)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

__all__ = ["insert_ignore", "upsert"]

#: rows per statement: well under SQLite's bound-parameter limit for the stores' widest tables
_CHUNK = 500


def _insert(conn: sa.Connection, table: sa.Table) -> Any:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    if conn.dialect.name == "sqlite":
        return sqlite.insert(table)
    return None


def insert_ignore(conn: sa.Connection, table: sa.Table, rows: Sequence[dict[str, Any]], *,
                  returning: sa.Column[Any] | None = None) -> set[Any]:
    """Insert ``rows``, skipping those whose primary or unique key exists; with ``returning``, the values of
    that column for the rows this call inserted (the others existed before)."""
    if not rows:
        return set()
    stmt = _insert(conn, table)
    got: set[Any] = set()
    if stmt is None:
        for row in rows:
            try:
                with conn.begin_nested():
                    conn.execute(table.insert(), row)
            except sa.exc.IntegrityError:
                continue
            if returning is not None:
                got.add(row[returning.name])
        return got
    stmt = stmt.on_conflict_do_nothing()
    if returning is not None:
        stmt = stmt.returning(returning)
    for i in range(0, len(rows), _CHUNK):
        res = conn.execute(stmt, list(rows[i:i + _CHUNK]))
        if returning is not None:
            got.update(res.scalars().all())
    return got


def upsert(conn: sa.Connection, table: sa.Table, rows: Sequence[dict[str, Any]], *, keys: Sequence[str]) -> None:
    """Insert ``rows``, or update the non-key columns they name where a row with the same ``keys`` exists."""
    if not rows:
        return
    stmt = _insert(conn, table)
    cols = [c for c in rows[0] if c not in keys]
    if stmt is None:
        key_cols = [table.c[k] for k in keys]
        for row in rows:
            found = conn.execute(sa.select(*key_cols).where(*(table.c[k] == row[k] for k in keys))).first()
            if found is None:
                conn.execute(table.insert(), row)
            elif cols:
                conn.execute(table.update().where(*(table.c[k] == row[k] for k in keys)).values(
                    {c: row[c] for c in cols}))
        return
    stmt = (stmt.on_conflict_do_update(index_elements=list(keys), set_={c: stmt.excluded[c] for c in cols})
            if cols else stmt.on_conflict_do_nothing(index_elements=list(keys)))
    for i in range(0, len(rows), _CHUNK):
        conn.execute(stmt, list(rows[i:i + _CHUNK]))
