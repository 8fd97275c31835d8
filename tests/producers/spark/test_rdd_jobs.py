"""Spark jobs that run no SQL query (issue 39.1): RDD actions get their lineage from the RDD's dependencies.

Through a real SparkSession and the emitter's own events (the file listener): each RDD-only job is one action
event named after its action, with the datasets named as a DataFrame read or write of the same folders names them.
"""

from __future__ import annotations

import gc
import json
import pathlib
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from lineagewire.producers.spark import JobStatusListener, job_run
from lineagewire.producers.spark.lineage.rdd_jobs import action_name, job_lineage, parse

pytestmark = [pytest.mark.integration, pytest.mark.spark]

INT, TEXT = "org.apache.hadoop.io.IntWritable", "org.apache.hadoop.io.Text"
NEW_SEQUENCE_OUT = "org.apache.hadoop.mapreduce.lib.output.SequenceFileOutputFormat"
TEXT_IN, LONG = "org.apache.hadoop.mapred.TextInputFormat", "org.apache.hadoop.io.LongWritable"


def _actions(path: pathlib.Path, run_id: str) -> list[dict]:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    mine = [e for e in events if e["header"]["run_id"] == run_id
            and e["header"]["schema_name"].endswith("ActionLineageEvent")]
    return sorted(mine, key=lambda e: e["header"]["sequence"])


