"""What the extractor returns fits the Avro contract as it is: encode and decode an ActionLineageEvent."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from lineagewire.schemas.codec import Codec
from lineagewire.schemas.events import action_lineage, header

from .conftest import Capture

pytestmark = pytest.mark.spark


def test_rich_lineage_round_trips_through_the_codec(spark: Any, capture: Capture, tmp_path: pathlib.Path) -> None:
    left, right = str(tmp_path / "l"), str(tmp_path / "r")
    spark.createDataFrame([(1, "a", ("x", [1]))], "id int, k string, s struct<t:string, n:array<int>>") \
        .write.parquet(left)
    spark.createDataFrame([(1, 2.0)], "id int, v double").write.parquet(right)
    spark.read.parquet(left).createOrReplaceTempView("lw_l")
    spark.read.parquet(right).createOrReplaceTempView("lw_r")
    try:
        df = spark.sql("SELECT l.k, l.s, sum(r.v) AS total FROM lw_l l JOIN lw_r r ON l.id = r.id "
                       "WHERE r.v > 0 GROUP BY l.k, l.s")
        result = capture.run(lambda: df.write.mode("overwrite").parquet(str(tmp_path / "out")))
    finally:
        spark.catalog.dropTempView("lw_l")
        spark.catalog.dropTempView("lw_r")
    assert result.complete, result.incomplete_reason
    hdr = header("ActionLineageEvent", job_namespace="tests", job_name="lineage", run_id="r-1")
    event = action_lineage(hdr, "a-1", "command", inputs=result.inputs, outputs=result.outputs,
                           column_lineage=result.column_lineage, plan_node=result.plan_node, sql=result.sql,
                           lineage_complete=result.complete, incomplete_reason=result.incomplete_reason)
    codec = Codec()
    decoded = codec.decode(codec.encode(event))
    assert decoded["outputs"] == result.outputs
    assert decoded["inputs"] == result.inputs
    assert decoded["column_lineage"] == result.column_lineage
    assert {c["field"] for c in decoded["column_lineage"]} == {"k", "s", "total"}
