"""The promise: never raise; past the time budget return what there is, marked incomplete."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from lineagewire.producers.spark.lineage import ActionLineage, extract_action_lineage

from ..listening import query_listener
from .conftest import Capture


class BrokenQe:
    """Stands in for a QueryExecution whose plan cannot be read (unit test: no Spark)."""

    def analyzed(self) -> Any:
        raise RuntimeError("py4j gateway is gone")


class WeirdJsonQe:
    def __init__(self, text: str) -> None:
        self.text = text

    def analyzed(self) -> Any:
        return self

    def toJSON(self) -> str:  # noqa: N802 - mirrors the JVM method
        return self.text


def test_unreadable_plan_is_reported_not_raised() -> None:
    result = extract_action_lineage(BrokenQe(), "collect", budget_s=1.0)
    assert isinstance(result, ActionLineage)
    assert not result.complete
    assert "RuntimeError" in (result.incomplete_reason or "") and "collect" in (result.incomplete_reason or "")


@pytest.mark.parametrize("text", ["not json", "[]", "{}", '[{"num-children": 1}]',
                                  '[{"class": "X", "num-children": 3}]'])
def test_malformed_plan_json_is_reported_not_raised(text: str) -> None:
    result = extract_action_lineage(WeirdJsonQe(text), "command", budget_s=1.0)
    assert not result.complete
    assert result.incomplete_reason
    assert result.inputs == [] and result.outputs == []


@pytest.mark.spark
def test_exhausted_budget_returns_partial_result_with_reason(spark: Any, tmp_path: pathlib.Path) -> None:
    with query_listener(spark, Capture(spark, budget_s=0.0)) as zero:
        df = spark.createDataFrame([(1, "a")], "id int, name string")
        result = zero.run(lambda: df.write.parquet(str(tmp_path / "out")),
                          lambda r: r.plan_node == "InsertIntoHadoopFsRelationCommand")
    assert not result.complete
    assert "time budget of 0 ms exceeded" in (result.incomplete_reason or "")
    assert result.column_lineage == []


@pytest.mark.spark
def test_nested_schema_facet(spark: Any, capture: Capture, tmp_path: pathlib.Path) -> None:
    df = spark.createDataFrame([(1, ("x", [1, 2]), {"k": 1.0})],
                               "id int, info struct<tag:string, nums:array<int>>, m map<string,double>")
    result = capture.run(lambda: df.selectExpr("id", "info", "m", "info.tag AS tag").write.parquet(str(tmp_path / "n")))
    assert result.complete, result.incomplete_reason
    fields = {f["name"]: f for f in result.outputs[0]["fields"]}
    info = fields["info"]
    assert info["type"] == "struct"
    assert [(f["name"], f["type"]) for f in info["fields"]] == [("tag", "string"), ("nums", "array")]
    assert info["fields"][1]["fields"][0] == {"name": "_element", "type": "int", "nullable": True,
                                             "description": None, "fields": []}
    assert [f["name"] for f in fields["m"]["fields"]] == ["key", "value"]
    assert fields["tag"]["type"] == "string"
