"""Column lineage inside a JDBC ``query`` option's SQL, parsed with sqlglot.

``spark.read.jdbc(...).option("query", "SELECT k, SUM(amount) AS total FROM ORDERS GROUP BY k")``
runs the SQL in the database: the plan has one leaf whose columns are the query's. sqlglot parses the
query in the database's dialect (from the JDBC URL) and each output column is traced to the table
columns it reads, with the same kinds as a Spark plan's column lineage: DIRECT IDENTITY /
TRANSFORMATION / AGGREGATION, INDIRECT CONDITIONAL for ``CASE``/``IF`` conditions, and INDIRECT JOIN /
FILTER / GROUP_BY / SORT / WINDOW for what decides which rows come out.

Nothing is guessed: a query that does not parse, or a column that cannot be tied to one table
without the tables' schemas (an unqualified column of a join, ``*`` over a join), gives no column
lineage, and ``QueryLineage.problem`` says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from ..columns import IDENTITY, Trans, combine

__all__ = ["Columns", "QueryLineage", "Source", "dialect_of", "query_lineage"]

#: A source column: (table as the query names it, column).
Source = tuple[str, str]
Columns = dict[Source, set[Trans]]
#: a derived table (a subquery or CTE): its output names and, for each, the columns it comes from
_Derived = tuple[list[str], list[Columns]]

#: JDBC URL subprotocol -> sqlglot dialect (None: sqlglot's own, ANSI-like, for Derby, H2, DB2, ...).
_DIALECTS = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql", "sqlserver": "tsql",
             "oracle": "oracle", "sqlite": "sqlite", "snowflake": "snowflake", "redshift": "redshift",
             "databricks": "databricks", "trino": "trino", "presto": "presto", "clickhouse": "clickhouse",
             "duckdb": "duckdb", "teradata": "teradata", "hive2": "hive", "bigquery": "bigquery"}

TRANSFORMATION: Trans = ("DIRECT", "TRANSFORMATION", False)


def dialect_of(url: str) -> str | None:
    """The sqlglot dialect of a JDBC URL (``jdbc:postgresql://...`` -> ``postgres``), None for the generic one."""
    parts = url.split(":")
    return _DIALECTS.get(parts[1].lower()) if len(parts) > 1 and parts[0].lower() == "jdbc" else None


class _Unresolved(Exception):
    """A column that cannot be tied to a table from the SQL alone."""


@dataclass
class QueryLineage:
    """What a query reads: its tables, each output column's sources, the sources deciding which rows come out."""

    tables: list[str] = field(default_factory=list)
    #: output column name (as the query names it) -> sources
    columns: dict[str, Columns] = field(default_factory=dict)
    indirect: Columns = field(default_factory=dict)
    #: why there is no column lineage (the SQL does not parse, an ambiguous column, ...), else None
    problem: str | None = None


def _table_name(table: object) -> str:
    from sqlglot import exp

    assert isinstance(table, exp.Table)
    return ".".join(part.name for part in table.parts)


def query_lineage(sql: str, dialect: str | None, output_names: list[str]) -> QueryLineage:
    """Lineage of ``sql``; ``output_names`` are the columns Spark read (needed for ``SELECT *`` of one table)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    found = QueryLineage()
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError as exc:
        found.problem = f"the SQL does not parse ({str(exc).splitlines()[0][:160]})"
        return found
    if not isinstance(tree, exp.Query):
        found.problem = f"the SQL is a {type(tree).__name__}, not a query"
        return found
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        name = _table_name(table)
        if name.lower() not in ctes and name not in found.tables:
            found.tables.append(name)
    try:
        names, columns = _Walker(found.indirect, output_names).query(tree, {})
    except _Unresolved as exc:
        found.problem = str(exc)
        return found
    for name, sources in zip(names, columns, strict=True):
        found.columns[name] = sources
    return found


def _merge(into: Columns, more: Columns, step: Trans | None = None) -> None:
    for key, transes in more.items():
        bucket = into.setdefault(key, set())
        bucket.update(combine(step, t) if step else t for t in transes)


class _Walker:
    """Walks one query; ``indirect`` collects the row-deciding sources of every SELECT in it."""

    def __init__(self, indirect: Columns, output_names: list[str]) -> None:
        self.indirect = indirect
        self.output_names = output_names

    def query(self, node: object, ctes: dict[str, object]) -> tuple[list[str], list[Columns]]:
        from sqlglot import exp

        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes)
        ctes = self._with(node, ctes)
        if isinstance(node, exp.SetOperation):
            return self._set_operation(node, ctes)
        if not isinstance(node, exp.Select):
            raise _Unresolved(f"a {type(node).__name__} in the query is not supported")
        return self._select(node, ctes)

    def _with(self, node: object, ctes: dict[str, object]) -> dict[str, object]:
        """``ctes`` and the query's own: WITH belongs to the whole query (a UNION's too), seen by every part."""
        from sqlglot import exp

        with_ = node.args.get("with_") or node.args.get("with") if isinstance(node, exp.Expression) else None
        if with_ is None:
            return ctes
        ctes = dict(ctes)
        for cte in with_.expressions:
            ctes[cte.alias_or_name.lower()] = self.query(cte.this, ctes)
        return ctes

    def _set_operation(self, node: Any, ctes: dict[str, object]) -> tuple[list[str], list[Columns]]:
        """UNION, INTERSECT, EXCEPT: each output column comes from that column of both branches."""
        left_names, left = self.query(node.left, ctes)
        _, right = self.query(node.right, ctes)
        if len(left) != len(right):
            raise _Unresolved("the branches of a set operation have different numbers of columns")
        for mine, theirs in zip(left, right, strict=True):
            _merge(mine, theirs)
        return left_names, left

    def _select(self, node: Any, ctes: dict[str, object]) -> tuple[list[str], list[Columns]]:
        joins = node.args.get("joins") or []
        sel = _Select(self, self._scope(node, joins, ctes), ctes)
        _decide_rows(sel, node, joins)
        names: list[str] = []
        columns: list[Columns] = []
        for projection in node.expressions:
            for name, sources in sel.projection(projection):
                names.append(name)
                columns.append(sources)
        return names, columns

    def _scope(self, node: Any, joins: list[Any], ctes: dict[str, object]) -> dict[str, object]:
        """A SELECT's FROM items by alias (lower case): a table name, or a derived table's columns."""
        scope: dict[str, object] = {}
        from_ = node.args.get("from_") or node.args.get("from")
        for item in ([from_.this] if from_ is not None else []) + [j.this for j in joins]:
            scope[item.alias_or_name.lower()] = self._source(item, ctes)
        return scope

    def _source(self, item: object, ctes: dict[str, object]) -> object:
        from sqlglot import exp

        if isinstance(item, exp.Table):
            name = _table_name(item)
            return ctes.get(name.lower(), name)
        if isinstance(item, exp.Subquery):
            return self.query(item.this, ctes)
        raise _Unresolved(f"a FROM item {type(item).__name__} ({item}) is not supported")


def _decide_rows(sel: _Select, node: Any, joins: list[Any]) -> None:
    """A SELECT's clauses that decide which rows come out: its sources are INDIRECT for every column."""
    for join in joins:
        sel.indirect(join.args.get("on"), "JOIN")
        for using in join.args.get("using") or []:
            for alias in sel.scope:
                sel.add_indirect(sel.column_sources(alias, using.name), "JOIN")
    for clause, kind in (("where", "FILTER"), ("group", "GROUP_BY"), ("having", "FILTER"), ("order", "SORT")):
        sel.indirect(node.args.get(clause), kind)