def _result(action: Callable[[], Any]) -> Any:
    """An RDD action that serves its result through a local socket (``collect``, ``count``): PySpark 4.0 leaves
    that socket to the garbage collector (a ResourceWarning even without lineagewire), collected here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        value = action()
        gc.collect()
    return value


def _ids(datasets: list[dict]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


@pytest.fixture
def folders(tmp_path: pathlib.Path) -> dict[str, pathlib.Path]:
    lines = tmp_path / "lines"
    lines.mkdir()
    (lines / "a.txt").write_text("ann\nbob\n")
    (lines / "b.txt").write_text("cy\n")
    return {"lines": lines, "tmp": tmp_path}


@pytest.fixture
def rdd_emitter(make_emitter, tmp_path: pathlib.Path) -> Any:  # noqa: ANN001
    """An emitter writing to ``events.jsonl``, once its JVM listener (which sees RDD-only jobs) is in place."""
    emitter = make_emitter(listeners=["file"], config={"file_path": str(tmp_path / "events.jsonl")})
    assert emitter.wait_ready(120), "the JVM SparkListener did not compile within 120 s"
    assert emitter.stats()["spark_listener"] == "jvm"
    return emitter


def test_text_file_to_save_as_text_file_is_one_action_with_both_folders(spark, rdd_emitter, folders) -> None:  # noqa: ANN001
    sc, tmp = spark.sparkContext, folders["tmp"]
    out = tmp / "upper"
    with job_run(spark, "rdd job") as run:
        sc.textFile(str(folders["lines"])).map(lambda line: line.upper()).saveAsTextFile(str(out))
        # the same folders as a DataFrame reads them: the RDD job's datasets must be these
        spark.read.text(str(folders["lines"])).count()
        spark.read.text(str(out)).count()
    rdd_emitter.close(20)

    save, read_lines, read_out = _actions(tmp / "events.jsonl", run.run_id)
    assert (save["action_name"], save["action_status"], save["plan_node"]) == ("saveAsTextFile", "SUCCEEDED", None)
    assert save["lineage_complete"], save["incomplete_reason"]
    assert _ids(save["inputs"]) == _ids(read_lines["inputs"]) == [("file", str(folders["lines"]))]
    assert _ids(save["outputs"]) == _ids(read_out["inputs"]) == [("file", str(out))]
    assert [(d["format"], d["properties"]["rdd"]) for d in save["inputs"] + save["outputs"]] == \
        [("text", "textFile"), ("text", "saveAsTextFile")]
    assert save["column_lineage"] == [] and save["duration_ms"] is not None
    assert (read_lines["action_name"], read_out["action_name"]) == ("count", "count")


def test_every_file_reading_and_writing_rdd_method(spark, rdd_emitter, folders) -> None:  # noqa: ANN001
    sc, tmp = spark.sparkContext, folders["tmp"]
    pickles, sequence, new_api = tmp / "pickles", tmp / "sequence", tmp / "new_api"
    with job_run(spark, "rdd methods") as run:
        sc.parallelize([1, 2, 3]).saveAsPickleFile(str(pickles))
        sc.pickleFile(str(pickles)).map(lambda n: (n, str(n))).saveAsSequenceFile(str(sequence))
        sc.sequenceFile(str(sequence), INT, TEXT).saveAsNewAPIHadoopFile(str(new_api), NEW_SEQUENCE_OUT, INT, TEXT)
        _result(lambda: sc.wholeTextFiles(str(folders["lines"])).collect())
        _result(lambda: sc.binaryFiles(str(folders["lines"])).count())
        _result(lambda: sc.hadoopFile(str(folders["lines"]), TEXT_IN, LONG, TEXT).map(lambda kv: kv[1]).collect())
    rdd_emitter.close(20)

    got = [(a["action_name"], _ids(a["inputs"]), _ids(a["outputs"]), a["lineage_complete"])
           for a in _actions(tmp / "events.jsonl", run.run_id)]
    lines = ("file", str(folders["lines"]))
    # PySpark's converters run jobs of their own to look at a first record (sc.sequenceFile, the saveAs* of
    # pairs): those are not actions. PySpark's saveAsSequenceFile runs as the JVM's saveAsHadoopFile.
    assert got == [
        ("saveAsPickleFile", [], [("file", str(pickles))], True),
        ("saveAsHadoopFile", [("file", str(pickles))], [("file", str(sequence))], True),
        ("saveAsNewAPIHadoopFile", [("file", str(sequence))], [("file", str(new_api))], True),
        ("collect", [lines], [], True),
        ("count", [lines], [], True),
        ("collect", [lines], [], True),
    ]
    formats = [([d["format"] for d in a["inputs"]], [d["format"] for d in a["outputs"]])
               for a in _actions(tmp / "events.jsonl", run.run_id)]
    assert formats == [([], ["sequencefile"]), (["sequencefile"], ["sequencefile"]),
                       (["sequencefile"], ["sequencefile"]), (["text"], []), (["binaryFile"], []), ([None], [])]


def test_a_dataframe_written_through_its_rdd_names_its_folder_and_the_output(spark, rdd_emitter, folders) -> None:  # noqa: ANN001
    tmp = folders["tmp"]
    people, out = tmp / "people", tmp / "people_text"
    with job_run(spark, "df rdd") as run:
        spark.createDataFrame([(1, "ann"), (2, "bob")], "id int, name string").write.parquet(str(people))
        spark.read.parquet(str(people)).rdd.map(lambda r: f"{r.id},{r.name}").saveAsTextFile(str(out))
    rdd_emitter.close(20)

    write, save = _actions(tmp / "events.jsonl", run.run_id)  # the read's schema job is Spark SQL's own: no action
    assert save["action_name"] == "saveAsTextFile"
    assert _ids(save["inputs"]) == _ids(write["outputs"]) == [("file", str(people))]
    assert [f["name"] for f in save["inputs"][0]["fields"]] == ["id", "name"]
    assert _ids(save["outputs"]) == [("file", str(out))]
    assert save["lineage_complete"], save["incomplete_reason"]


def test_in_memory_data_reads_no_dataset_and_is_complete(spark, rdd_emitter, folders) -> None:  # noqa: ANN001
    tmp = folders["tmp"]
    with job_run(spark, "in memory") as run:
        sc = spark.sparkContext
        sc.parallelize(range(10), 2).map(str).saveAsTextFile(str(tmp / "numbers"))
    rdd_emitter.close(20)

    [save] = _actions(tmp / "events.jsonl", run.run_id)
    assert (save["action_name"], save["inputs"], _ids(save["outputs"])) == \
        ("saveAsTextFile", [], [("file", str(tmp / "numbers"))])
    assert save["lineage_complete"] and save["incomplete_reason"] is None


def test_sql_and_rdd_actions_in_one_job_are_each_reported_once(spark, rdd_emitter, folders) -> None:  # noqa: ANN001
    tmp, sc = folders["tmp"], spark.sparkContext
    started = rdd_emitter.stats()["spark_jobs"]["started"]
    with job_run(spark, "mixed") as run:
        spark.range(5).write.parquet(str(tmp / "numbers"))
        _result(lambda: sc.textFile(str(folders["lines"])).count())
        _result(lambda: spark.read.parquet(str(tmp / "numbers")).groupBy().count().collect())
        sc.textFile(str(folders["lines"])).map(lambda line: line[::-1]).saveAsTextFile(str(tmp / "reversed"))
    rdd_emitter.close(20)

    actions = _actions(tmp / "events.jsonl", run.run_id)
    # SQL actions have a plan node (Spark's action names differ between 3.5 and 4), RDD-only jobs none
    assert [a["plan_node"] is not None for a in actions] == [True, False, True, False]
    assert [actions[1]["action_name"], actions[3]["action_name"]] == ["count", "saveAsTextFile"]
    # The SQL actions ran Spark jobs too (more than the two RDD-only ones); none of them is reported twice.
    assert rdd_emitter.stats()["spark_jobs"]["started"] - started > 4
    assert _ids(actions[1]["inputs"]) == [("file", str(folders["lines"]))]


def test_an_rdd_that_cannot_be_traced_makes_the_action_incomplete(spark, rdd_emitter, folders) -> None:  # noqa: ANN001
    tmp, sc = folders["tmp"], spark.sparkContext
    sc.setCheckpointDir(str(tmp / "checkpoints"))
    cut = sc.textFile(str(folders["lines"])).map(lambda line: line.upper())
    cut.checkpoint()
    _result(lambda: cut.count())  # writes the checkpoint: later jobs read the checkpoint's files, not the lines
    with job_run(spark, "checkpointed") as run:
        cut.map(lambda line: line + "!").saveAsTextFile(str(tmp / "out"))
    rdd_emitter.close(20)

    [save] = _actions(tmp / "events.jsonl", run.run_id)
    assert not save["lineage_complete"]
    assert save["incomplete_reason"] == ("saveAsTextFile: the RDD reads through "
                                         "org.apache.spark.rdd.ReliableCheckpointRDD, whose input lineagewire "
                                         "cannot trace")
    assert save["inputs"] == [] and _ids(save["outputs"]) == [("file", str(tmp / "out"))]


def test_a_job_that_reads_and_writes_no_dataset_sends_nothing(spark, rdd_emitter, folders) -> None:  # noqa: ANN001
    """No lineage to tell (a collect of parallelized data, a Connect server's own jobs): no event; the next job that
    reads something is sent as before."""
    tmp, sc = folders["tmp"], spark.sparkContext
    with job_run(spark, "nothing read") as run:
        assert _result(lambda: sc.parallelize([1, 2, 3]).map(lambda x: x * 2).collect()) == [2, 4, 6]
        _result(lambda: sc.textFile(str(folders["lines"])).count())
    rdd_emitter.close(20)

    got = [(a["action_name"], _ids(a["inputs"])) for a in _actions(tmp / "events.jsonl", run.run_id)]
    assert got == [("count", [("file", str(folders["lines"]))])]


def test_a_failed_rdd_job_is_a_failed_action_with_sparks_error(spark, rdd_emitter, folders) -> None:  # noqa: ANN001
    tmp, sc = folders["tmp"], spark.sparkContext

    def broken(line: str) -> str:
        raise ValueError(f"cannot read {line!r}")

    with pytest.raises(Exception, match="cannot read"), job_run(spark, "failing rdd") as run:
        sc.textFile(str(folders["lines"])).map(broken).saveAsTextFile(str(tmp / "never"))
    rdd_emitter.close(20)

    [save] = _actions(tmp / "events.jsonl", run.run_id)
    assert (save["action_name"], save["action_status"]) == ("saveAsTextFile", "FAILED")
    assert "cannot read" in save["error"]["message"]
    assert _ids(save["inputs"]) == [("file", str(folders["lines"]))]
    assert _ids(save["outputs"]) == [("file", str(tmp / "never"))]


class _Kept(JobStatusListener):
    events: list[dict] = []
    lock = threading.Lock()

    def on_event(self, event: dict) -> None:
        with self.lock:
            self.events.append(dict(event))


def keep_events(context: Any) -> JobStatusListener:
    """A listener factory (a callable): the events as the listeners get them, for the OpenLineage translation."""
    return _Kept()


def test_the_openlineage_and_datahub_outputs_name_the_same_datasets(spark, make_emitter, folders) -> None:  # noqa: ANN001
    pytest.importorskip("openlineage.client")
    pytest.importorskip("datahub")
    from lineagewire.consumers.datahub.proposals import record
    from lineagewire.consumers.datahub.translate import Translator as DataHub
    from lineagewire.consumers.openlineage.translate import Translator

    tmp, sc = folders["tmp"], spark.sparkContext
    _Kept.events = []
    emitter = make_emitter(listeners=["tests.producers.spark.test_rdd_jobs:keep_events"])
    assert emitter.wait_ready(120) and emitter.stats()["spark_listener"] == "jvm"
    with job_run(spark, "rdd to ol") as run:
        sc.textFile(str(folders["lines"])).map(str.strip).saveAsTextFile(str(tmp / "stripped"))
    emitter.close(20)

    [save] = [e for e in _Kept.events if e["header"]["run_id"] == run.run_id and "action_name" in e]
    [ol] = Translator().translate(save)
    assert [(d.namespace, d.name) for d in ol.inputs] == _ids(save["inputs"]) == [("file", str(folders["lines"]))]
    assert [(d.namespace, d.name) for d in ol.outputs] == _ids(save["outputs"]) == [("file", str(tmp / "stripped"))]
    assert ol.job.name == "rdd to ol.save_as_text_file.stripped"

    proposals = [record(p) for p in DataHub().translate(save)]
    [io] = [r["aspect"]["json"] for r in proposals if r["aspectName"] == "dataJobInputOutput"]
    urn = "urn:li:dataset:(urn:li:dataPlatform:file,{},PROD)".format
    edges = ([e["destinationUrn"] for e in io["inputDatasetEdges"]],
             [e["destinationUrn"] for e in io["outputDatasetEdges"]])
    assert edges == ([urn(folders["lines"])], [urn(tmp / "stripped")])


# -- the JSON the JVM listener sends, read without Spark ----------------------------------------------------


@pytest.mark.parametrize(("raw", "name"), [
    ({"call_site": "count at /jobs/daily.py:12", "scope": '{"id":"3","name":"collect"}'}, "count"),
    ({"call_site": None, "scope": '{"id":"2","name":"saveAsTextFile"}', "stage": "runJob at X.scala:85"},
     "saveAsTextFile"),
    ({"scope": '{"id":"9","name":"saveAsObjectFile"}'}, "saveAsPickleFile"),
    ({"scope": None, "stage": "runJob at PythonRDD.scala:189"}, "runJob"),
    ({"scope": "not json", "stage": None}, "rddJob"),
])
def test_the_action_is_named_as_pyspark_names_it(raw: dict, name: str) -> None:
    assert action_name(raw) == name


def test_a_job_that_could_not_be_read_is_incomplete_and_says_why() -> None:
    job = parse(json.dumps({"job_id": 4, "scope": '{"name":"collect"}', "start_ms": 10, "end_ms": 25,
                            "untraced": ["the job ended before lineagewire could read its RDDs"]}))
    assert (job.action, job.duration_ms) == ("collect", 15)
    result = job_lineage(job)
    assert not result.complete
    assert result.incomplete_reason == "collect: the job ended before lineagewire could read its RDDs"
    unreadable = job_lineage(parse("{not json"))
    assert not unreadable.complete and "could not be read" in unreadable.incomplete_reason
    no_folder = job_lineage(parse(json.dumps({"scope": '{"name":"saveAsHadoopFile"}',
                                              "output": {"api": "mapred", "format": "x.DbOutputFormat"}})))
    assert no_folder.outputs == [] and not no_folder.complete
    assert "names no output folder (output format x.DbOutputFormat)" in no_folder.incomplete_reason


def test_without_the_compiled_classes_rdd_only_jobs_are_not_reported_and_the_warning_says_so(
        spark, make_emitter, tmp_path, monkeypatch, caplog) -> None:  # noqa: ANN001
    import logging

    monkeypatch.setenv("LINEAGEWIRE_HOME", str(tmp_path / "home"))  # an empty cache: it has to compile
    javac = tmp_path / "javac"
    javac.write_text("#!/bin/sh\necho 'this javac refuses everything' >&2\nexit 1\n")
    javac.chmod(0o755)
    caplog.set_level(logging.WARNING, logger="lineagewire.producers.spark.hooks")
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path), "javac": str(javac)})
    assert emitter.wait_ready(60) and emitter.stats()["spark_listener"] == "py4j"
    [warning] = [r.getMessage() for r in caplog.records if "JVM SparkListener is unavailable" in r.getMessage()]
    assert "Spark jobs of RDD actions without a DataFrame" in warning and "get no action events" in warning
    with job_run(spark, "rdd without javac") as run:
        spark.sparkContext.parallelize(range(3)).map(str).saveAsTextFile(str(tmp_path / "numbers"))
    emitter.close(20)

    mine = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["new_status"] for e in mine if e["header"]["run_id"] == run.run_id and "new_status" in e] == \
        ["RUNNING", "FINISHED"]
    assert _actions(path, run.run_id) == []
