"""The DeltaTable Python API (``DeltaTable.forName/forPath``: ``merge``, ``update``, ``delete``) against SQL.

Delta runs the API's builders through the same commands as its SQL (``MergeIntoCommand``,
``UpdateCommand``, ``DeleteCommand``, each reported as a ``command`` action), so each API call is run
next to the SQL statement that does the same, in the same child session, and their lineage must be
the same: inputs, outputs and column lineage, the table version aside (each write makes a new one).
Every pair is also checked on its own, so that both forms losing their lineage fails as well.

Delta's inner actions around a MERGE (the source's ``localCheckpoint``, the ``deltaTransactionalWrite``
of the rows, reads of ``_delta_log``) name no output: the write is reported once, by the command.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from .isolated import Scenarios, scenario

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

def _command(name: str) -> Any:
    return lambda r: r.plan_node == name


def _pair(capture: Any, command: str, api: Any, sql: Any) -> dict[str, Any]:
    """The lineage of the API call and of the SQL statement, each the one action that ran ``command``,
    and every action the API call reported (``api_action.<i>``: to check that none other names an output)."""
    capture.settle()
    start = len(capture.results)
    api_result = capture.run(api, _command(command))
    capture.settle()
    out = {f"api_action.{i}": r for i, (_, r) in enumerate(capture.results[start:])}
    return {**out, "api": api_result, "sql": capture.run(sql, _command(command))}


@scenario
def delta_api(spark: Any, capture: Any, folder: pathlib.Path) -> dict[str, Any]:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F  # noqa: N812 - PySpark's usual name

    orders, customers, by_path = str(folder / "orders"), str(folder / "customers"), str(folder / "by_path")
    spark.createDataFrame([(1, "a", 5.0), (2, "b", 20.0), (3, "c", 30.0), (4, "d", 200.0)],
                          "id int, k string, amount double").write.parquet(orders)
    spark.createDataFrame([(1, "ann"), (2, "bob"), (3, "cy")], "id int, name string").write.parquet(customers)
    target = spark.createDataFrame([(1, "a", 2.0), (2, "b", 3.0), (5, "e", 4.0)], "id int, k string, v double")
    target.write.format("delta").saveAsTable("dt")
    target.write.format("delta").save(by_path)
    out: dict[str, Any] = {}

    def add(name: str, command: str, api: Any, sql: Any) -> None:
        out.update({f"{name}.{k}": v for k, v in _pair(capture, command, api, sql).items()})

    def merge_filtered() -> None:
        source = spark.read.parquet(orders).where("amount > 10")
        (DeltaTable.forName(spark, "dt").alias("t").merge(source.alias("s"), "t.id = s.id")
         .whenMatchedUpdate(condition="s.amount > 25", set={"v": "s.amount * 2"})
         .whenNotMatchedInsert(values={"id": "s.id", "k": "upper(s.k)", "v": "s.amount"})
         .execute())

    add("merge_filtered", "MergeIntoCommand", merge_filtered, lambda: spark.sql(
        f"MERGE INTO dt t USING (SELECT * FROM parquet.`{orders}` WHERE amount > 10) s ON t.id = s.id "
        "WHEN MATCHED AND s.amount > 25 THEN UPDATE SET v = s.amount * 2 "
        "WHEN NOT MATCHED THEN INSERT (id, k, v) VALUES (s.id, upper(s.k), s.amount)"))

    def merge_aggregated() -> None:
        source = (spark.read.parquet(orders).groupBy("k")
                  .agg(F.max("id").alias("id"), F.sum("amount").alias("v")).select("id", "k", "v"))
        (DeltaTable.forPath(spark, by_path).alias("t").merge(source.alias("s"), "t.k = s.k")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    add("merge_aggregated", "MergeIntoCommand", merge_aggregated, lambda: spark.sql(
            f"MERGE INTO delta.`{by_path}` t USING (SELECT max(id) AS id, k, sum(amount) AS v "
            f"FROM parquet.`{orders}` GROUP BY k) s ON t.k = s.k "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"))

    def merge_joined() -> None:
        source = (spark.read.parquet(orders).alias("o")
                  .join(spark.read.parquet(customers).alias("c"), F.col("o.id") == F.col("c.id"))
                  .where("o.amount > 10").select("o.id", F.col("c.name").alias("k"), "o.amount"))
        (DeltaTable.forName(spark, "dt").alias("t").merge(source.alias("s"), "t.id = s.id")
         .whenMatchedDelete(condition="s.amount > 100")
         .whenMatchedUpdate(set={"k": "s.k"})
         .whenNotMatchedInsert(values={"id": "s.id", "k": "s.k", "v": "s.amount"})
         .whenNotMatchedBySourceUpdate(condition="t.v < 0", set={"v": "t.v - 1"})
         .whenNotMatchedBySourceDelete()
         .execute())

    add("merge_joined", "MergeIntoCommand", merge_joined, lambda: spark.sql(
        f"MERGE INTO dt t USING (SELECT o.id, c.name AS k, o.amount FROM parquet.`{orders}` o "
        f"JOIN parquet.`{customers}` c ON o.id = c.id WHERE o.amount > 10) s ON t.id = s.id "
        "WHEN MATCHED AND s.amount > 100 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET k = s.k "
        "WHEN NOT MATCHED THEN INSERT (id, k, v) VALUES (s.id, s.k, s.amount) "
        "WHEN NOT MATCHED BY SOURCE AND t.v < 0 THEN UPDATE SET v = t.v - 1 "
        "WHEN NOT MATCHED BY SOURCE THEN DELETE"))

    add("update_filtered", "UpdateCommand",
        lambda: DeltaTable.forName(spark, "dt").update(condition="id = 2", set={"v": "v + 1"}),
        lambda: spark.sql("UPDATE dt SET v = v + 1 WHERE id = 2"))
    add("update_by_path", "UpdateCommand",
        lambda: DeltaTable.forPath(spark, by_path).update(F.col("v") > 2, {"k": F.upper("k"), "v": F.col("id") * 2}),
        lambda: spark.sql(f"UPDATE delta.`{by_path}` SET k = upper(k), v = id * 2 WHERE v > 2"))
    # Each form deletes a row of its own: a DELETE that matches no row commits no version.
    add("delete_filtered", "DeleteCommand",
        lambda: DeltaTable.forName(spark, "dt").delete("id = 2"),
        lambda: spark.sql("DELETE FROM dt WHERE id = 3"))
    add("delete_by_path", "DeleteCommand",
        lambda: DeltaTable.forPath(spark, by_path).delete(F.col("k") == "A"),
        lambda: spark.sql(f"DELETE FROM delta.`{by_path}` WHERE k = 'B'"))

    def delete_all_sql() -> None:
        spark.sql(f"INSERT INTO delta.`{by_path}` VALUES (9, 'z', 1.0)")  # a row for it to delete
        spark.sql(f"DELETE FROM delta.`{by_path}`")

    add("delete_all", "DeleteCommand", lambda: DeltaTable.forPath(spark, by_path).delete(), delete_all_sql)
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import pyspark

    wanted = {"3.5": "3.3.*", "4.0": "4.0.*"}.get(".".join(pyspark.__version__.split(".")[:2]))
    reason = (f"delta-spark is not installed (pip install 'delta-spark=={wanted}')" if wanted else
              f"no delta-spark build for PySpark {pyspark.__version__} exists (delta-spark 4.0 is for Spark 4.0)")
    pytest.importorskip("delta", reason=reason)
    return Scenarios.run(__name__, "delta", tmp_path_factory.mktemp("delta_api"))["delta_api"]


# -- comparing ------------------------------------------------------------------------------------


def _short(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1]


def _datasets(datasets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Datasets as compared: everything but the table version, which each write moves on."""
    out = []
    for ds in datasets:
        props = {k: v for k, v in ds["properties"].items() if k != "version"}
        out.append({**ds, "properties": props})
    return sorted(out, key=lambda d: (d["namespace"], d["name"]))


