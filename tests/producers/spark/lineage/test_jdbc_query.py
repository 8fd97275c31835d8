"""The SQL of a JDBC ``query`` option, traced with sqlglot (unit tests: no database; test_jdbc.py has Derby)."""

from __future__ import annotations

from lineagewire.producers.spark.lineage.connectors.jdbc_query import dialect_of, query_lineage

IDENTITY, TRANSFORMATION = ("DIRECT", "IDENTITY", False), ("DIRECT", "TRANSFORMATION", False)


def test_cte_union_window_and_scalar_subquery() -> None:
    found = query_lineage(
        "WITH big AS (SELECT id, amount * 2 AS a2 FROM sales.orders WHERE amount > 10) "
        "SELECT b.id, b.a2, ROW_NUMBER() OVER (PARTITION BY b.id ORDER BY b.a2) AS rn, "
        "(SELECT MAX(rate) FROM fx) AS top_rate FROM big b "
        "UNION ALL SELECT id, refund, 0, 0 FROM sales.refunds", "postgres", [])
    assert found.problem is None
    assert set(found.tables) == {"sales.orders", "fx", "sales.refunds"}  # not the CTE
    assert found.columns["id"] == {("sales.orders", "id"): {IDENTITY}, ("sales.refunds", "id"): {IDENTITY}}
    assert found.columns["a2"] == {("sales.orders", "amount"): {TRANSFORMATION},
                                   ("sales.refunds", "refund"): {IDENTITY}}
    assert found.columns["top_rate"] == {("fx", "rate"): {("DIRECT", "AGGREGATION", False)}}
    assert found.indirect[("sales.orders", "amount")] == {("INDIRECT", "FILTER", False),
                                                          ("INDIRECT", "WINDOW", False)}


def test_star_of_one_table_copies_the_columns_spark_read() -> None:
    found = query_lineage("SELECT * FROM t WHERE k = 1", None, ["K", "V"])
    assert found.columns == {"K": {("t", "K"): {IDENTITY}}, "V": {("t", "V"): {IDENTITY}}}
    assert found.indirect == {("t", "k"): {("INDIRECT", "FILTER", False)}}


def test_no_guess_where_the_sql_alone_cannot_tell() -> None:
    assert "is not qualified" in (query_lineage("SELECT k FROM a JOIN b ON a.x = b.x", None, []).problem or "")
    assert "SELECT * over several tables" in (query_lineage("SELECT * FROM a JOIN b ON a.x = b.x", None, []).problem
                                              or "")
    assert "does not parse" in (query_lineage("SELECT k FROM {oj a}", None, []).problem or "")


def test_dialect_from_the_jdbc_url() -> None:
    assert dialect_of("jdbc:postgresql://h:5432/db") == "postgres"
    assert dialect_of("jdbc:sqlserver://h;databaseName=x") == "tsql"
    assert dialect_of("jdbc:derby:memory:x") is None
