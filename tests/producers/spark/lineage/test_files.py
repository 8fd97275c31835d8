"""File sources and sinks (parquet, csv, json, orc, text) through the real SparkSession."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from .conftest import Capture, by_name, collect, inputs_of, reads

pytestmark = pytest.mark.spark


@pytest.fixture
def people(spark: Any) -> Any:
    return spark.createDataFrame([(1, "ann", 10.0), (2, "bob", 20.0)], "id int, name string, score double")


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json", "orc"])
def test_file_sink_and_source(spark: Any, capture: Capture, people: Any, tmp_path: pathlib.Path, fmt: str) -> None:
    target = tmp_path / f"people_{fmt}"
    written = capture.run(lambda: people.write.format(fmt).option("header", "true").save(str(target)))
    assert written.complete, written.incomplete_reason
    assert written.plan_node == "InsertIntoHadoopFsRelationCommand"
    (out,) = written.outputs
    assert (out["namespace"], out["name"], out["format"]) == ("file", str(target), fmt)
    assert out["operation"] == "ErrorIfExists"
    assert [(f["name"], f["type"]) for f in out["fields"]] == [("id", "int"), ("name", "string"),
                                                               ("score", "double")]
    assert written.inputs == []  # an in-memory DataFrame is no dataset

    copy = tmp_path / f"copy_{fmt}"
    reader = spark.read.format(fmt).option("header", "true").schema("id int, name string, score double")
    result = capture.run(lambda: reader.load(str(target)).write.mode("append").parquet(str(copy)))
    assert result.complete, result.incomplete_reason
    assert [(d["namespace"], d["name"], d["format"]) for d in result.inputs] == [("file", str(target), fmt)]
    assert result.outputs[0]["operation"] == "Append"
    assert inputs_of(result, "name") == {"name": {("DIRECT", "IDENTITY")}}
    src = result.column_lineage[0]["inputs"][0]
    assert (src["namespace"], src["name"]) == ("file", str(target))


def test_text_source_and_sink(spark: Any, capture: Capture, tmp_path: pathlib.Path) -> None:
    src = tmp_path / "lines.txt"
    src.write_text("a\nb\n")
    target = tmp_path / "upper"
    from pyspark.sql import functions as F  # noqa: N812

    result = capture.run(lambda: spark.read.text(str(src)).select(F.upper("value").alias("value"))
                         .write.text(str(target)))
    assert result.complete, result.incomplete_reason
    assert by_name(result.inputs)[str(src)]["format"] == "text"
    assert by_name(result.outputs)[str(target)]["format"] == "text"
    assert inputs_of(result, "value") == {"value": {("DIRECT", "TRANSFORMATION")}}


def test_collect_reports_inputs_without_outputs(spark: Any, capture: Capture, people: Any,
                                                tmp_path: pathlib.Path) -> None:
    people.write.parquet(str(tmp_path / "p"))
    result = capture.run(lambda: collect(spark.read.parquet(str(tmp_path / "p")).where("score > 1")), reads)
    assert result.complete, result.incomplete_reason
    assert result.outputs == [] and result.column_lineage == []
    (ds,) = result.inputs
    assert ds["name"] == str(tmp_path / "p") and ds["boundedness"] == "BOUNDED"
    assert [f["name"] for f in ds["fields"]] == ["id", "name", "score"]


def test_several_paths_and_partitioned_write(spark: Any, capture: Capture, people: Any,
                                             tmp_path: pathlib.Path) -> None:
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "by_name"
    people.write.parquet(str(a))
    people.write.parquet(str(b))
    result = capture.run(lambda: spark.read.parquet(str(a), str(b)).write.partitionBy("name").parquet(str(out)))
    assert result.complete, result.incomplete_reason
    assert sorted(d["name"] for d in result.inputs) == [str(a), str(b)]
    assert result.outputs[0]["name"] == str(out)
    assert result.outputs[0]["partition_values"] == {}  # dynamic partitions: no static values
    ids = {(i["name"], i["field"]) for i in result.column_lineage[0]["inputs"]}
    assert ids == {(str(a), "id"), (str(b), "id")}


def test_failed_write_still_names_its_datasets(spark: Any, capture: Capture, people: Any,
                                               tmp_path: pathlib.Path) -> None:
    from pyspark.errors import AnalysisException

    src, target = tmp_path / "src", tmp_path / "exists"
    people.write.parquet(str(src))
    people.write.parquet(str(target))

    def fail() -> None:
        with pytest.raises(AnalysisException):
            spark.read.parquet(str(src)).write.parquet(str(target))  # ErrorIfExists: the path exists

    result = capture.run(fail)
    assert result.plan_node == "InsertIntoHadoopFsRelationCommand"
    assert [d["name"] for d in result.outputs] == [str(target)]
    assert [d["name"] for d in result.inputs] == [str(src)]


def test_datasource_v2_file_source(spark: Any, capture: Capture, people: Any, tmp_path: pathlib.Path) -> None:
    """With the V1 list emptied, file reads go through DataSourceV2 (ParquetTable): same names and lineage."""
    src, out = tmp_path / "v2src", tmp_path / "v2out"
    people.write.parquet(str(src))
    previous = spark.conf.get("spark.sql.sources.useV1SourceList")
    spark.conf.set("spark.sql.sources.useV1SourceList", "")
    try:
        df = spark.read.parquet(str(src)).selectExpr("id", "upper(name) AS name")
        result = capture.run(lambda: df.write.parquet(str(out)))
    finally:
        spark.conf.set("spark.sql.sources.useV1SourceList", previous)
    assert result.complete, result.incomplete_reason
    assert [(d["namespace"], d["name"], d["format"]) for d in result.inputs] == [("file", str(src), "parquet")]
    assert inputs_of(result, "name") == {"name": {("DIRECT", "TRANSFORMATION")}}


def test_insert_overwrite_directory(spark: Any, capture: Capture, people: Any, tmp_path: pathlib.Path) -> None:
    src, target = tmp_path / "src", tmp_path / "dir"
    people.write.parquet(str(src))
    spark.read.parquet(str(src)).createOrReplaceTempView("lw_people")
    try:
        result = capture.run(lambda: spark.sql(
            f"INSERT OVERWRITE DIRECTORY '{target}' USING json SELECT id, upper(name) AS u FROM lw_people"),
            lambda r: r.plan_node == "InsertIntoDataSourceDirCommand")
    finally:
        spark.catalog.dropTempView("lw_people")
    assert result.complete, result.incomplete_reason
    (out,) = result.outputs
    assert (out["namespace"], out["name"], out["format"], out["operation"]) == ("file", str(target), "json",
                                                                                "Overwrite")
    assert inputs_of(result, "u") == {"name": {("DIRECT", "TRANSFORMATION")}}


def test_noop_v2_sink_reports_inputs_only(spark: Any, capture: Capture, people: Any,
                                          tmp_path: pathlib.Path) -> None:
    """format("noop") is a DataSourceV2 write (AppendData / OverwriteByExpression) that stores nothing."""
    people.write.parquet(str(tmp_path / "src"))
    for mode, node in (("append", "AppendData"), ("overwrite", "OverwriteByExpression")):
        result = capture.run(lambda m=mode: spark.read.parquet(str(tmp_path / "src")).write.format("noop")
                             .mode(m).save(), lambda r, n=node: r.plan_node == n)
        assert result.complete, result.incomplete_reason
        assert result.outputs == [] and result.column_lineage == []
        assert [d["name"] for d in result.inputs] == [str(tmp_path / "src")]


def test_cached_dataframe_still_names_its_files(spark: Any, capture: Capture, people: Any,
                                                tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src"
    people.write.parquet(str(src))
    cached = spark.read.parquet(str(src)).where("score > 0").cache()
    try:
        cached.count()
        result = capture.run(lambda: cached.selectExpr("id", "score * 2 AS double_score")
                             .write.parquet(str(tmp_path / "out")))
    finally:
        cached.unpersist()
    assert result.complete, result.incomplete_reason
    assert [d["name"] for d in result.inputs] == [str(src)]
    assert inputs_of(result, "double_score") == {"score": {("DIRECT", "TRANSFORMATION"), ("INDIRECT", "FILTER")}}