def _edges(result: Any) -> set[tuple[str, str, str, str, str]]:
    """Column lineage as (output field, input dataset, input field, type, subtype)."""
    return {(c["field"], _short(i["name"]), i["field"], t["type"], t["subtype"])
            for c in result.column_lineage for i in c["inputs"] for t in i["transformations"]}


def _same(results: dict[str, Any], name: str) -> Any:
    """The API's lineage, once checked to be the SQL form's."""
    api, sql = results[f"{name}.api"], results[f"{name}.sql"]
    for form, result in (("API", api), ("SQL", sql)):
        assert result.complete, f"{name} ({form}): {result.incomplete_reason}"
        assert len(result.outputs) == 1, f"{name} ({form}): expected the Delta table as the one output, " \
                                         f"got {[d['name'] for d in result.outputs]}"
    assert _datasets(api.outputs) == _datasets(sql.outputs), f"{name}: outputs differ (API, then SQL)"
    assert _datasets(api.inputs) == _datasets(sql.inputs), f"{name}: inputs differ (API, then SQL)"
    assert _edges(api) == _edges(sql), (f"{name}: column lineage differs: API only {_edges(api) - _edges(sql)}, "
                                        f"SQL only {_edges(sql) - _edges(api)}")
    # Both wrote a version of their own, the SQL form a later one.
    (api_out,), (sql_out,) = api.outputs, sql.outputs
    assert int(sql_out["properties"]["version"]) > int(api_out["properties"]["version"])
    return api


