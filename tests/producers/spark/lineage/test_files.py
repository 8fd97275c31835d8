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