class _Select:
    """Column resolution and classification within one SELECT."""

    def __init__(self, walker: _Walker, scope: dict[str, object], ctes: dict[str, object]) -> None:
        self.walker = walker
        self.scope = scope
        self.ctes = ctes

    def column_sources(self, alias: str, column: str) -> Columns:
        source = self.scope[alias]
        if isinstance(source, str):
            return {(source, column): {IDENTITY}}
        names, columns = cast(_Derived, source)
        for name, sources in zip(names, columns, strict=True):
            if name.lower() == column.lower():
                return {k: set(v) for k, v in sources.items()}
        raise _Unresolved(f"column {column!r} is not an output of the derived table {alias!r}")

    def resolve(self, col: object) -> Columns:
        from sqlglot import exp

        assert isinstance(col, exp.Column)
        if col.table:
            alias = col.table.lower()
            if alias not in self.scope:
                raise _Unresolved(f"column {col.sql()!r} names {col.table!r}, which is not in its FROM clause")
            return self.column_sources(alias, col.name)
        if len(self.scope) == 1:
            return self.column_sources(next(iter(self.scope)), col.name)
        derived = [a for a, s in self.scope.items() if not isinstance(s, str)
                   and any(n.lower() == col.name.lower() for n in s[0])]  # type: ignore[index]
        if len(derived) == 1 and all(not isinstance(s, str) for s in self.scope.values()):
            return self.column_sources(derived[0], col.name)
        raise _Unresolved(f"column {col.name!r} is not qualified and the query reads {len(self.scope)} tables: "
                          "which one it belongs to needs the tables' schemas")

    def add_indirect(self, sources: Columns, subtype: str) -> None:
        for key, transes in sources.items():
            masking = any(t[2] for t in transes)
            self.walker.indirect.setdefault(key, set()).add(("INDIRECT", subtype, masking))

    def indirect(self, node: object, subtype: str) -> None:
        from sqlglot import exp

        if node is None:
            return
        assert isinstance(node, exp.Expression)
        for sources, _ in self._reads(node):
            self.add_indirect(sources, subtype)

    def _reads(self, node: object) -> list[tuple[Columns, bool]]:
        """(sources, is a subquery's) of every column and subquery under ``node`` (outside nested SELECTs)."""
        from sqlglot import exp

        out: list[tuple[Columns, bool]] = []
        assert isinstance(node, exp.Expression)
        for e in node.walk(prune=lambda n: isinstance(n, exp.Subquery | exp.Select) and n is not node):
            if isinstance(e, exp.Column) and not isinstance(e.this, exp.Star):
                out.append((self.resolve(e), False))
            elif isinstance(e, exp.Subquery | exp.Select) and e is not node:
                _, columns = self.walker.query(e, self.ctes)
                merged: Columns = {}
                for c in columns:
                    _merge(merged, c)
                out.append((merged, True))
        return out

    def projection(self, projection: object) -> list[tuple[str, Columns]]:
        from sqlglot import exp

        assert isinstance(projection, exp.Expression)
        if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column)
                                                and isinstance(projection.this, exp.Star)):
            return self._star(projection.table if isinstance(projection, exp.Column) else "")
        sources: Columns = {}
        self._visit(projection.unalias(), sources, agg=False, cond=False, root=True)
        return [(projection.alias_or_name, sources)]

    def _star(self, table: str) -> list[tuple[str, Columns]]:
        aliases = [table.lower()] if table else list(self.scope)
        if len(aliases) != 1:
            raise _Unresolved("SELECT * over several tables: which columns each gives needs the tables' schemas")
        source = self.scope[aliases[0]]
        if isinstance(source, str):
            # The columns Spark got are the table's, in order: * copies each.
            return [(n, {(source, n): {IDENTITY}}) for n in self.walker.output_names]
        names, columns = cast(_Derived, source)
        return list(zip(names, columns, strict=True))

    def _visit(self, e: object, out: Columns, *, agg: bool, cond: bool, root: bool) -> None:
        from sqlglot import exp

        assert isinstance(e, exp.Expression)
        if isinstance(e, exp.Column):
            if not isinstance(e.this, exp.Star):
                kind: Trans = (("INDIRECT", "CONDITIONAL", False) if cond else ("DIRECT", "AGGREGATION", False)
                               if agg else IDENTITY if root else TRANSFORMATION)
                _merge(out, self.resolve(e), kind)
            return
        if isinstance(e, exp.Subquery | exp.Select):
            for sources, _ in self._reads(e):
                _merge(out, sources, ("INDIRECT", "CONDITIONAL", False) if cond else TRANSFORMATION)
            return
        if isinstance(e, exp.Window):
            for part in (e.args.get("partition_by") or []) + [e.args.get("order")]:
                if part is not None:
                    self.indirect(part, "WINDOW")
            self._visit(e.this, out, agg=agg, cond=cond, root=False)
            return
        if isinstance(e, exp.Paren | exp.Alias):
            self._visit(e.this, out, agg=agg, cond=cond, root=root)
            return
        self._visit_children(e, out, agg=agg or isinstance(e, exp.AggFunc), cond=cond, root=root)

    def _visit_children(self, e: Any, out: Columns, *, agg: bool, cond: bool, root: bool) -> None:
        """Any other expression: its children, a CASE's or IF's conditions as conditions; only a picked
        value (a CASE branch's or IF's result) keeps ``root`` (the value flows through as it is)."""
        from sqlglot import exp

        conditions, values, branches = _choice(e)
        picks = isinstance(e, exp.Case | exp.If)
        for child in _children(e):
            if id(child) in branches:  # a CASE branch: its condition and its value
                self._visit(child.this, out, agg=agg, cond=True, root=False)
                self._visit(child.args["true"], out, agg=agg, cond=cond, root=root)
                continue
            is_cond = id(child) in conditions
            self._visit(child, out, agg=agg, cond=cond or is_cond,
                        root=root and picks and id(child) in values and not is_cond)


def _choice(e: object) -> tuple[set[int], set[int], set[int]]:
    """The ids of a CASE's or IF's conditions, of its values, and of a CASE's branches (empty for anything
    else)."""
    from sqlglot import exp

    if isinstance(e, exp.Case):
        ifs = e.args.get("ifs") or []
        # CASE x WHEN ... compares x: a condition too.
        conditions = {id(child) for child in [e.this, *(i.this for i in ifs)] if child is not None}
        values = {id(i.args.get("true")) for i in ifs} | {id(e.args.get("default"))}
        return conditions, values, {id(i) for i in ifs}
    if isinstance(e, exp.If):
        return {id(e.this)}, {id(e.args.get("true")), id(e.args.get("false"))}, set()
    return set(), set(), set()


def _children(e: object) -> list[Any]:
    from sqlglot import exp

    assert isinstance(e, exp.Expression)
    out: list[object] = []
    for value in e.args.values():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, exp.Expression):
                out.append(v)
    return out
