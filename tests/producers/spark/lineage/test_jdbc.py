"""JDBC sources and sinks, against an in-memory Apache Derby database (Derby's driver ships with PySpark)."""

from __future__ import annotations

import pathlib
import uuid
from typing import Any

import pytest

from .conftest import Capture, collect, column, inputs_of, reads

pytestmark = pytest.mark.spark

# Derby's embedded driver: in derby.jar on Spark 3.5 (Derby 10.14), in derbytools.jar on Spark 4 (10.16).
DRIVER = {"driver": "org.apache.derby.jdbc.EmbeddedDriver"}


def test_jdbc_sink_and_source(spark: Any, capture: Capture) -> None:
    db = f"lw{uuid.uuid4().hex[:8]}"
    url = f"jdbc:derby:memory:{db};create=true"
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id int, label string")

    written = capture.run(lambda: df.write.jdbc(url, "APP.ITEMS", properties={**DRIVER, "password": "s3cret"}))
    assert written.complete, written.incomplete_reason
    (out,) = written.outputs
    assert (out["namespace"], out["name"], out["format"]) == (f"derby:memory:{db}", "APP.ITEMS", "jdbc")
    assert out["operation"] == "ErrorIfExists"
    assert [f["name"] for f in out["fields"]] == ["id", "label"]
    assert "s3cret" not in repr(written)

    target = spark.createDataFrame([], "id int, upper_label string")
    target.write.jdbc(url, "APP.COPY", properties=DRIVER)
    source = spark.read.jdbc(url, "APP.ITEMS", properties=DRIVER)
    read = capture.run(lambda: collect(source.where("id > 0")), reads)
    assert read.complete, read.incomplete_reason
    assert [(d["namespace"], d["name"]) for d in read.inputs] == [(f"derby:memory:{db}", "APP.ITEMS")]

    copied = capture.run(lambda: source.selectExpr("id", "upper(label) AS upper_label")
                         .write.mode("append").jdbc(url, "APP.COPY", properties=DRIVER))
    assert copied.outputs[0]["name"] == "APP.COPY" and copied.outputs[0]["operation"] == "Append"
    assert inputs_of(copied, "upper_label") == {"label": {("DIRECT", "TRANSFORMATION")}}


def test_insert_into_jdbc_catalog_table(spark: Any, capture: Capture) -> None:
    db = f"lw{uuid.uuid4().hex[:8]}"
    url = f"jdbc:derby:memory:{db};create=true"
    spark.createDataFrame([], "id int, label string").write.jdbc(url, "APP.T", properties=DRIVER)
    spark.sql(f"CREATE TABLE lw_jdbc_t USING org.apache.spark.sql.jdbc OPTIONS (url '{url}', dbtable 'APP.T', "
              f"driver '{DRIVER['driver']}')")
    try:
        df = spark.createDataFrame([(1, "a")], "id int, label string")
        result = capture.run(lambda: df.write.insertInto("lw_jdbc_t"),
                             lambda r: r.plan_node == "InsertIntoDataSourceCommand")
        assert result.complete, result.incomplete_reason
        (out,) = result.outputs
        assert (out["namespace"], out["name"], out["operation"]) == (f"derby:memory:{db}", "APP.T", "Append")
        assert out["symlinks"][0]["name"] == "default.lw_jdbc_t"
    finally:
        spark.sql("DROP TABLE IF EXISTS lw_jdbc_t")


def test_jdbc_query_option_names_the_tables_it_reads(spark: Any, capture: Capture) -> None:
    db = f"lw{uuid.uuid4().hex[:8]}"
    url = f"jdbc:derby:memory:{db};create=true"
    spark.createDataFrame([(1, "a")], "id int, label string").write.jdbc(url, "APP.A", properties=DRIVER)
    spark.createDataFrame([(1, 2.0)], "id int, v double").write.jdbc(url, "APP.B", properties=DRIVER)
    query = 'SELECT a."label", b."v" FROM APP.A a JOIN APP.B b ON a."id" = b."id"'  # Spark quotes the columns
    source = spark.read.format("jdbc").option("url", url).option("query", query) \
        .option("driver", DRIVER["driver"]).load()
    result = capture.run(lambda: collect(source), reads)
    assert result.complete, result.incomplete_reason
    assert [(d["namespace"], d["name"]) for d in result.inputs] == [(f"derby:memory:{db}", "APP.A"),
                                                                    (f"derby:memory:{db}", "APP.B")]
    assert result.inputs[0]["properties"]["query"].startswith('(SELECT a."label"')


