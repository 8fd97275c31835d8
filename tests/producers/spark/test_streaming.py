"""A streaming query is a run of its own: started, throttled progress, terminated."""

from __future__ import annotations

import json

import pytest

from tests.helpers import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_streaming_query_run_started_progress_terminated(spark, make_emitter, tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path), "streaming_listener": "true",
                                                       "heartbeat": "0"})
    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .writeStream.format("noop").queryName("rates_to_noop").trigger(processingTime="300 milliseconds")
             .start())
    try:
        # Three progress callbacks reached the emitter (not only Spark's batches ran): with heartbeat 0 each is sent.
        wait_for(lambda: emitter.stats()["stream_progress"]["seen"] >= 3, timeout=120)
    finally:
        query.stop()
    emitter.close(20)

    events = [json.loads(line) for line in path.read_text().splitlines()]
    stream = sorted((e for e in events if e["header"]["job_name"] == "rates_to_noop"),
                    key=lambda e: e["header"]["sequence"])
    assert stream[0]["spec"]["job_type"] == "STREAMING"
    assert stream[0]["header"]["run_id"] == str(query.runId)
    assert stream[0]["header"]["parent_run"]["run_id"] == emitter.app_run.run_id
    statuses = [(e["old_status"], e["new_status"]) for e in stream if "new_status" in e]
    assert statuses == [("CREATED", "RUNNING"), ("RUNNING", "FINISHED")]
    batches = [e for e in stream if e["header"]["schema_name"].endswith("ActionLineageEvent")]
    assert len(batches) >= 2 and all(b["action_status"] == "RUNNING" for b in batches)
    assert all(b["inputs"][0]["boundedness"] == "CONTINUOUS_UNBOUNDED" for b in batches)
    assert [e["header"]["sequence"] for e in stream] == list(range(len(stream)))


def test_heartbeat_throttles_progress_events(spark, make_emitter, tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path), "streaming_listener": "true",
                                                       "heartbeat": "3600"})
    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .writeStream.format("noop").queryName("throttled").trigger(processingTime="200 milliseconds").start())
    try:
        # The throttle is only tested once several progress callbacks reached the emitter, whatever the machine's pace.
        wait_for(lambda: emitter.stats()["stream_progress"]["seen"] >= 4, timeout=120)
    finally:
        query.stop()
    seen = emitter.stats()["stream_progress"]["seen"]
    emitter.close(20)
    events = [json.loads(line) for line in path.read_text().splitlines()]
    batches = [e for e in events if e["header"]["job_name"] == "throttled"
               and e["header"]["schema_name"].endswith("ActionLineageEvent")]
    assert seen >= 4 and len(batches) == 1  # the first progress, then nothing within the hour


@pytest.mark.integration
def test_foreach_batch_reports_its_writes_with_the_topic_and_no_sink_table(spark, make_emitter, tmp_path,  # noqa: ANN001
                                                                          kafka_settings, topic_factory) -> None:  # noqa: ANN001
    from pyspark.sql import SparkSession

    from tests.producers.packages import require_package

    require_package("spark-sql-kafka-0-10")
    servers, topic = kafka_settings.bootstrap_servers, topic_factory("lw.stream")
    spark.createDataFrame([("1", "a")], "key string, value string").write.format("kafka") \
        .option("kafka.bootstrap.servers", servers).option("topic", topic).save()
    path, out = tmp_path / "events.jsonl", str(tmp_path / "out")
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path), "streaming_listener": "true",
                                                       "heartbeat": "0"})

    def write(batch, batch_id) -> None:  # noqa: ANN001
        batch.selectExpr("CAST(value AS string) AS text").write.mode("append").parquet(out)

    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", servers).option("subscribe", topic)
             .option("startingOffsets", "earliest").load().writeStream.foreachBatch(write).queryName("topic_batches")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="500 milliseconds")
             .start())
    try:
        # The first batch's progress (the one with data) reached the emitter.
        wait_for(lambda: emitter.stats()["stream_progress"]["seen"] >= 1, timeout=120)
    finally:
        query.stop()
        # PySpark's foreachBatch wrapper wraps the query's session (a clone) in a Python SparkSession, which
        # re-binds RDD.toDF to it: later tests' rdd.toDF() would run without their listener. A SparkSession
        # made on the context wraps the default (shared) one and binds toDF back to it.
        SparkSession(spark.sparkContext)
    emitter.close(20)
    events = [json.loads(line) for line in path.read_text().splitlines()]
    actions = [e for e in events if e["header"]["schema_name"].endswith("ActionLineageEvent")]
    progress = [e for e in actions if e["header"]["job_name"] == "topic_batches"]
    writes = [e for e in actions if any(o["name"] == out for o in e["outputs"])]
    assert progress and writes
    assert all(e["outputs"] == [] for e in progress)  # no phantom 'ForeachBatchSink' table
    assert [(i["name"], i["format"]) for i in writes[0]["inputs"]] == [(topic, "kafka")]
