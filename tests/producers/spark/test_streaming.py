"""A streaming query is a run of its own: started, throttled progress, terminated."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import wait_for
from tests.producers.spark.windowed import micro_batch_written, read_events, windowed_totals

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

    events = read_events(path)
    stream = sorted((e for e in events if e["header"]["job_name"] == "rates_to_noop"),
                    key=lambda e: e["header"]["sequence"])
    assert stream[0]["spec"]["job_type"] == "STREAMING"
    assert stream[0]["header"]["run_id"] == str(query.runId)
    assert stream[0]["header"]["parent_run"]["run_id"] == emitter.app_run.run_id
    statuses = [(e["old_status"], e["new_status"]) for e in stream if "new_status" in e]
    assert statuses == [("CREATED", "RUNNING"), ("RUNNING", "FINISHED")]
    batches = [e for e in stream if e["header"]["schema_name"].endswith("ActionLineageEvent")]
    assert len(batches) >= 2 and all(b["action_status"] == "RUNNING" for b in batches)
    # The rate source: named by its table on 4.x; on 3.5 its micro-batch stream names no dataset, and says so.
    assert all(b["inputs"] or (not b["lineage_complete"] and "RateStream" in b["incomplete_reason"]) for b in batches)
    assert all(i["boundedness"] == "CONTINUOUS_UNBOUNDED" for b in batches for i in b["inputs"])
    assert [e["header"]["sequence"] for e in stream] == list(range(len(stream)))


def test_heartbeat_throttles_progressevents(spark, make_emitter, tmp_path) -> None:  # noqa: ANN001
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
    events = read_events(path)
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
    events = read_events(path)
    actions = [e for e in events if e["header"]["schema_name"].endswith("ActionLineageEvent")]
    progress = [e for e in actions if e["header"]["job_name"] == "topic_batches"]
    writes = [e for e in actions if any(o["name"] == out for o in e["outputs"])]
    assert progress and writes
    assert all(e["outputs"] == [] for e in progress)  # no phantom 'ForeachBatchSink' table
    assert [(i["name"], i["format"]) for i in writes[0]["inputs"]] == [(topic, "kafka")]




def _run_until_progress(path, writer) -> Any:  # noqa: ANN001
    """Start ``writer``, wait until the emitter wrote a progress event of this query (not a late one of the
    query before), stop the query."""
    query = writer.trigger(processingTime="300 milliseconds").start()
    try:
        wait_for(lambda: micro_batch_written(path, str(query.runId)), timeout=120)
    finally:
        query.stop()
    return query


def test_windowed_aggregation_to_file_sink_named_by_sink_with_column_lineage(spark, make_emitter,  # noqa: ANN001
                                                                             tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path), "streaming_listener": "true",
                                                       "heartbeat": "0"})
    totals, out = windowed_totals(spark, tmp_path), str(tmp_path / "totals")
    queries = [_run_until_progress(path, totals.writeStream.format("parquet").outputMode("append")
                                   .option("path", out).option("checkpointLocation", str(tmp_path / f"ck{i}")))
               for i in range(2)]  # the second from a new checkpoint: a new query id
    emitter.close(20)

    events = read_events(path)
    job = f"{emitter.app_run.job_name}.stream.{out}"  # no queryName: named by its sink's folder
    starts = [e for e in events if e["header"]["job_name"] == job and e.get("spec", {}).get("job_type")]
    assert [s["header"]["run_id"] for s in starts] == [str(q.runId) for q in queries]
    assert queries[0].id != queries[1].id
    batches = [e for e in events if e["header"]["job_name"] == job and e.get("action_name") == "microBatch"]
    assert len(batches) >= 2
    # The first extraction of a process loads the plan writer and plan classes: on a loaded machine it may
    # run past the budget (and say so); the later ones take milliseconds.
    complete = [b for b in batches if b["lineage_complete"]]
    assert complete, [b["incomplete_reason"] for b in batches]
    for batch in complete:
        assert [(i["namespace"], i["name"]) for i in batch["inputs"]] == [("file", str(tmp_path / "in"))]
        assert [(o["namespace"], o["name"], o["operation"]) for o in batch["outputs"]] == [("file", out, "Append")]
    batch = complete[0]
    direct = {c["field"]: {(i["field"], t["subtype"]) for i in c["inputs"] for t in i["transformations"]
                           if t["type"] == "DIRECT"} for c in batch["column_lineage"]}
    # The window column comes from the event-time column; the aggregate from its input; the key is copied.
    assert direct == {"window": {("ts", "TRANSFORMATION")}, "user": {("user", "IDENTITY")},
                      "total": {("amount", "AGGREGATION")}}


def test_sinks_that_store_nothing_name_no_output_and_name_the_job_by_kind(spark, make_emitter,  # noqa: ANN001
                                                                         tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path), "streaming_listener": "true",
                                                       "heartbeat": "0"})
    rates = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
    for kind in ("console", "noop"):
        _run_until_progress(path, rates.writeStream.format(kind))
    _run_until_progress(path, rates.writeStream.format("memory").queryName("rates_in_memory"))
    emitter.close(20)

    events = read_events(path)
    app = emitter.app_run.job_name
    for job in (f"{app}.stream.console", f"{app}.stream.noop", "rates_in_memory"):
        batches = [e for e in events if e["header"]["job_name"] == job and e.get("action_name") == "microBatch"]
        assert batches and all(b["outputs"] == [] for b in batches), job


@pytest.mark.integration
def test_kafka_sink_names_the_topic(spark, make_emitter, tmp_path, kafka_settings, topic_factory) -> None:  # noqa: ANN001
    from tests.producers.packages import require_package

    require_package("spark-sql-kafka-0-10")
    servers, topic = kafka_settings.bootstrap_servers, topic_factory("lw.stream.sink")
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path), "streaming_listener": "true",
                                                       "heartbeat": "0"})
    rates = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
    _run_until_progress(path, rates.selectExpr("CAST(value AS string) AS value").writeStream.format("kafka")
                        .option("kafka.bootstrap.servers", servers).option("topic", topic)
                        .option("checkpointLocation", str(tmp_path / "checkpoint")))
    emitter.close(20)

    job = f"{emitter.app_run.job_name}.stream.kafka"  # the topic is not known yet when the query starts
    batches = [e for e in read_events(path) if e["header"]["job_name"] == job and e.get("action_name") == "microBatch"]
    first = servers.split(",")[0]
    assert batches and all([(o["namespace"], o["name"], o["format"]) for o in b["outputs"]]
                           == [(f"kafka://{first}", topic, "kafka")] for b in batches)
