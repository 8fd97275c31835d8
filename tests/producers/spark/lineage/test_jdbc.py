"""JDBC sources and sinks, against an in-memory Apache Derby database (Derby's driver ships with PySpark)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from .conftest import Capture, collect, inputs_of, reads

pytestmark = pytest.mark.spark

DRIVER = {"driver": "org.apache.derby.iapi.jdbc.AutoloadedDriver"}


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
