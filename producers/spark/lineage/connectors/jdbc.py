"""JDBC: ``JDBCRelation`` reads (table or ``query`` option) and ``JdbcRelationProvider`` writes."""

from __future__ import annotations

import re
from typing import Any

from lineagewire.schemas.events import Dataset, SchemaField, Symlink, dataset

from ..columns import Sources
from ..context import Extraction
from ..naming import jdbc_dataset_id
from ..plan import PlanNode
from .jdbc_query import Columns, dialect_of, query_lineage

__all__ = ["jdbc_relation", "jdbc_save", "query_tables"]

#: How Spark wraps a 'query' option in JDBCOptions.tableOrQuery.
_WRAPPED = re.compile(r"^\s*\((?P<query>.*)\)\s+SPARK_GEN_SUBQ_\d+\s*$", re.S)
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
    # A 'query' option: the tables its SQL reads, and its columns traced through the SQL (jdbc_query).
    wrapped = _WRAPPED.match(table)
    names = [a.name for a in ctx.graph.output(node)]
    found = query_lineage(wrapped.group("query") if wrapped else table, dialect_of(url), names)
    if found.tables:
        tables = found.tables
    ids = {t: jdbc_dataset_id(url, t) for t in tables}
    problem = found.problem
    if problem is None:
        by_name = {n.lower(): sources for n, sources in found.columns.items()}
        missing = [n for n in names if n.lower() not in by_name]
        if missing:
            problem = f"columns {missing} are not outputs of the query's SQL"
        else:
            def keyed(sources: Columns) -> Sources:
                return {(*ids[t], c): set(v) for (t, c), v in sources.items() if t in ids}

            ctx.add_leaf_sources(node, [keyed(by_name[n.lower()]) for n in names], keyed(found.indirect))
    if problem is not None:
        ctx.mark_incomplete(f"JDBC query option: no column lineage: {problem}")
    return [dataset(*ids[t], format="jdbc", boundedness=bounded, properties={"query": table}) for t in tables]


def jdbc_save(ctx: Extraction, node: PlanNode, query: PlanNode | None, opts: dict[str, str],
              fields: list[SchemaField], mode: str | None) -> None:
    url, table = opts.get("url"), opts.get("dbtable")
    if not url or not table:
        raise LookupError("JDBC write without 'url' and 'dbtable' options")
    ns, name = jdbc_dataset_id(url, table)
    ctx.add_output(dataset(ns, name, format="jdbc", fields=fields, operation=mode), query, None)
