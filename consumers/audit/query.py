"""SQL over the archive with DuckDB: the view ``events``, one row per archived Kafka record.

Only files listed in the manifests are read, so a file a crashed archiver left
behind (written, not yet listed) never shows up twice. Remote archives are
read through the same fsspec filesystem as the writer uses
(``duckdb.register_filesystem``, before the lock below), so no DuckDB
extension (httpfs) is needed or downloaded.

Read-only, and nothing beyond the archive (``run_query``): the SQL must be one
statement of DuckDB's SELECT type (``SELECT``, ``WITH``, ``FROM``, ``VALUES``,
``DESCRIBE``, ``SUMMARIZE``), checked with DuckDB's own parser
(``duckdb.extract_statements``), not with a pattern. The connection then runs
with ``enable_external_access`` off and ``allowed_paths`` set to the listed
files, so ``read_csv('/etc/...')``, ``glob``, another Parquet file or a URL
are refused; extensions are neither installed nor loaded on demand
(``autoinstall_known_extensions``, ``autoload_known_extensions``); and
``lock_configuration`` keeps a query from changing any of it.

Columns (see ``layout.ARCHIVE_SCHEMA``): topic, partition, "offset",
timestamp, timestamp_type, key, key_bytes, headers, value, decode_error, kind,
event_id, job_namespace, job_name, run_id, parent_run_id, sequence, status,
old_status, event_time, inputs, outputs. ``offset`` is an SQL keyword: quote it.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import io
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from lineagewire.exceptions import MissingExtraError

try:
    import duckdb
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("duckdb", "audit", "audit query") from exc

from .archive import records_to_table
from .exceptions import QueryError
from .manifest import load_checked
from .storage import Storage

__all__ = ["QueryResult", "connect", "format_result", "run_query"]

COLUMNS = ("topic, partition, \"offset\", timestamp, timestamp_type, key, key_bytes, headers, value, decode_error, "
           "kind, event_id, job_namespace, job_name, run_id, parent_run_id, sequence, status, old_status, event_time, "
           "inputs, outputs")


def connect(storage: Storage, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (new, or ``con``) with the view ``events`` over the archive, confined to the archive's
    listed files and locked (see the module docstring)."""
    con = con or duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    files = [e["file"] for m in load_checked(storage) for e in m.entries]
    if not files:
        con.register("_no_events", records_to_table([]))
        con.execute(f"CREATE OR REPLACE VIEW events AS SELECT {COLUMNS} FROM _no_events")
        _confine(con, [])
        return con
    if storage.local:
        paths = [storage.path(f) for f in files]
    else:
        con.register_filesystem(storage.fs)
        proto = storage.fs.protocol if isinstance(storage.fs.protocol, str) else storage.fs.protocol[0]
        paths = [f"{proto}://{storage.path(f)}" for f in files]
    con.execute(f"CREATE OR REPLACE VIEW events AS SELECT {COLUMNS} FROM read_parquet([{_sql_list(paths)}], "
                "hive_partitioning = false)")
    _confine(con, paths)
    return con


def _sql_list(items: list[str]) -> str:
    return ", ".join("'" + p.replace("'", "''") + "'" for p in items)


def _confine(con: duckdb.DuckDBPyConnection, paths: list[str]) -> None:
    """Let ``con`` read ``paths`` and nothing else of the host or the network, load no extension, and lock that.
    The view binds its files when queried, so they are allowed by name; everything a query names is refused."""
    con.execute(f"SET allowed_paths = [{_sql_list(paths)}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")


def _one_read_statement(sql: str) -> str:
    """``sql`` if it is one statement of DuckDB's SELECT type; QueryError says what it is otherwise."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {_first_line(exc)} (the view is named events; quote \"offset\")") from exc
    kinds = [s.type.name for s in statements]
    if kinds != ["SELECT"]:
        what = f"{len(kinds)} statements ({', '.join(kinds)})" if len(kinds) != 1 else f"a {kinds[0]} statement"
        raise QueryError(f"query refused: {what or 'no statement'}; expected one read statement (SELECT or WITH "
                         "... SELECT) over the view events: audit query reads only the archive")
    return sql
class QueryResult:
    """Column names and rows of one statement."""

    def __init__(self, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        self.columns = columns
        self.rows = rows


def run_query(storage: Storage, sql: str) -> QueryResult:
    """Run one read statement ``sql`` over the archive; QueryError names what was refused or what DuckDB rejected."""
    _one_read_statement(sql)
    con = connect(storage)
    try:
        rel = con.sql(sql)
        if rel is None:  # not reached for a SELECT; kept so that a parser surprise is an empty answer, not a crash
            return QueryResult([], [])
        # Through Arrow: DuckDB's own fetchall() needs pytz for TIMESTAMPTZ; pyarrow uses zoneinfo.
        table = rel.to_arrow_table()
        columns = [col.to_pylist() for col in table.columns]
        return QueryResult(list(rel.columns), list(zip(*columns, strict=True)))
    except duckdb.PermissionException as exc:
        raise QueryError(f"query refused: {_first_line(exc)}; audit query reads only the archive's files, through "
                         "the view events") from exc
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {_first_line(exc)} (the view is named events; quote \"offset\")") from exc
    finally:
        con.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _cell(value: Any, width: int = 60) -> str:
    if value is None:
        return ""
    plain = _plain(value)
    text = plain if isinstance(plain, str) else json.dumps(plain, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"


def format_result(result: QueryResult, fmt: str) -> Iterable[str]:
    """Lines of ``result`` as ``table`` (aligned text), ``json`` (JSON lines) or ``csv``; bytes in base64."""
    return _FORMATS.get(fmt, _table_lines)(result)


def _json_lines(result: QueryResult) -> Iterator[str]:
    for row in result.rows:
        yield json.dumps({c: _plain(v) for c, v in zip(result.columns, row, strict=True)}, separators=(",", ":"))


def _csv_lines(result: QueryResult) -> Iterator[str]:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(result.columns)
    for row in result.rows:
        w.writerow(["" if v is None else (_plain(v) if isinstance(_plain(v), str | int | float)
                                          else json.dumps(_plain(v))) for v in row])
    yield from buf.getvalue().splitlines()


def _table_lines(result: QueryResult) -> Iterator[str]:
    """Aligned columns under a header, then the number of rows."""
    cells = [[_cell(v) for v in row] for row in result.rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(result.columns)]
    yield "  ".join(c.ljust(w) for c, w in zip(result.columns, widths, strict=True)).rstrip()
    yield "  ".join("-" * w for w in widths)
    for r in cells:
        yield "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
    yield f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})"


_FORMATS: dict[str, Callable[[QueryResult], Iterator[str]]] = {"json": _json_lines, "csv": _csv_lines,
                                                                "table": _table_lines}
