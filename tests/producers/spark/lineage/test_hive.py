"""Hive tables through Spark's embedded metastore (Derby in a temporary folder).

A session with Hive support needs its own JVM: the scenarios run in a child process
(see ``isolated.py``) at the emitter's shipped time budget, and each test checks one
of their results. ``STORED AS TEXTFILE`` tables stay Hive SerDe tables
(``HiveTableRelation``, ``InsertIntoHiveTable``); ``STORED AS PARQUET`` tables are
converted by Spark to its own file source, the path most Hive tables take.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from .conftest import collect, inputs_of
from .isolated import Scenarios, scenario

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]


def _node(name: str) -> Any:
    # Match the action by its plan node, so a missing output fails the test that checks it, not the scenario.
    return lambda r: r.plan_node == name


@scenario
def hive_tables(spark: Any, capture: Any, folder: pathlib.Path) -> dict[str, Any]:
    out = {}
    out["create"] = capture.run(
        lambda: spark.sql("CREATE TABLE hv_src (id INT, name STRING) STORED AS TEXTFILE"), _node("CreateTableCommand"))
    spark.sql("INSERT INTO hv_src VALUES (1, 'a'), (2, 'b')")
    out["read"] = capture.run(lambda: collect(spark.table("hv_src").where("id > 0")), lambda r: bool(r.inputs))
    out["ctas"] = capture.run(
        lambda: spark.sql("CREATE TABLE hv_ctas STORED AS ORC AS SELECT id, upper(name) AS uname FROM hv_src"),
        lambda r: r.plan_node == "CreateHiveTableAsSelectCommand")
    spark.sql("CREATE TABLE hv_part (id INT, uname STRING) PARTITIONED BY (ds STRING) STORED AS TEXTFILE")
    out["insert_text"] = capture.run(lambda: spark.sql(
        "INSERT OVERWRITE TABLE hv_part PARTITION (ds='2024-01-01') SELECT id, upper(name) FROM hv_src"),
        _node("InsertIntoHiveTable"))
    spark.sql("CREATE TABLE hv_ppart (id INT, uname STRING) PARTITIONED BY (ds STRING) STORED AS PARQUET")
    out["insert_parquet"] = capture.run(lambda: spark.sql(
        "INSERT OVERWRITE TABLE hv_ppart PARTITION (ds='2024-01-02') SELECT id, upper(name) FROM hv_src"))
    out["read_parquet"] = capture.run(lambda: collect(spark.table("hv_ppart")), lambda r: bool(r.inputs))
    return out


def _view(r: Any) -> bool:
    return r.plan_node in ("CreateViewCommand", "AlterViewAsCommand")


@scenario
def hive_views(spark: Any, capture: Any, folder: pathlib.Path) -> dict[str, Any]:
    spark.sql("CREATE TABLE hv_vsrc (id INT, name STRING) STORED AS TEXTFILE")
    spark.sql("INSERT INTO hv_vsrc VALUES (1, 'a'), (2, 'b')")
    spark.sql("CREATE TABLE hv_vout (id INT, uname STRING) STORED AS TEXTFILE")
    out = {}
    out["create"] = capture.run(lambda: spark.sql(
        "CREATE VIEW hv_v AS SELECT id, upper(name) AS uname FROM hv_vsrc WHERE id > 0"), _view)
    out["replace"] = capture.run(lambda: spark.sql(
        "CREATE OR REPLACE VIEW hv_v AS SELECT id, name AS uname FROM hv_vsrc"), _view)
    out["alter"] = capture.run(lambda: spark.sql("ALTER VIEW hv_v AS SELECT id, lower(name) AS uname FROM hv_vsrc"),
                               _view)
    out["read"] = capture.run(lambda: spark.sql("INSERT OVERWRITE TABLE hv_vout SELECT * FROM hv_v"),
                              _node("InsertIntoHiveTable"))
    out["temporary"] = capture.run(lambda: spark.sql("CREATE TEMPORARY VIEW hv_tv AS SELECT * FROM hv_vsrc"), _view)
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Scenarios:
    return Scenarios.run(__name__, "hive", tmp_path_factory.mktemp("hive"))


def _warehouse_table(ds: dict[str, Any], table: str) -> None:
    assert ds["namespace"] == "file" and ds["name"].endswith(f"/warehouse/{table}"), ds["name"]
    (link,) = ds["symlinks"]
    assert (link["name"], link["type"]) == (f"default.{table}", "TABLE")
    assert link["namespace"].startswith("file:") and link["namespace"].endswith("/warehouse")


def test_create_table_stored_as_names_the_new_table(results: Scenarios) -> None:
    result = results["hive_tables"]["create"]
    assert result.complete, result.incomplete_reason
    assert result.inputs == []
    (out,) = result.outputs
    _warehouse_table(out, "hv_src")
    assert (out["format"], out["operation"]) == ("textfile", "CreateTable")
    assert [(f["name"], f["type"]) for f in out["fields"]] == [("id", "int"), ("name", "string")]


def test_read_of_a_hive_serde_table(results: Scenarios) -> None:
    result = results["hive_tables"]["read"]
    assert result.complete, result.incomplete_reason
    (src,) = result.inputs
    _warehouse_table(src, "hv_src")
    assert src["format"] == "textfile"
    assert [f["name"] for f in src["fields"]] == ["id", "name"]


def test_ctas_stored_as_orc(results: Scenarios) -> None:
    result = results["hive_tables"]["ctas"]
    assert result.complete, result.incomplete_reason
    (src,) = result.inputs
    _warehouse_table(src, "hv_src")
    (out,) = result.outputs
    _warehouse_table(out, "hv_ctas")
    assert (out["format"], out["operation"]) == ("orc", "CreateTableAsSelect")
    assert out["properties"]["mode"] == "ErrorIfExists"
    assert inputs_of(result, "uname") == {"name": {("DIRECT", "TRANSFORMATION")}}
    assert inputs_of(result, "id") == {"id": {("DIRECT", "IDENTITY")}}


def test_insert_overwrite_static_partition_of_a_hive_serde_table(results: Scenarios) -> None:
    result = results["hive_tables"]["insert_text"]
    assert result.complete, result.incomplete_reason
    assert result.plan_node == "InsertIntoHiveTable"
    (out,) = result.outputs
    _warehouse_table(out, "hv_part")
    assert (out["format"], out["operation"]) == ("textfile", "Overwrite")
    assert out["partition_values"] == {"ds": "2024-01-01"}
    assert inputs_of(result, "uname") == {"name": {("DIRECT", "TRANSFORMATION")}}
    assert result.sql is not None and "PARTITION (ds='2024-01-01')" in result.sql


def test_insert_overwrite_partition_of_a_converted_parquet_table_and_its_read(results: Scenarios) -> None:
    result = results["hive_tables"]["insert_parquet"]
    assert result.complete, result.incomplete_reason
    (out,) = result.outputs
    _warehouse_table(out, "hv_ppart")
    assert (out["format"], out["operation"]) == ("parquet", "Overwrite")
    assert out["partition_values"] == {"ds": "2024-01-02"}
    (src,) = result.inputs
    _warehouse_table(src, "hv_src")
    read = results["hive_tables"]["read_parquet"]
    (back,) = read.inputs
    _warehouse_table(back, "hv_ppart")
    assert back["format"] == "parquet"


def test_views_in_the_hive_metastore_are_outputs_and_their_reads_name_them(results: Scenarios) -> None:
    views = results["hive_views"]
    for key, operation, text in (
            ("create", "CreateView", "SELECT id, upper(name) AS uname FROM hv_vsrc WHERE id > 0"),
            ("replace", "CreateOrReplaceView", "SELECT id, name AS uname FROM hv_vsrc"),
            ("alter", "AlterViewAs", "SELECT id, lower(name) AS uname FROM hv_vsrc")):
        result = views[key]
        assert result.complete, (key, result.incomplete_reason)
        (view,) = result.outputs
        (link,) = view["symlinks"]
        # No location: named by the catalog's namespace (the metastore's warehouse here) and its name.
        assert (view["namespace"], view["name"]) == (link["namespace"], "default.hv_v") and link["type"] == "TABLE"
        assert link["namespace"].startswith("file:") and link["namespace"].endswith("/warehouse")
        assert (view["dataset_type"], view["operation"], view["view_sql"]) == ("VIEW", operation, text)
        assert [(f["name"], f["type"]) for f in view["fields"]] == [("id", "int"), ("uname", "string")]
        (src,) = result.inputs
        _warehouse_table(src, "hv_vsrc")
        assert inputs_of(result, "uname")["name"] == {("DIRECT", "IDENTITY" if key == "replace" else "TRANSFORMATION")}
    read = views["read"]
    assert read.complete, read.incomplete_reason
    (src,) = read.inputs
    assert (src["name"], src["dataset_type"]) == ("default.hv_v", "VIEW")
    assert inputs_of(read, "uname") == {"uname": {("DIRECT", "IDENTITY")}}
    temporary = views["temporary"]
    assert (temporary.outputs, temporary.inputs, temporary.complete) == ([], [], True)
