"""Streaming sinks: their descriptions (every known form), and Delta sinks through a Delta session of its own.

The Delta scenarios run in a child process (``isolated.py``) with the emitter installed there (file
listener): a windowed aggregation with a watermark written to a Delta folder by path and to a Delta table
by ``toTable``, with no ``queryName``.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest

from lineagewire.producers.spark.lineage import described_path, sink_description
from tests.producers.spark.windowed import micro_batch_written, read_events, windowed_totals

from .conftest import inputs_of
from .isolated import Scenarios, scenario


@pytest.mark.parametrize(("description", "expected"), [
    ("DeltaSink[/data/out]", ("file", "/data/out", "delta")),
    ("DeltaSink[file:/data/out]", ("file", "/data/out", "delta")),
    ("DeltaSink[s3a://bucket/tables/out]", ("s3://bucket", "tables/out", "delta")),
    ("FileSink[file:/data/out]", ("file", "/data/out", None)),
    ("FileSink[hdfs://nn:8020/data/out]", ("hdfs://nn:8020", "/data/out", None)),
    ("ForeachBatchSink", "foreachBatch"),
    ("MemorySink", "memory"),
    ("org.apache.spark.sql.execution.streaming.ConsoleTable$@4407606c", "console"),
    ("org.apache.spark.sql.execution.datasources.noop.NoopTable$@6f1bb8", "noop"),
    ("org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable@1a2b3c", "kafka"),
    ("org.apache.spark.sql.execution.streaming.sources.ForeachWriterTable@77aa", "foreach"),
])
def test_sink_description_names_each_known_form(description: str, expected: Any) -> None:
    assert sink_description(description) == expected


def test_relative_sink_path_is_under_the_working_folder() -> None:
    assert sink_description("DeltaSink[out/events]") == ("file", os.path.abspath("out/events"), "delta")


@pytest.mark.parametrize(("description", "expected"), [
    ("FileStreamSource[file:/data/in]", ("file", "/data/in", None)),
    ("DeltaSource[file:/data/table]", ("file", "/data/table", "delta")),
    ("KafkaV2[Subscribe[t]]", None),
    ("DeltaSink[]", None),
])
def test_described_path_of_sources_and_sinks(description: str, expected: Any) -> None:
    assert described_path(description) == expected


# -- Delta Lake, in a session of its own -------------------------------------------------------------------


@scenario
def delta_stream(spark: Any, capture: Any, folder: pathlib.Path) -> dict[str, Any]:
    from lineagewire.producers.spark import install
    from lineagewire.producers.spark.lineage import extract_stream_lineage
    from tests.helpers import wait_for

    emitter = install(spark, listeners=["file"], config={
        "file_path": str(folder / "events.jsonl"), "outbox_dir": str(folder / "outbox"),
        "streaming_listener": "true", "heartbeat": "0"})
    totals = windowed_totals(spark, folder)
    out = {}
    try:
        for name, start in [
            ("path", lambda w: w.start(str(folder / "by_path"))),
            ("table", lambda w: w.toTable("stream_totals")),
        ]:
            query = start(totals.writeStream.format("delta").outputMode("append")
                          .option("checkpointLocation", str(folder / f"checkpoint_{name}"))
                          .trigger(processingTime="500 milliseconds"))
            try:
                # This query's own progress (its plan is built by then), and the emitter's event of it.
                wait_for(lambda q=query: q.lastProgress is not None and micro_batch_written(
                    folder / "events.jsonl", str(q.runId)), timeout=300)
                out[name] = extract_stream_lineage(query._jsq.streamingQuery(), budget_s=capture.budget_s)
            finally:
                query.stop()
    finally:
        emitter.close(30)
    return out


@pytest.fixture(scope="module")
def delta_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scenarios, pathlib.Path]:
    import pyspark

    wanted = {"3.5": "3.3.*", "4.0": "4.0.*"}.get(".".join(pyspark.__version__.split(".")[:2]))
    reason = (f"delta-spark is not installed (pip install 'delta-spark=={wanted}')" if wanted else
              f"no delta-spark build for PySpark {pyspark.__version__} exists (delta-spark 4.0 is for Spark 4.0)")
    pytest.importorskip("delta", reason=reason)
    folder = tmp_path_factory.mktemp("delta_stream")
    return Scenarios.run(__name__, "delta", folder), folder


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_delta_stream_sink_by_path_and_table_named_clean_with_windowed_column_lineage(
        delta_results: tuple[Scenarios, pathlib.Path]) -> None:
    results, folder = delta_results
    got = results["delta_stream"]
    base = folder / "delta_stream"
    source = str(base / "in")
    table = folder / "warehouse" / "stream_totals"
    for name, path in [("path", base / "by_path"), ("table", table)]:
        result = got[name]
        assert result.complete, result.incomplete_reason
        assert [(d["namespace"], d["name"], d["format"]) for d in result.inputs] == [("file", source, None)]
        (output,) = result.outputs
        assert (output["namespace"], output["name"], output["format"]) == ("file", str(path), "delta")
        assert output["operation"] == "Append" and output["boundedness"] == "CONTINUOUS_UNBOUNDED"
        if name == "table":  # toTable: the table's folder in the warehouse, and its TABLE symlink
            assert [s["name"] for s in output["symlinks"]] == ["default.stream_totals"]
        # The window struct comes from the event-time column, the total from the amounts; the user is copied.
        direct = {field: {i for i, how in inputs_of(result, field).items() if ("DIRECT", kind) in how}
                  for field, kind in [("window", "TRANSFORMATION"), ("user", "IDENTITY"), ("total", "AGGREGATION")]}
        assert direct == {"window": {"ts"}, "user": {"user"}, "total": {"amount"}}

    events = read_events(base / "events.jsonl")
    streams = [e for e in events if e.get("spec", {}).get("job_type") == "STREAMING"]
    app = next(e["header"]["job_name"] for e in events if e.get("spec", {}).get("job_type") == "BATCH")
    names = [e["header"]["job_name"] for e in streams]
    assert names[0] == f"{app}.stream.{base / 'by_path'}"
    assert names[1] == f"{app}.stream.{table}"
    progress = [e for e in events if e["header"]["job_name"] in names and e.get("action_name") == "microBatch"]
    assert {(o["namespace"], o["name"]) for e in progress for o in e["outputs"]} == \
        {("file", str(base / "by_path")), ("file", str(table))}
