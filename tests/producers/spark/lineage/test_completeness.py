"""``lineage_complete`` is honest (issue 31.2): every leaf kind the extractor knows, and one it does not.

A result is complete only when every leaf of the plan was traced: a leaf that reads a dataset was named,
a leaf that reads none is known to read none. The table below has a row for every leaf kind in the
connector registry (``INPUTS`` and ``NO_DATASET``): through the shared SparkSession where one can make
it (the test checks the plan really has that leaf), from plan JSON for leaves no action of a plain session
leaves in its optimized plan, and a pointer to the test that runs it in a session of its own (Hive, Kafka
streams). A leaf the extractor does not know makes the result incomplete, naming it.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from lineagewire.producers.spark.lineage import extract_from_plan
from lineagewire.producers.spark.lineage.connectors import INPUTS, NO_DATASET
from lineagewire.producers.spark.lineage.plan import parse_plan_json

from .conftest import Capture, collect

HERE = pathlib.Path(__file__).parent

#: ``make(spark, tmp_path)`` returns the DataFrame the action collects.
Make = Callable[[Any, pathlib.Path], Any]


def _parquet(spark: Any, tmp: pathlib.Path) -> str:
    path = str(tmp / "people")
    spark.createDataFrame([(1, "ann")], "id int, name string").write.mode("overwrite").parquet(path)
    return path


def _file_read(spark: Any, tmp: pathlib.Path) -> Any:
    return spark.read.parquet(_parquet(spark, tmp))


def _v2_file_read(spark: Any, tmp: pathlib.Path) -> Any:
    path = _parquet(spark, tmp)
    spark.conf.set("spark.sql.sources.useV1SourceList", "")
    return spark.read.parquet(path)


def _rdd_of_files(spark: Any, tmp: pathlib.Path) -> Any:
    return spark.read.parquet(_parquet(spark, tmp)).rdd.map(lambda r: (r.id, r.name)).toDF("id int, name string")


def _rdd_in_memory(spark: Any, tmp: pathlib.Path) -> Any:
    return spark.sparkContext.parallelize([(1, "a")]).toDF("id long, name string")


def _rdd_cut_by_a_checkpoint(spark: Any, tmp: pathlib.Path) -> Any:
    spark.sparkContext.setCheckpointDir(str(tmp / "checkpoints"))
    rdd = spark.sparkContext.parallelize([(1, "a")]).map(lambda r: r)
    rdd.checkpoint()
    collect(rdd)
    return rdd.toDF("id long, name string")


def _external_rdd(spark: Any, tmp: pathlib.Path) -> Any:
    from pyspark.sql import DataFrame

    path = tmp / "lines.txt"
    path.write_text("a\nb\n")
    jvm = spark.sparkContext._jvm
    lines = spark.sparkContext._jsc.textFile(str(path)).rdd()
    return DataFrame(spark._jsparkSession.createDataset(lines, jvm.org.apache.spark.sql.Encoders.STRING()).toDF(),
                     spark)


def _cached(spark: Any, tmp: pathlib.Path) -> Any:
    cached = spark.createDataFrame([(1, "a")], "id int, name string").cache()
    return cached.select("id")


def _command_rows(spark: Any, tmp: pathlib.Path) -> Any:
    return spark.sql("SHOW DATABASES").where("namespace = 'default'")


#: (leaf kind, what makes it, make, complete, how many inputs it names)
SPARK_ROWS: list[tuple[str, str, Make, bool, int]] = [
    ("LogicalRelation", "a Parquet folder", _file_read, True, 1),
    ("DataSourceV2Relation", "a V2 file source", _v2_file_read, True, 1),
    ("DataSourceV2ScanRelation", "a V2 file source", _v2_file_read, True, 1),
    ("LogicalRDD", "df.rdd of a Parquet folder", _rdd_of_files, True, 1),
    ("LogicalRDD", "parallelize: in-memory data", _rdd_in_memory, True, 0),
    ("LogicalRDD", "an RDD cut by a checkpoint", _rdd_cut_by_a_checkpoint, False, 0),
    ("ExternalRDD", "a Dataset of a JVM RDD of text lines", _external_rdd, True, 1),
    ("LocalRelation", "VALUES", lambda spark, tmp: spark.sql("SELECT * FROM VALUES (1), (2) AS t(x)"), True, 0),
    ("OneRowRelation", "SELECT 1", lambda spark, tmp: spark.sql("SELECT 1 AS x"), True, 0),
    ("Range", "spark.range", lambda spark, tmp: spark.range(3), True, 0),
    ("InMemoryRelation", "a cached DataFrame", _cached, True, 0),
    ("CommandResult", "rows of SHOW DATABASES, filtered", _command_rows, True, 0),
]

#: Leaves no action of a plain session leaves in its optimized plan (view text, V2 command arguments, a CTE the
#: optimizer did not inline): read from plan JSON.
PLAN_ROWS = ["UnresolvedRelation", "ResolvedIdentifier", "ResolvedNamespace", "ResolvedTable", "CTERelationRef"]

#: Leaves that need a session of their own: the test that asserts a complete, named result for them.
OTHER_SESSIONS = {
    "HiveTableRelation": "test_hive.py::test_read_of_a_hive_serde_table",
    "StreamingDataSourceV2Relation": "test_kafka.py::test_foreach_batch_writes_read_the_streaming_querys_topic",
    "StreamingDataSourceV2ScanRelation": "test_kafka.py::test_foreach_batch_writes_read_the_streaming_querys_topic",
    # A streaming query's file source, in its logical plan (extract_stream_lineage)
    "StreamingExecutionRelation":
        "test_streaming_sinks.py::test_delta_stream_sink_by_path_and_table_named_clean_with_windowed_column_lineage",
    # A persisted view, read from the analyzed plan (the optimizer removes View nodes): a leaf of the lineage
    "View": "test_views.py::test_a_read_of_a_view_names_the_view_in_every_kind_of_action",
}


def test_the_table_has_every_leaf_kind_the_extractor_knows() -> None:
    tabled = {kind for kind, *_ in SPARK_ROWS} | set(PLAN_ROWS) | set(OTHER_SESSIONS)
    assert tabled == set(INPUTS) | set(NO_DATASET)
    for where in OTHER_SESSIONS.values():
        module, name = where.split("::")
        assert f"def {name}(" in (HERE / module).read_text(), where


def _leaves(jplan: Any) -> set[str]:
    return {n.simple for n in parse_plan_json(str(jplan.toJSON())).walk() if not n.children}


@pytest.mark.spark
@pytest.mark.parametrize(("kind", "what", "make", "complete", "named"), SPARK_ROWS,
                         ids=[f"{kind}: {what}" for kind, what, *_ in SPARK_ROWS])
def test_leaf_kind_through_spark(spark: Any, capture: Capture, tmp_path: pathlib.Path, kind: str, what: str,
                                 make: Make, complete: bool, named: int) -> None:
    previous = spark.conf.get("spark.sql.sources.useV1SourceList")
    try:
        df = make(spark, tmp_path)
        assert kind in _leaves(df._jdf.queryExecution().optimizedPlan()), f"the plan of {what} has no {kind}"
        result = capture.run(lambda: collect(df), lambda r: True)
    finally:
        spark.conf.set("spark.sql.sources.useV1SourceList", previous)
    assert result.complete is complete, result.incomplete_reason
    assert len(result.inputs) == named, result.inputs
    if not complete:
        assert kind in result.incomplete_reason


def _plan(leaf_class: str) -> str:
    """toJSON()'s form of ``SELECT * FROM <leaf>``: a projection over one leaf."""
    return json.dumps([
        {"class": "org.apache.spark.sql.catalyst.plans.logical.Project", "num-children": 1, "projectList": [],
         "child": 0},
        {"class": leaf_class, "num-children": 0},
    ])


@pytest.mark.parametrize("kind", PLAN_ROWS)
def test_leaf_kind_that_reads_no_dataset_from_plan_json(kind: str) -> None:
    result = extract_from_plan(_plan(f"org.apache.spark.sql.catalyst.plans.logical.{kind}"))
    assert result.complete, result.incomplete_reason
    assert result.inputs == []


def test_unknown_leaf_makes_the_result_incomplete() -> None:
    result = extract_from_plan(_plan("org.example.lineage.MysteryLeaf"))
    assert not result.complete
    assert result.incomplete_reason == "input relation MysteryLeaf is not supported: its inputs cannot be traced"
    assert result.inputs == []


def test_a_command_that_is_the_whole_plan_reads_nothing() -> None:
    """SET, SHOW, DDL: a leaf that is the whole plan is a command, not an unknown input."""
    plan = json.dumps([{"class": "org.apache.spark.sql.execution.command.SetCommand", "num-children": 0}])
    result = extract_from_plan(plan)
    assert result.complete, result.incomplete_reason
