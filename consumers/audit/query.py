"""SQL over the archive with DuckDB: the view ``events``, one row per archived Kafka record.

Only files listed in the manifests are read, so a file a crashed archiver left
behind (written, not yet listed) never shows up twice. Remote archives are
read through the same fsspec filesystem as the writer uses
(``duckdb.register_filesystem``), so no DuckDB extension is downloaded.

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
from collections.abc import Iterable
from typing import Any

from lineagewire.exceptions import MissingExtraError

try:
    import duckdb
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("duckdb", "audit", "audit query") from exc

from .archive import records_to_table
from .exceptions import QueryError
from .manifest import load_manifests
from .storage import Storage

__all__ = ["QueryResult", "connect", "format_result", "run_query"]

COLUMNS = ("topic, partition, \"offset\", timestamp, timestamp_type, key, key_bytes, headers, value, decode_error, "
           "kind, event_id, job_namespace, job_name, run_id, parent_run_id, sequence, status, old_status, event_time, "
           "inputs, outputs")


def connect(storage: Storage, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (new, or ``con``) with the view ``events`` over the archive."""
    con = con or duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    files = [e["file"] for m in load_manifests(storage) for e in m.entries]
    if not files:
        con.register("_no_events", records_to_table([]))
        con.execute(f"CREATE OR REPLACE VIEW events AS SELECT {COLUMNS} FROM _no_events")
        return con
    if storage.local:
        paths = [storage.path(f) for f in files]
    else:
        con.register_filesystem(storage.fs)
        proto = storage.fs.protocol if isinstance(storage.fs.protocol, str) else storage.fs.protocol[0]
        paths = [f"{proto}://{storage.path(f)}" for f in files]
    listing = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
    con.execute(f"CREATE OR REPLACE VIEW events AS SELECT {COLUMNS} FROM read_parquet([{listing}], "
                "hive_partitioning = false)")
    return con


class QueryResult:
    """Column names and rows of one statement."""

    def __init__(self, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        self.columns = columns
        self.rows = rows


def run_query(storage: Storage, sql: str) -> QueryResult:
    """Run ``sql`` over the archive; QueryError names what DuckDB rejected."""
    con = connect(storage)
    try:
        rel = con.sql(sql)
        if rel is None:  # a statement without a result (SET, CREATE ...)
            return QueryResult([], [])
        # Through Arrow: DuckDB's own fetchall() needs pytz for TIMESTAMPTZ; pyarrow uses zoneinfo.
        table = rel.to_arrow_table()
        columns = [col.to_pylist() for col in table.columns]
        return QueryResult(list(rel.columns), list(zip(*columns, strict=True)))
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise QueryError(f"query failed: {first} (the view is named events; quote \"offset\")") from exc
    finally:
        con.close()


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
    if fmt == "json":
        for row in result.rows:
            yield json.dumps({c: _plain(v) for c, v in zip(result.columns, row, strict=True)},
                             separators=(",", ":"))
        return
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(result.columns)
        for row in result.rows:
            w.writerow(["" if v is None else (_plain(v) if isinstance(_plain(v), str | int | float)
                                              else json.dumps(_plain(v))) for v in row])
        yield from buf.getvalue().splitlines()
        return
    cells = [[_cell(v) for v in row] for row in result.rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(result.columns)]
    yield "  ".join(c.ljust(w) for c, w in zip(result.columns, widths, strict=True)).rstrip()
    yield "  ".join("-" * w for w in widths)
    for r in cells:
        yield "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
    yield f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})"