def _orders_and_customers(spark: Any) -> str:
    db = f"lw{uuid.uuid4().hex[:8]}"
    url = f"jdbc:derby:memory:{db};create=true"
    # Derby stores strings as CLOBs, which it cannot compare, group or aggregate: numbers only.
    spark.createDataFrame([(1, 5.0, 1), (1, 7.0, 1), (2, 3.0, 2)], "k int, amount double, region int") \
        .write.jdbc(url, "APP.ORDERS", properties=DRIVER)
    spark.createDataFrame([(1, 3), (2, 1)], "k int, tier int").write.jdbc(url, "APP.CUST", properties=DRIVER)
    return url


def _read_query(spark: Any, url: str, query: str) -> Any:
    return spark.read.format("jdbc").option("url", url).option("query", query) \
        .option("driver", DRIVER["driver"]).load()


def test_jdbc_query_option_columns_trace_through_its_sql(spark: Any, capture: Capture,
                                                         tmp_path: pathlib.Path) -> None:
    url = _orders_and_customers(spark)
    ns = url.split(";")[0].removeprefix("jdbc:")
    # Spark creates Derby columns with quoted lower-case names: the SQL quotes them too.
    query = ('SELECT o."k", SUM(o."amount") AS "total", MAX(c."tier") AS "tier", '
             'CASE WHEN o."k" > 1 THEN \'late\' ELSE \'early\' END AS "phase" '
             'FROM APP.ORDERS o JOIN APP.CUST c ON o."k" = c."k" WHERE o."region" = 1 GROUP BY o."k"')
    source = _read_query(spark, url, query)
    result = capture.run(lambda: source.selectExpr("k", "total", "tier + 1 AS tier", "phase")
                         .write.parquet(str(tmp_path / "out")))
    assert result.complete, result.incomplete_reason
    assert [(d["namespace"], d["name"]) for d in result.inputs] == [(ns, "APP.ORDERS"), (ns, "APP.CUST")]
    edges = {(i["name"], i["field"]): {(t["type"], t["subtype"]) for t in i["transformations"]}
             for i in column(result, "total")["inputs"]}
    assert edges == {("APP.ORDERS", "amount"): {("DIRECT", "AGGREGATION")},
                     ("APP.ORDERS", "k"): {("INDIRECT", "JOIN"), ("INDIRECT", "GROUP_BY")},
                     ("APP.CUST", "k"): {("INDIRECT", "JOIN")},
                     ("APP.ORDERS", "region"): {("INDIRECT", "FILTER")}}
    # Through the database's SQL and then Spark's own projection.
    assert inputs_of(result, "tier")["tier"] == {("DIRECT", "AGGREGATION")}
    k = {(i["name"], i["field"]): {(t["type"], t["subtype"]) for t in i["transformations"]}
         for i in column(result, "k")["inputs"]}
    assert k[("APP.ORDERS", "k")] == {("DIRECT", "IDENTITY"), ("INDIRECT", "JOIN"), ("INDIRECT", "GROUP_BY")}
    assert ("INDIRECT", "CONDITIONAL") in inputs_of(result, "phase")["k"]


def test_jdbc_query_option_that_cannot_be_traced_says_why(spark: Any, capture: Capture,
                                                          tmp_path: pathlib.Path) -> None:
    url = _orders_and_customers(spark)
    # "tier" could be either table's: without the tables' schemas, no column lineage (no guess).
    ambiguous = _read_query(spark, url, 'SELECT "tier" FROM APP.ORDERS o JOIN APP.CUST c ON o."k" = c."k"')
    result = capture.run(lambda: ambiguous.write.parquet(str(tmp_path / "a")))
    assert not result.complete
    assert "JDBC query option: no column lineage" in (result.incomplete_reason or "")
    assert "'tier' is not qualified" in (result.incomplete_reason or "")
    assert [d["name"] for d in result.inputs] == ["APP.ORDERS", "APP.CUST"]
    assert result.column_lineage == []

    # A JDBC escape for an outer join ({oj ...}): Derby runs it, sqlglot does not parse it.
    unparsed = _read_query(spark, url,
                           'SELECT o."k" FROM {oj APP.ORDERS o LEFT OUTER JOIN APP.CUST c ON o."k" = c."k"}')
    result = capture.run(lambda: unparsed.write.parquet(str(tmp_path / "u")))
    assert not result.complete
    assert "the SQL does not parse" in (result.incomplete_reason or "")
    assert result.column_lineage == []
