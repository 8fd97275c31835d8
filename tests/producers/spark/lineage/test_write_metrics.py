"""Rows and bytes written (the outputs' ``row_count`` and ``byte_count``) from Spark's write metrics, through the
real SparkSession; and no look-up of them for an action that writes nothing."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from lineagewire.producers.spark.lineage import ActionLineage, metrics

from .conftest import Capture, collect, reads

ROWS = 1234


def counted(result: ActionLineage) -> bool:
    return any(o.get("row_count") is not None for o in result.outputs)


def data_bytes(folder: pathlib.Path) -> int:
    """What Spark counts as written: the data files, not the commit markers and checksums beside them."""
    return sum(p.stat().st_size for p in folder.rglob("part-*") if not p.name.startswith("."))


@pytest.fixture
def attach_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each call of ``metrics.attach`` (the only place that asks Spark for write metrics), by its output count."""
    calls: list[int] = []
    real = metrics.attach

    def spy(extraction: Any) -> None:
        calls.append(len(extraction.result.outputs))
        real(extraction)

    monkeypatch.setattr(metrics, "attach", spy)
    return calls


@pytest.fixture
def table(spark: Any) -> Iterator[str]:
    yield "lw_metrics_orders"
    spark.sql("DROP TABLE IF EXISTS lw_metrics_orders")


@pytest.mark.spark
def test_a_parquet_write_reports_its_rows_and_the_bytes_of_its_files(spark: Any, capture: Capture,
                                                                      tmp_path: pathlib.Path) -> None:
    target = tmp_path / "orders"
    df = spark.range(ROWS).selectExpr("id", "cast(id * 2 as string) AS doubled")
    result = capture.run(lambda: df.repartition(3).write.parquet(str(target)))
    assert result.complete, result.incomplete_reason
    (out,) = result.outputs
    assert out["name"] == str(target)
    assert out["row_count"] == ROWS
    assert out["byte_count"] == data_bytes(target) > 0


@pytest.mark.spark
def test_save_as_table_reports_the_rows_written_into_the_table(spark: Any, capture: Capture, table: str) -> None:
    df = spark.range(ROWS).selectExpr("id", "id % 7 AS k")
    # The CTAS runs its insert as an action of its own: Spark counts the rows there, on the same dataset.
    result = capture.run(lambda: df.write.saveAsTable(table), counted)
    (out,) = result.outputs
    warehouse = spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:").rstrip("/")
    assert out["name"] == f"{warehouse}/{table}"
    assert out["row_count"] == ROWS
    assert out["byte_count"] == data_bytes(pathlib.Path(out["name"])) > 0

    appended = capture.run(lambda: spark.sql(f"INSERT INTO {table} SELECT * FROM {table} WHERE k = 0"), counted)
    assert appended.outputs[0]["row_count"] == len([i for i in range(ROWS) if i % 7 == 0])


@pytest.mark.spark
def test_a_read_only_action_asks_spark_for_no_write_metrics(spark: Any, capture: Capture, tmp_path: pathlib.Path,
                                                            attach_calls: list[int]) -> None:
    source = tmp_path / "source"
    spark.range(10).write.parquet(str(source))
    capture.settle()
    attach_calls.clear()
    read = capture.run(lambda: collect(spark.read.parquet(str(source)).where("id > 3")), reads)
    assert read.outputs == []
    assert attach_calls == []

    written = capture.run(lambda: spark.read.parquet(str(source)).write.parquet(str(tmp_path / "copy")))
    assert attach_calls == [1]  # the spy sees writes: its silence above is the read's
    assert written.outputs[0]["row_count"] == 10


@pytest.mark.spark
def test_ddl_without_write_metrics_leaves_the_counts_null(spark: Any, capture: Capture, table: str) -> None:
    result = capture.run(lambda: spark.sql(f"CREATE TABLE {table} (id bigint) USING parquet"))
    (out,) = result.outputs
    assert (out.get("row_count"), out.get("byte_count")) == (None, None)


@pytest.mark.parametrize(("text", "expected"), [
    ("HashMap(numFiles -> SQLMetric(id: 1, name: Some(number of written files), value: 1), "
     "numOutputRows -> SQLMetric(id: 3, name: Some(number of output rows), value: 100), "
     "numOutputBytes -> SQLMetric(id: 2, name: Some(written output), value: 1547))",
     {"row_count": 100, "byte_count": 1547}),
    ("Map(numOutputRows -> SQLMetric(id: 3, name: Some(number of output rows), value: 0))",
     {"row_count": 0, "byte_count": None}),
    ("Map(numOutputBytes -> SQLMetric(id: 2, name: Some(written output), value: -1))",
     {"row_count": None, "byte_count": None}),
    ("Map()", {"row_count": None, "byte_count": None}),
])
def test_the_metrics_text_gives_the_counts_it_has(text: str, expected: dict[str, int | None]) -> None:
    assert metrics.parse_write_metrics(text) == expected
