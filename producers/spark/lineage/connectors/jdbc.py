"""JDBC: ``JDBCRelation`` reads (table or ``query`` option) and ``JdbcRelationProvider`` writes."""

from __future__ import annotations

import re
from typing import Any

from lineagewire.schemas.events import Dataset, SchemaField, Symlink, dataset

from ..context import Extraction
from ..naming import jdbc_dataset_id
from ..plan import PlanNode

__all__ = ["jdbc_relation", "jdbc_save", "query_tables"]

_QUERY_TABLES = re.compile(r"\b(?:FROM|JOIN)\s+((?:\"[^\"]+\"|[\w$]+)(?:\.(?:\"[^\"]+\"|[\w$]+))*)", re.I)


def query_tables(table_or_query: str) -> list[str] | None:
    """Tables a JDBC 'query' option reads (Spark wraps it as '(query) SPARK_GEN_SUBQ_n'); None for a table."""
    text = table_or_query.strip()
    if not text.startswith("("):
        return None
    found: list[str] = []
    for name in _QUERY_TABLES.findall(text):
        if not name.startswith("(") and name not in found:
            found.append(name)
    return found


def jdbc_relation(ctx: Extraction, node: PlanNode, relation: Any, catalog_table: dict[str, Any] | None,
                  fields: list[SchemaField], symlinks: list[Symlink]) -> list[Dataset]:
    opts = relation.jdbcOptions()
    url, table = str(opts.url()), str(opts.tableOrQuery())
    bounded = ctx.boundedness(node)
    tables = query_tables(table)
    if tables is None:
        ns, name = jdbc_dataset_id(url, table)
        return [dataset(ns, name, format="jdbc", fields=fields, symlinks=symlinks, boundedness=bounded)]
    # A 'query' option: the tables it names; its columns cannot be told apart without a SQL parser.
    return [dataset(*jdbc_dataset_id(url, t), format="jdbc", boundedness=bounded, properties={"query": table})
            for t in tables]


def jdbc_save(ctx: Extraction, node: PlanNode, query: PlanNode | None, opts: dict[str, str],
              fields: list[SchemaField], mode: str | None) -> None:
    url, table = opts.get("url"), opts.get("dbtable")
    if not url or not table:
        raise LookupError("JDBC write without 'url' and 'dbtable' options")
    ns, name = jdbc_dataset_id(url, table)
    ctx.add_output(dataset(ns, name, format="jdbc", fields=fields, operation=mode), query, None)
