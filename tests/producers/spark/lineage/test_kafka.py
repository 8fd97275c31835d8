"""Kafka sources and sinks (spark-sql-kafka on the shared session) against the real local broker."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from lineagewire.config import Settings
from tests.producers.packages import require_package

from .conftest import Capture, collect, inputs_of, reads

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(autouse=True)
def _kafka_connector(spark: Any) -> None:
    require_package("spark-sql-kafka-0-10")  # the newest Spark may have no build of it yet


def test_kafka_sink_and_source(spark: Any, capture: Capture, kafka_settings: Settings,
                               topic_factory: Callable[..., str]) -> None:
    servers = kafka_settings.bootstrap_servers
    topic, copy = topic_factory("lw.lineage"), topic_factory("lw.lineage")
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id int, name string")
    written = capture.run(lambda: df.selectExpr("CAST(id AS string) AS key", "name AS value").write
                          .format("kafka").option("kafka.bootstrap.servers", servers).option("topic", topic).save())
    assert written.complete, written.incomplete_reason
    (out,) = written.outputs
    first = servers.split(",")[0]
    assert (out["namespace"], out["name"], out["format"]) == (f"kafka://{first}", topic, "kafka")

    source = (spark.read.format("kafka").option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic).load())
    read = capture.run(lambda: collect(source.selectExpr("CAST(value AS string) AS v")), reads)
    assert read.complete, read.incomplete_reason
    (src,) = read.inputs
    assert (src["namespace"], src["name"], src["format"]) == (f"kafka://{first}", topic, "kafka")
    assert "value" in [f["name"] for f in src["fields"]]

    moved = capture.run(lambda: source.selectExpr("key", "upper(CAST(value AS string)) AS value").write
                        .format("kafka").option("kafka.bootstrap.servers", servers).option("topic", copy).save())
    assert moved.outputs[0]["name"] == copy
    assert inputs_of(moved, "value") == {"value": {("DIRECT", "TRANSFORMATION")}}
    assert inputs_of(moved, "key") == {"key": {("DIRECT", "IDENTITY")}}


def test_kafka_sink_with_topic_per_row_is_incomplete(spark: Any, capture: Capture, kafka_settings: Settings,
                                                     topic_factory: Callable[..., str]) -> None:
    topic = topic_factory("lw.lineage")
    df = spark.createDataFrame([(topic, "a")], "topic string, value string")
    result = capture.run(lambda: df.write.format("kafka")
                         .option("kafka.bootstrap.servers", kafka_settings.bootstrap_servers).save(),
                         lambda r: r.plan_node == "SaveIntoDataSourceCommand")
    assert not result.complete
    assert "topic" in (result.incomplete_reason or "")


def test_foreach_batch_writes_read_the_streaming_querys_topic(spark: Any, capture: Capture, kafka_settings: Settings,
                                                              topic_factory: Callable[..., str],
                                                              tmp_path: pathlib.Path) -> None:
    from pyspark.sql import SparkSession

    servers = kafka_settings.bootstrap_servers
    topic = topic_factory("lw.lineage")

    def produce(n: int) -> None:
        spark.createDataFrame([(str(n), f"v{n}")], "key string, value string").write.format("kafka") \
            .option("kafka.bootstrap.servers", servers).option("topic", topic).save()

    produce(0)
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic).option("startingOffsets", "earliest").load())
    out = str(tmp_path / "out")

    def write(batch: Any, batch_id: int) -> None:
        batch.selectExpr("CAST(value AS string) AS text", "partition").write.mode("append").parquet(out)

    def batch_write(r: Any) -> bool:
        return any(o["name"] == out for o in r.outputs)

    started: list[Any] = []
    try:
        # The query keeps running (a processing-time trigger): the batch's write is extracted while it is active.
        result = capture.run(lambda: started.append(
            stream.writeStream.foreachBatch(write).option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="1 second").start()), batch_write)
        more = 1
        while not result.complete and more < 4:
            # The first batch's extraction also reads the query's plan; on a loaded machine that can run over
            # the 1 s budget (then it is partial, with the reason). Later batches reuse what it found.
            result = capture.run(lambda n=more: produce(n), batch_write)
            more += 1
    finally:
        for query in started:
            query.stop()
        # PySpark's foreachBatch wrapper wraps the query's session (a clone) in a Python SparkSession, which
        # re-binds RDD.toDF to it: later tests' rdd.toDF() would run without their listener. A SparkSession
        # made on the context wraps the default (shared) one and binds toDF back to it.
        SparkSession(spark.sparkContext)
    assert result.complete, result.incomplete_reason
    (src,) = result.inputs
    first = servers.split(",")[0]
    assert (src["namespace"], src["name"], src["format"]) == (f"kafka://{first}", topic, "kafka")
    assert src["properties"]["via"] == "foreachBatch"
    assert inputs_of(result, "text") == {"value": {("DIRECT", "TRANSFORMATION")}}
    assert inputs_of(result, "partition") == {"partition": {("DIRECT", "IDENTITY")}}