def _one_output_once(results: dict[str, Any], name: str, operation: str) -> dict[str, Any]:
    """The API call's output, named by the command's action alone: no inner action names an output."""
    api = results[f"{name}.api"]
    (out,) = api.outputs
    assert (out["format"], out["operation"]) == ("delta", operation)
    actions = [r for key, r in results.items() if key.startswith(f"{name}.api_action.")]
    writers = [r.plan_node for r in actions if r.outputs]
    assert len(actions) > 1 and writers == [api.plan_node], writers
    return out


def _is_catalog_table(ds: dict[str, Any]) -> None:
    assert ds["namespace"] == "file" and ds["name"].endswith("/warehouse/dt"), ds["name"]
    (link,) = ds["symlinks"]
    assert (link["name"], link["type"]) == ("default.dt", "TABLE")


def _is_path_table(ds: dict[str, Any]) -> None:
    assert ds["namespace"] == "file" and ds["name"].endswith("/by_path"), ds["name"]
    assert ds["symlinks"] == []


def _inputs(result: Any) -> set[str]:
    return {_short(d["name"]) for d in result.inputs}


# -- tests ------------------------------------------------------------------------------------------


def test_merge_with_a_filtered_source(results: dict[str, Any]) -> None:
    api = _same(results, "merge_filtered")
    _is_catalog_table(_one_output_once(results, "merge_filtered", "Merge"))
    assert _inputs(api) == {"dt", "orders"}
    edges = _edges(api)
    # SET v = s.amount * 2, INSERT v = s.amount, k = upper(s.k); unchanged columns keep the target's.
    assert {("v", "orders", "amount", "DIRECT", "TRANSFORMATION"), ("v", "orders", "amount", "DIRECT", "IDENTITY"),
            ("k", "orders", "k", "DIRECT", "TRANSFORMATION"), ("id", "orders", "id", "DIRECT", "IDENTITY"),
            ("k", "dt", "k", "DIRECT", "IDENTITY")} <= edges
    # ON t.id = s.id: INDIRECT/JOIN on both sides; the source's WHERE and the clause condition: FILTER.
    for column in ("id", "k", "v"):
        assert {(column, "dt", "id", "INDIRECT", "JOIN"), (column, "orders", "id", "INDIRECT", "JOIN"),
                (column, "orders", "amount", "INDIRECT", "FILTER")} <= edges, column


