"""What a materialized table's query reads: its tables, and of each the columns, from the SQL alone (pure).

Parsed with sqlglot's Spark dialect. A table name is normalised the way the emitter names catalog tables in
its ``TABLE`` symlinks (``db.table``, lower case; ``producers/spark/lineage/context.py``): the catalog part
is dropped (the symlink's namespace carries it) and an unqualified name is in ``default``, Spark's current
database unless a job says otherwise.

Columns are resolved per SELECT scope (sqlglot's ``traverse_scope``: CTEs and subqueries read what their own
scope reads): a qualified column belongs to the table its qualifier names; an unqualified one to the scope's
only table. Where that is not known (``*``, an unqualified column with two tables in scope, a table-valued
function) the table's columns are **unknown**: ``None``, which readers of the answer take as "reads every
column", never as "reads none". Struct fields are dotted paths (``s.x``).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from lineagewire.exceptions import MissingExtraError

from .exceptions import SchedulerError

__all__ = ["QueryInputsError", "normalize_table", "query_reads", "query_tables"]

#: the session catalog's name, which the emitter's symlinks leave out
_SESSION_CATALOG = "spark_catalog"


class QueryInputsError(SchedulerError):
    """A table's query cannot be parsed, or reads no table (``trigger: upstream`` needs at least one)."""

    http_status = 422


def _sqlglot() -> Any:
    try:
        import sqlglot
    except ImportError as exc:  # depends on the installed extras
        raise MissingExtraError("sqlglot", "scheduler", "Resolving a table's inputs from its query") from exc
    return sqlglot


def normalize_table(name: str) -> str:
    """``db.table`` (lower case) of a table name as a query or a symlink writes it: ``orders`` is
    ``default.orders``, ``spark_catalog.db.t`` and ``iceberg_cat.db.t`` are ``db.t``."""
    parts = [p.strip("`").lower() for p in name.split(".") if p]
    if len(parts) == 1:
        return f"default.{parts[0]}"
    return ".".join(parts[-2:])


def query_reads(query: str) -> dict[str, frozenset[str] | None]:
    """Table (normalised) -> the columns the query reads of it, None when they are unknown.

    Raises ``QueryInputsError`` naming the parser's complaint when the query is not Spark SQL.
    """
    return dict(_reads(query))


@functools.lru_cache(maxsize=1024)
def _reads(query: str) -> tuple[tuple[str, frozenset[str] | None], ...]:
    # cached: the scheduler asks for the same tables' queries on every round, and parsing takes milliseconds
    sqlglot = _sqlglot()
    from sqlglot import exp
    from sqlglot.optimizer.scope import traverse_scope

    try:
        tree = sqlglot.parse_one(query, read="spark")
        scopes = traverse_scope(tree)
    except sqlglot.errors.SqlglotError as exc:
        why = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines()[0]  # sqlglot underlines with terminal colours
        raise QueryInputsError(f"query {_clip(query)!r} is not Spark SQL sqlglot can read: {why}") from exc
    reads: dict[str, set[str] | None] = {}
    for scope in scopes:
        _scope_reads(scope, exp, reads)
    return tuple((t, frozenset(c) if c is not None else None) for t, c in reads.items())


def query_tables(query: str) -> list[str]:
    """The tables the query reads (normalised, sorted); ``QueryInputsError`` when it reads none (``SELECT 1``),
    which a ``trigger: upstream`` table cannot be refreshed on."""
    tables = sorted(query_reads(query))
    if not tables:
        raise QueryInputsError(f"query {_clip(query)!r} reads no table; expected a SELECT from at least one "
                               "catalog table, whose writes would trigger the refresh")
    return tables


def _clip(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _scope_reads(scope: Any, exp: Any, reads: dict[str, set[str] | None]) -> None:
    """Adds what one SELECT scope reads of its tables to ``reads``."""
    tables, opaque = _scope_tables(scope, exp)
    if not tables:
        return
    for table in tables.values():
        reads.setdefault(table, set())
    selected: list[Any] = getattr(scope.expression, "expressions", None) or []  # a UNION's scope selects nothing
    unknown = _starred(selected, tables, exp)
    # ORDER BY and HAVING may name the scope's own output columns: those are not read from a table
    aliases = {e.alias.lower() for e in selected if isinstance(e, exp.Alias)}
    only = _only_table(scope, tables, opaque)
    for column in scope.columns:
        if not _own_output(column, aliases, exp):
            _add_column(column, tables, only, reads, unknown)
    for name in unknown:
        reads[name] = None


def _only_table(scope: Any, tables: dict[str, str], opaque: bool) -> str | None:
    """The table an unqualified column is of: the scope's only source, when that source is a table."""
    return next(iter(tables.values())) if not opaque and len(scope.sources) == 1 else None


def _own_output(column: Any, aliases: set[str], exp: Any) -> bool:
    return not column.table and column.name.lower() in aliases and not isinstance(column.parent, exp.Alias)


def _scope_tables(scope: Any, exp: Any) -> tuple[dict[str, str], bool]:
    """Alias (or name) in scope -> normalised table; and whether a source hides its columns (a table-valued
    function such as ``range(10)``)."""
    tables: dict[str, str] = {}
    opaque = False
    for alias, source in scope.sources.items():
        if not isinstance(source, exp.Table):
            continue  # a CTE or subquery: its own scope reads its tables
        if isinstance(source.this, exp.Identifier):
            tables[alias.lower()] = normalize_table(".".join(p.name for p in source.parts))
        else:
            opaque = True
    return tables, opaque


def _starred(selected: list[Any], tables: dict[str, str], exp: Any) -> set[str]:
    """The tables a ``*`` or ``t.*`` of the SELECT list reads whole."""
    whole: set[str] = set()
    if any(isinstance(e, exp.Star) for e in selected):
        whole.update(tables.values())
    for e in selected:  # t.* is a column whose name is a star, not among the scope's columns
        if isinstance(e, exp.Column) and e.is_star:
            owner = _owner(e, tables, None)[0]
            whole.update([owner] if owner else tables.values())
    return whole


def _add_column(column: Any, tables: dict[str, str], only: str | None, reads: dict[str, set[str] | None],
                unknown: set[str]) -> None:
    owner, path = _owner(column, tables, only)
    if owner is None:
        unknown.update(tables.values())  # ambiguous: it may be any of them
    elif path is None:
        unknown.add(owner)  # t.*
    else:
        cols = reads[owner]
        if cols is not None:
            cols.add(path)


def _owner(column: Any, tables: dict[str, str], only: str | None) -> tuple[str | None, str | None]:
    """(table, column path) of one column reference; path None for ``t.*``; table None when not known."""
    names = [p.name.lower() for p in column.parts]
    star = column.is_star
    # The right-most qualifier that is an alias in scope names the table: ``o.id`` and ``db.o.id`` are column id
    # of o; ``s.x``, with no table s in scope, is field x of struct column s of the only table.
    for i in range(len(names) - 1, 0, -1):
        qualifier = names[i - 1]
        if qualifier in tables:
            return tables[qualifier], None if star else ".".join(names[i:])
    if star:
        return None, None
    return only, ".".join(names)
