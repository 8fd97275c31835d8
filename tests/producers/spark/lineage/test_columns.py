"""Column lineage through views, unions, joins, aggregates, windows, sorts, filters and conditions."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Capture, collect, column, inputs_of, reads

pytestmark = pytest.mark.spark


@pytest.fixture
def sources(spark: Any, tmp_path: pathlib.Path) -> Iterator[dict[str, str]]:
    """Two parquet datasets registered as temp views 'lw_orders' and 'lw_customers' (dropped afterwards)."""
    orders, customers = str(tmp_path / "orders"), str(tmp_path / "customers")
    spark.createDataFrame([(1, 10, 5.0, "a"), (2, 10, 7.0, "b"), (3, 11, 1.0, "a")],
                          "order_id int, customer_id int, amount double, status string").write.parquet(orders)
    spark.createDataFrame([(10, "ann", "x@y"), (11, "bob", "z@y")],
                          "customer_id int, name string, email string").write.parquet(customers)
    spark.read.parquet(orders).createOrReplaceTempView("lw_orders")
    spark.read.parquet(customers).createOrReplaceTempView("lw_customers")
    yield {"orders": orders, "customers": customers}
    spark.catalog.dropTempView("lw_orders")
    spark.catalog.dropTempView("lw_customers")
    spark.catalog.dropTempView("lw_big_orders")


def write(spark: Any, capture: Capture, sql: str, target: pathlib.Path) -> Any:
    result = capture.run(lambda: spark.sql(sql).write.parquet(str(target)))
    assert result.complete, result.incomplete_reason
    return result


def test_temp_view_resolves_to_its_files_and_identity(spark: Any, capture: Capture, sources: dict[str, str],
                                                      tmp_path: pathlib.Path) -> None:
    spark.sql("SELECT order_id, amount FROM lw_orders WHERE amount > 2").createOrReplaceTempView("lw_big_orders")
    result = write(spark, capture, "SELECT order_id AS id, amount FROM lw_big_orders", tmp_path / "out")
    assert [d["name"] for d in result.inputs] == [sources["orders"]]
    assert inputs_of(result, "id") == {"order_id": {("DIRECT", "IDENTITY")}, "amount": {("INDIRECT", "FILTER")}}
    src = column(result, "id")["inputs"][0]
    assert (src["namespace"], src["name"]) == ("file", sources["orders"])


def test_join_keys_are_indirect_join(spark: Any, capture: Capture, sources: dict[str, str],
                                     tmp_path: pathlib.Path) -> None:
    result = write(spark, capture, """
        SELECT o.order_id, c.name FROM lw_orders o JOIN lw_customers c ON o.customer_id = c.customer_id
    """, tmp_path / "out")
    assert sorted(d["name"] for d in result.inputs) == sorted(sources.values())
    name_inputs = {(i["name"], i["field"]): {(t["type"], t["subtype"]) for t in i["transformations"]}
                   for i in column(result, "name")["inputs"]}
    assert name_inputs[(sources["customers"], "name")] == {("DIRECT", "IDENTITY")}
    # The optimizer adds isnotnull() filters on join keys: they are FILTER too.
    assert ("INDIRECT", "JOIN") in name_inputs[(sources["orders"], "customer_id")]
    assert ("INDIRECT", "JOIN") in name_inputs[(sources["customers"], "customer_id")]
    assert (sources["customers"], "email") not in name_inputs


def test_aggregation_and_group_by(spark: Any, capture: Capture, sources: dict[str, str],
                                  tmp_path: pathlib.Path) -> None:
    result = write(spark, capture, """
        SELECT customer_id, sum(amount) AS total, count(*) AS n FROM lw_orders GROUP BY customer_id
    """, tmp_path / "out")
    assert inputs_of(result, "total") == {"amount": {("DIRECT", "AGGREGATION")},
                                          "customer_id": {("INDIRECT", "GROUP_BY")}}
    assert inputs_of(result, "customer_id") == {"customer_id": {("DIRECT", "IDENTITY"), ("INDIRECT", "GROUP_BY")}}
    assert inputs_of(result, "n") == {"customer_id": {("INDIRECT", "GROUP_BY")}}


def test_window_partition_and_order(spark: Any, capture: Capture, sources: dict[str, str],
                                    tmp_path: pathlib.Path) -> None:
    result = write(spark, capture, """
        SELECT order_id, sum(amount) OVER (PARTITION BY customer_id ORDER BY order_id) AS running FROM lw_orders
    """, tmp_path / "out")
    assert inputs_of(result, "running") == {
        "amount": {("DIRECT", "AGGREGATION")},
        "customer_id": {("INDIRECT", "WINDOW")},
        "order_id": {("INDIRECT", "WINDOW")},
    }


def test_sort_and_filter_are_indirect(spark: Any, capture: Capture, sources: dict[str, str],
                                      tmp_path: pathlib.Path) -> None:
    result = write(spark, capture, "SELECT name FROM lw_customers WHERE email LIKE '%@y' ORDER BY customer_id",
                   tmp_path / "out")
    assert inputs_of(result, "name") == {"name": {("DIRECT", "IDENTITY")}, "email": {("INDIRECT", "FILTER")},
                                         "customer_id": {("INDIRECT", "SORT")}}


def test_union_merges_both_sides(spark: Any, capture: Capture, sources: dict[str, str],
                                 tmp_path: pathlib.Path) -> None:
    result = write(spark, capture, """
        SELECT customer_id AS id FROM lw_orders UNION ALL SELECT customer_id FROM lw_customers
    """, tmp_path / "out")
    ids = {(i["name"], i["field"]) for i in column(result, "id")["inputs"]}
    assert ids == {(sources["orders"], "customer_id"), (sources["customers"], "customer_id")}
    assert len(result.inputs) == 2


def test_transformation_conditional_and_masking(spark: Any, capture: Capture, sources: dict[str, str],
                                                tmp_path: pathlib.Path) -> None:
    result = write(spark, capture, """
        SELECT amount * 1.2 AS gross,
               CASE WHEN status = 'a' THEN amount ELSE 0 END AS paid,
               sha2(CAST(order_id AS string), 256) AS hashed
        FROM lw_orders
    """, tmp_path / "out")
    assert inputs_of(result, "gross") == {"amount": {("DIRECT", "TRANSFORMATION")}}
    assert inputs_of(result, "paid") == {"amount": {("DIRECT", "IDENTITY")}, "status": {("INDIRECT", "CONDITIONAL")}}
    (hashed,) = column(result, "hashed")["inputs"]
    assert hashed["field"] == "order_id" and hashed["transformations"][0]["masking"] is True


def test_subquery_alias_and_dataframe_api(spark: Any, capture: Capture, sources: dict[str, str],
                                          tmp_path: pathlib.Path) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    orders = spark.read.parquet(sources["orders"]).alias("o")
    df = (orders.withColumn("doubled", F.col("o.amount") * 2)
          .select(F.col("doubled").alias("d"), F.col("status").alias("s"))
          .selectExpr("d", "lower(s) AS s"))
    result = capture.run(lambda: df.write.parquet(str(tmp_path / "out")))
    assert inputs_of(result, "d") == {"amount": {("DIRECT", "TRANSFORMATION")}}
    assert inputs_of(result, "s") == {"status": {("DIRECT", "TRANSFORMATION")}}


def test_multi_action_application(spark: Any, capture: Capture, sources: dict[str, str],
                                  tmp_path: pathlib.Path) -> None:
    """Each action of one application gets its own lineage: a count, a write, a read of what was written."""
    count = capture.run(lambda: spark.table("lw_orders").count(), reads)
    assert [d["name"] for d in count.inputs] == [sources["orders"]] and count.outputs == []
    written = capture.run(lambda: spark.table("lw_customers").write.json(str(tmp_path / "c_json")))
    assert written.outputs[0]["format"] == "json"
    again = capture.run(lambda: collect(spark.read.json(str(tmp_path / "c_json"))), reads)
    assert again.inputs[0]["name"] == str(tmp_path / "c_json")


def test_subqueries_in_filter_and_projection(spark: Any, capture: Capture, sources: dict[str, str],
                                             tmp_path: pathlib.Path) -> None:
    result = write(spark, capture, """
        SELECT name, (SELECT max(amount) FROM lw_orders) AS top
        FROM lw_customers WHERE customer_id IN (SELECT customer_id FROM lw_orders WHERE status = 'a')
    """, tmp_path / "out")
    assert sorted(d["name"] for d in result.inputs) == sorted(sources.values())
    top = {(i["name"], i["field"]): {(t["type"], t["subtype"]) for t in i["transformations"]}
           for i in column(result, "top")["inputs"]}
    assert top[(sources["orders"], "amount")] == {("DIRECT", "AGGREGATION")}
    # The optimizer turns IN (subquery) into a left semi join on the compared columns.
    assert top[(sources["orders"], "customer_id")] & {("INDIRECT", "FILTER"), ("INDIRECT", "JOIN")}
    assert top[(sources["customers"], "customer_id")] & {("INDIRECT", "FILTER"), ("INDIRECT", "JOIN")}
    assert top[(sources["orders"], "status")] == {("INDIRECT", "FILTER")}


def test_explode_and_rollup(spark: Any, capture: Capture, sources: dict[str, str], tmp_path: pathlib.Path) -> None:
    exploded = write(spark, capture, "SELECT order_id, explode(array(amount, amount * 2)) AS a FROM lw_orders",
                     tmp_path / "exploded")
    assert inputs_of(exploded, "a") == {"amount": {("DIRECT", "TRANSFORMATION")}}
    rolled = write(spark, capture, """
        SELECT status, customer_id, sum(amount) AS total FROM lw_orders GROUP BY ROLLUP(status, customer_id)
    """, tmp_path / "rolled")
    assert inputs_of(rolled, "status")["status"] >= {("DIRECT", "IDENTITY")}
    assert inputs_of(rolled, "total")["amount"] == {("DIRECT", "AGGREGATION")}
    assert ("INDIRECT", "GROUP_BY") in inputs_of(rolled, "total")["customer_id"]


def test_with_column_chain_resolves_to_sources(spark: Any, capture: Capture, sources: dict[str, str],
                                               tmp_path: pathlib.Path) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    df = spark.read.parquet(sources["orders"])
    for i in range(30):
        df = df.withColumn(f"a{i}", F.col("amount") + i).withColumnRenamed("status", f"s{i}") \
            .withColumnRenamed(f"s{i}", "status")
    result = capture.run(lambda: df.write.parquet(str(tmp_path / "chain")))
    assert result.complete, result.incomplete_reason
    assert inputs_of(result, "a29") == {"amount": {("DIRECT", "TRANSFORMATION")}}
    assert inputs_of(result, "status") == {"status": {("DIRECT", "IDENTITY")}}
    assert len(result.column_lineage) == 4 + 30