def test_merge_with_an_aggregated_source_by_path(results: dict[str, Any]) -> None:
    api = _same(results, "merge_aggregated")
    _is_path_table(_one_output_once(results, "merge_aggregated", "Merge"))
    assert _inputs(api) == {"by_path", "orders"}
    edges = _edges(api)
    # UPDATE SET * / INSERT *: each column from the source's column of that name, through the aggregate.
    assert {("id", "orders", "id", "DIRECT", "AGGREGATION"), ("v", "orders", "amount", "DIRECT", "AGGREGATION"),
            ("k", "orders", "k", "DIRECT", "IDENTITY")} <= edges
    assert {("v", "orders", "k", "INDIRECT", "GROUP_BY"), ("v", "by_path", "k", "INDIRECT", "JOIN")} <= edges
    assert not {e for e in edges if e[1] == "by_path" and e[3] == "DIRECT"}, "every column is set from the source"


def test_merge_with_a_joined_source_and_every_kind_of_clause(results: dict[str, Any]) -> None:
    api = _same(results, "merge_joined")
    _is_catalog_table(_one_output_once(results, "merge_joined", "Merge"))
    assert _inputs(api) == {"dt", "orders", "customers"}
    edges = _edges(api)
    assert {("k", "customers", "name", "DIRECT", "IDENTITY"), ("v", "orders", "amount", "DIRECT", "IDENTITY"),
            ("v", "dt", "v", "DIRECT", "TRANSFORMATION")} <= edges  # NOT MATCHED BY SOURCE: SET v = t.v - 1
    # The source's join keys and the merge's ON are JOIN; WHEN ... AND conditions and the source's WHERE FILTER.
    assert {("k", "orders", "id", "INDIRECT", "JOIN"), ("k", "customers", "id", "INDIRECT", "JOIN"),
            ("k", "dt", "id", "INDIRECT", "JOIN"), ("k", "orders", "amount", "INDIRECT", "FILTER"),
            ("k", "dt", "v", "INDIRECT", "FILTER")} <= edges


def test_update_with_a_where(results: dict[str, Any]) -> None:
    api = _same(results, "update_filtered")
    _is_catalog_table(_one_output_once(results, "update_filtered", "Update"))
    assert _inputs(api) == {"dt"}
    assert _edges(api) == {
        ("v", "dt", "v", "DIRECT", "TRANSFORMATION"),
        ("id", "dt", "id", "DIRECT", "IDENTITY"), ("k", "dt", "k", "DIRECT", "IDENTITY"),
        *((column, "dt", "id", "INDIRECT", "FILTER") for column in ("id", "k", "v"))}


def test_update_by_path_with_column_expressions(results: dict[str, Any]) -> None:
    api = _same(results, "update_by_path")
    _is_path_table(_one_output_once(results, "update_by_path", "Update"))
    assert _inputs(api) == {"by_path"}
    assert _edges(api) == {
        ("k", "by_path", "k", "DIRECT", "TRANSFORMATION"), ("v", "by_path", "id", "DIRECT", "TRANSFORMATION"),
        ("id", "by_path", "id", "DIRECT", "IDENTITY"),
        *((column, "by_path", "v", "INDIRECT", "FILTER") for column in ("id", "k", "v"))}


def test_delete_with_a_where(results: dict[str, Any]) -> None:
    api = _same(results, "delete_filtered")
    _is_catalog_table(_one_output_once(results, "delete_filtered", "Delete"))
    assert _inputs(api) == {"dt"}
    # The rows that stay are the table's own; the WHERE decides which stay.
    assert _edges(api) == {*((column, "dt", column, "DIRECT", "IDENTITY") for column in ("id", "k", "v")),
                           *((column, "dt", "id", "INDIRECT", "FILTER") for column in ("id", "k", "v"))}


def test_delete_by_path_with_a_column_condition(results: dict[str, Any]) -> None:
    api = _same(results, "delete_by_path")
    _is_path_table(_one_output_once(results, "delete_by_path", "Delete"))
    assert _inputs(api) == {"by_path"}
    assert _edges(api) == {*((column, "by_path", column, "DIRECT", "IDENTITY") for column in ("id", "k", "v")),
                           *((column, "by_path", "k", "INDIRECT", "FILTER") for column in ("id", "k", "v"))}


def test_delete_of_every_row(results: dict[str, Any]) -> None:
    api = _same(results, "delete_all")
    _is_path_table(_one_output_once(results, "delete_all", "Delete"))
    # No row stays: no column of the table comes from anything.
    assert api.column_lineage == []
