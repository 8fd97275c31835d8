"""One refresh: INSERT OVERWRITE of the static partitions of a materialized table from its query.

Like Flink's MaterializedTableManager, the statement keeps the rows of the
defining query that belong to the partitions being refreshed::

    INSERT OVERWRITE TABLE mart.daily WITH ('compression' = 'zstd') PARTITION (dt = '2026-01-31')
    SELECT order_id, amount FROM (<query>) AS lw_refresh_source WHERE CAST(dt AS STRING) = '2026-01-31'

A partition column the query does not produce is purely static: every row
of the query goes into that partition. ``dynamic_options`` become the
``WITH (...)`` options of the write, ``execution_config`` is set on the
session for the refresh and restored afterwards. A table that does not exist
yet is created from the query's schema (``USING <format> PARTITIONED BY``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from .exceptions import RefreshQueryError

log = logging.getLogger(__name__)

__all__ = ["execute_refresh", "insert_statement", "quote_ident", "sql_string"]


def quote_ident(name: str) -> str:
    """A backquoted identifier, each part of a dotted name quoted on its own."""
    return ".".join(f"`{part.replace('`', '``')}`" for part in name.split("."))


def sql_string(value: str) -> str:
    """A Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def insert_statement(table: str, query: str, data_columns: list[str], static_partitions: dict[str, str],
                     query_columns: list[str], dynamic_options: dict[str, str] | None = None) -> str:
    """The INSERT OVERWRITE statement of one refresh."""
    opts = ""
    if dynamic_options:
        opts = " WITH (" + ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in dynamic_options.items()) + ")"
    part = ""
    if static_partitions:
        part = " PARTITION (" + ", ".join(f"{quote_ident(k)} = {sql_string(v)}"
                                          for k, v in static_partitions.items()) + ")"
    filters = [f"CAST({quote_ident(k)} AS STRING) = {sql_string(v)}" for k, v in static_partitions.items()
               if k in query_columns]
    where = (" WHERE " + " AND ".join(filters)) if filters else ""
    cols = ", ".join(quote_ident(c) for c in data_columns)
    return (f"INSERT OVERWRITE TABLE {quote_ident(table)}{opts}{part}\n"
            f"SELECT {cols} FROM ({query}) AS lw_refresh_source{where}")


@contextlib.contextmanager
def session_conf(spark: Any, conf: dict[str, str]) -> Iterator[None]:
    """Set Spark conf for the block and put back what was there before."""
    previous: dict[str, str | None] = {}
    for k, v in conf.items():
        previous[k] = spark.conf.get(k, None)
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, old in previous.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


def _create_table(spark: Any, table: str, schema: Any, partitions: dict[str, str], fmt: str) -> None:
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    cols = [f"{quote_ident(n)} {t}" for n, t in types.items() if n not in partitions]
    cols += [f"{quote_ident(p)} {types.get(p, 'string')}" for p in partitions]
    by = f" PARTITIONED BY ({', '.join(quote_ident(p) for p in partitions)})" if partitions else ""
    ddl = f"CREATE TABLE IF NOT EXISTS {quote_ident(table)} ({', '.join(cols)}) USING {fmt}{by}"
    log.info("creating materialized table %s: %s", table, ddl)
    if table.count(".") >= 1:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_ident(table.rsplit('.', 1)[0])}")
    spark.sql(ddl)


def execute_refresh(spark: Any, command: dict[str, Any], *, table_format: str = "parquet",
                    check_canceled: Callable[[], None] = lambda: None) -> str:
    """Run the refresh a RefreshCommand asks for on ``spark``; returns the statement it executed.

    ``check_canceled`` raises when the refresh was cancelled; it is called before each Spark step
    so a cancel that arrives between jobs still stops the refresh.
    """
    table, query = command["table"], command["query"]
    parts: dict[str, str] = dict(command.get("static_partitions") or {})
    with session_conf(spark, dict(command.get("execution_config") or {})):
        check_canceled()
        source = spark.sql(query)  # analysed, not run: a SELECT is lazy
        query_columns = list(source.columns)
        if not spark.catalog.tableExists(table):
            _create_table(spark, table, source.schema, parts, table_format)
        table_columns = list(spark.table(table).columns)
        unknown = [p for p in parts if p not in table_columns]
        if unknown:
            raise RefreshQueryError(f"table {table}: static partition column(s) {', '.join(unknown)} are not columns "
                                    f"of the table; expected some of {', '.join(table_columns)}")
        data_columns = [c for c in table_columns if c not in parts]
        missing = [c for c in data_columns if c not in query_columns]
        if missing:
            raise RefreshQueryError(f"table {table}: the query does not produce column(s) {', '.join(missing)}; "
                                    f"it produces {', '.join(query_columns)}")
        statement = insert_statement(table, query, data_columns, parts, query_columns,
                                     dict(command.get("dynamic_options") or {}))
        check_canceled()
        spark.sql(statement)  # INSERT runs at once
    return statement
