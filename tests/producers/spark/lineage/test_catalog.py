"""Catalog tables: saveAsTable, CTAS, INSERT INTO, INSERT OVERWRITE with static partitions, reads by name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Capture, collect, inputs_of, reads

pytestmark = pytest.mark.spark


@pytest.fixture
def tables(spark: Any) -> Iterator[list[str]]:
    """Names of tables the test creates; dropped afterwards to keep the shared session clean."""
    created: list[str] = []
    yield created
    for name in created:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def ctas(result: Any) -> bool:
    return result.plan_node == "CreateDataSourceTableAsSelectCommand"


def warehouse(spark: Any) -> str:
    return spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:").rstrip("/")


def test_save_as_table_is_ctas_with_table_symlink(spark: Any, capture: Capture, tables: list[str]) -> None:
    tables.append("lw_orders")
    df = spark.createDataFrame([(1, 5.0)], "id int, amount double")
    # Spark runs CTAS as a command around an inner file write: both are actions; the CTAS names the table.
    result = capture.run(lambda: df.write.saveAsTable("lw_orders"), ctas)
    assert result.complete, result.incomplete_reason
    (out,) = result.outputs
    assert (out["namespace"], out["name"]) == ("file", f"{warehouse(spark)}/lw_orders")
    assert out["format"] == "parquet"
    assert out["operation"] == "CreateTableAsSelect"
    assert out["properties"]["mode"] == "ErrorIfExists"
    (link,) = out["symlinks"]
    assert (link["name"], link["type"]) == ("default.lw_orders", "TABLE")
    assert link["namespace"].endswith(warehouse(spark))
    assert [f["name"] for f in out["fields"]] == ["id", "amount"]


def test_ctas_and_read_by_table_name(spark: Any, capture: Capture, tables: list[str]) -> None:
    tables += ["lw_src", "lw_ctas"]
    spark.createDataFrame([(1, "a", 2.0)], "id int, k string, v double").write.saveAsTable("lw_src")
    result = capture.run(lambda: spark.sql(
        "CREATE TABLE lw_ctas USING parquet AS SELECT id, upper(k) AS k2, v * 2 AS v2 FROM lw_src WHERE v > 0"), ctas)
    assert result.complete, result.incomplete_reason
    (src,) = result.inputs
    assert src["name"] == f"{warehouse(spark)}/lw_src"
    assert src["symlinks"][0]["name"] == "default.lw_src"
    assert result.outputs[0]["name"] == f"{warehouse(spark)}/lw_ctas"
    assert result.outputs[0]["operation"] == "CreateTableAsSelect"
    assert result.sql is not None and "CREATE TABLE lw_ctas" in result.sql
    assert inputs_of(result, "id") == {"id": {("DIRECT", "IDENTITY")}, "v": {("INDIRECT", "FILTER")}}
    assert inputs_of(result, "k2")["k"] == {("DIRECT", "TRANSFORMATION")}

    read = capture.run(lambda: collect(spark.table("lw_ctas")), reads)
    assert read.inputs[0]["symlinks"][0]["name"] == "default.lw_ctas"


def test_insert_into_and_insert_overwrite_static_partition(spark: Any, capture: Capture,
                                                           tables: list[str]) -> None:
    tables += ["lw_part", "lw_feed"]
    spark.sql("CREATE TABLE lw_part (id int, v double, day string) USING parquet PARTITIONED BY (day)")
    spark.createDataFrame([(1, 1.5)], "id int, v double").write.saveAsTable("lw_feed")

    appended = capture.run(lambda: spark.sql("INSERT INTO lw_part SELECT id, v, 'd1' FROM lw_feed"))
    assert appended.complete, appended.incomplete_reason
    (out,) = appended.outputs
    assert out["name"] == f"{warehouse(spark)}/lw_part"
    assert out["operation"] == "Append"
    assert out["symlinks"][0]["name"] == "default.lw_part"
    assert out["partition_values"] == {}

    overwritten = capture.run(lambda: spark.sql(
        "INSERT OVERWRITE TABLE lw_part PARTITION (day = '2024-01-02') SELECT id, v FROM lw_feed"))
    assert overwritten.complete, overwritten.incomplete_reason
    (out,) = overwritten.outputs
    assert out["operation"] == "Overwrite"
    assert out["partition_values"] == {"day": "2024-01-02"}
    assert [f["name"] for f in out["fields"]] == ["id", "v", "day"]
    assert inputs_of(overwritten, "v") == {"v": {("DIRECT", "IDENTITY")}}
    assert [d["name"] for d in overwritten.inputs] == [f"{warehouse(spark)}/lw_feed"]


def test_dataframe_insert_into(spark: Any, capture: Capture, tables: list[str]) -> None:
    tables.append("lw_ins")
    spark.sql("CREATE TABLE lw_ins (id int, name string) USING parquet")
    df = spark.createDataFrame([(1, "x")], "id int, name string")
    result = capture.run(lambda: df.write.insertInto("lw_ins"))
    assert result.complete, result.incomplete_reason
    assert result.outputs[0]["symlinks"][0]["name"] == "default.lw_ins"
    assert result.outputs[0]["operation"] == "Append"
