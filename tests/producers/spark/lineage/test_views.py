"""Persisted views of the session catalog: created, replaced and altered as outputs, read as inputs named by
the view; temporary views stay transparent."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Capture, collect, inputs_of, reads

pytestmark = pytest.mark.spark

VIEW_TEXT = "SELECT id, upper(k) AS uk FROM lw_vsrc WHERE v > 0"


def warehouse(spark: Any) -> str:
    return spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:").rstrip("/")


def creates_view(result: Any) -> bool:
    return result.plan_node in ("CreateViewCommand", "AlterViewAsCommand")


@pytest.fixture
def source(spark: Any) -> Iterator[str]:
    """Table ``lw_vsrc`` (id, k, v) and, after the test, no view or table it made left behind."""
    spark.createDataFrame([(1, "a", 2.0), (2, "b", -1.0)], "id int, k string, v double").write \
        .mode("overwrite").saveAsTable("lw_vsrc")
    yield "lw_vsrc"
    for view in ("lw_v2", "lw_v"):
        spark.sql(f"DROP VIEW IF EXISTS {view}")
    for table in ("lw_vsrc", "lw_vsrc2", "lw_from_view"):
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    for temp in ("lw_tv", "lw_tv2", "lw_tv3"):
        spark.catalog.dropTempView(temp)


def test_create_view_is_an_output_with_its_querys_inputs_and_column_lineage(
        spark: Any, capture: Capture, source: str) -> None:
    result = capture.run(lambda: spark.sql(
        f"CREATE VIEW lw_v (ident COMMENT 'the id', key) AS {VIEW_TEXT}"), creates_view)
    assert result.complete, result.incomplete_reason
    (view,) = result.outputs
    # Named as a table is, by its catalog name; a view has no location of its own.
    (link,) = view["symlinks"]
    assert (view["namespace"], view["name"]) == (link["namespace"], "default.lw_v")
    assert link["type"] == "TABLE" and link["namespace"].endswith(warehouse(spark))
    assert view["dataset_type"] == "VIEW" and view["view_sql"] == VIEW_TEXT
    assert view["operation"] == "CreateView"
    assert [(f["name"], f["type"], f["description"]) for f in view["fields"]] == [
        ("ident", "int", "the id"), ("key", "string", None)]
    (src,) = result.inputs
    assert src["name"] == f"{warehouse(spark)}/lw_vsrc"
    assert src["symlinks"][0]["name"] == "default.lw_vsrc"
    assert inputs_of(result, "ident") == {"id": {("DIRECT", "IDENTITY")}, "v": {("INDIRECT", "FILTER")}}
    assert inputs_of(result, "key") == {"k": {("DIRECT", "TRANSFORMATION")}, "v": {("INDIRECT", "FILTER")}}
    assert {c["name"] for c in result.column_lineage} == {"default.lw_v"}


def test_create_or_replace_and_alter_view_as_give_the_new_query(spark: Any, capture: Capture, source: str) -> None:
    spark.createDataFrame([(7, "z")], "n int, s string").write.mode("overwrite").saveAsTable("lw_vsrc2")
    replaced = capture.run(lambda: spark.sql(f"CREATE OR REPLACE VIEW lw_v AS {VIEW_TEXT}"), creates_view)
    assert replaced.complete, replaced.incomplete_reason
    assert replaced.outputs[0]["operation"] == "CreateOrReplaceView"
    assert [f["name"] for f in replaced.outputs[0]["fields"]] == ["id", "uk"]
    altered = capture.run(lambda: spark.sql("ALTER VIEW lw_v AS SELECT n AS id, s AS uk FROM lw_vsrc2"),
                          creates_view)
    assert altered.complete, altered.incomplete_reason
    (view,) = altered.outputs
    assert (view["name"], view["operation"], view["dataset_type"]) == ("default.lw_v", "AlterViewAs", "VIEW")
    assert view["view_sql"] == "SELECT n AS id, s AS uk FROM lw_vsrc2"
    assert [i["symlinks"][0]["name"] for i in altered.inputs] == ["default.lw_vsrc2"]
    assert inputs_of(altered, "id") == {"n": {("DIRECT", "IDENTITY")}}
    # IF NOT EXISTS over an existing view changes nothing: no dataset is written or read.
    kept = capture.run(lambda: spark.sql("CREATE VIEW IF NOT EXISTS lw_v AS SELECT id, k FROM lw_vsrc"), creates_view)
    assert (kept.outputs, kept.inputs, kept.complete) == ([], [], True)


def test_a_read_of_a_view_names_the_view_in_every_kind_of_action(
        spark: Any, capture: Capture, source: str, tmp_path: pathlib.Path) -> None:
    spark.sql(f"CREATE VIEW lw_v (ident, key) AS {VIEW_TEXT}")
    catalog_ns = capture.run(lambda: spark.sql("CREATE VIEW lw_v2 AS SELECT ident FROM lw_v WHERE key <> 'x'"),
                             creates_view)
    # A view over a view reads the view.
    (inner,) = catalog_ns.inputs
    assert (inner["name"], inner["dataset_type"]) == ("default.lw_v", "VIEW")
    assert inputs_of(catalog_ns, "ident") == {"ident": {("DIRECT", "IDENTITY")}, "key": {("INDIRECT", "FILTER")}}
    view_id = (inner["namespace"], "default.lw_v")

    def only_the_view(result: Any) -> None:
        assert result.complete, result.incomplete_reason
        assert [(d["namespace"], d["name"]) for d in result.inputs] == [view_id], result.inputs
        assert result.inputs[0]["dataset_type"] == "VIEW"
        assert [f["name"] for f in result.inputs[0]["fields"]] == ["ident", "key"]

    # An optimized plan (the optimizer removes View nodes: the analyzed plan is read).
    written = capture.run(lambda: spark.table("lw_v").write.mode("overwrite").parquet(str(tmp_path / "out")))
    only_the_view(written)
    # Column lineage stops at the view: the view's own filter (on v) is the view's lineage, not this action's.
    assert inputs_of(written, "ident") == {"ident": {("DIRECT", "IDENTITY")}}
    assert inputs_of(written, "key") == {"key": {("DIRECT", "IDENTITY")}}
    assert {i["name"] for c in written.column_lineage for i in c["inputs"]} == {"default.lw_v"}
    # A command that keeps its query unoptimized (CTAS) names it the same way.
    ctas = capture.run(lambda: spark.sql("CREATE TABLE lw_from_view USING parquet AS SELECT ident, key FROM lw_v"),
                       lambda r: r.plan_node == "CreateDataSourceTableAsSelectCommand")
    only_the_view(ctas)
    assert inputs_of(ctas, "key") == {"key": {("DIRECT", "IDENTITY")}}
    # A read-only action, and a read through a temporary view over the view.
    only_the_view(capture.run(lambda: collect(spark.sql("SELECT * FROM lw_v")), reads))
    spark.table("lw_v").createOrReplaceTempView("lw_tv3")
    only_the_view(capture.run(lambda: collect(spark.table("lw_tv3").where("ident > 0")), reads))


def test_temporary_views_stay_transparent(spark: Any, capture: Capture, source: str, tmp_path: pathlib.Path) -> None:
    made = [capture.run(lambda: spark.table("lw_vsrc").createOrReplaceTempView("lw_tv"), creates_view),
            capture.run(lambda: spark.sql("CREATE TEMPORARY VIEW lw_tv2 AS SELECT id, k FROM lw_vsrc"),
                        creates_view),
            capture.run(lambda: spark.sql("ALTER VIEW lw_tv2 AS SELECT id, k FROM lw_vsrc WHERE v > 0"),
                        creates_view)]
    for result in made:
        assert (result.outputs, result.inputs, result.complete) == ([], [], True), result
    read = capture.run(lambda: spark.table("lw_tv2").write.mode("overwrite").parquet(str(tmp_path / "out")))
    assert read.complete, read.incomplete_reason
    (src,) = read.inputs
    assert src["name"] == f"{warehouse(spark)}/lw_vsrc" and src["dataset_type"] is None
    assert inputs_of(read, "id") == {"id": {("DIRECT", "IDENTITY")}, "v": {("INDIRECT", "FILTER")}}
