"""Inputs behind RDDs: a DataFrame built from an RDD names the files the RDD chain read.

Issue 31.1: a DataFrame turned into an RDD and back (``df.rdd.map(...).toDF()``) names the folder the
DataFrame read, as a direct read names it, with every column from every column read; an RDD that cannot
be traced makes the result incomplete.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from lineagewire.producers.spark.lineage.connectors.rdd import files_in_debug_string

from .conftest import Capture, by_name, collect, column, reads

TRANSFORMATION = ("DIRECT", "TRANSFORMATION")
TEXT_IN = "org.apache.hadoop.mapred.TextInputFormat"
NEW_TEXT_IN = "org.apache.hadoop.mapreduce.lib.input.TextInputFormat"
LONG, TEXT = "org.apache.hadoop.io.LongWritable", "org.apache.hadoop.io.Text"


@pytest.fixture
def files(tmp_path: pathlib.Path) -> dict[str, str]:
    out = {}
    for name, body in {"a": "1,ann\n2,bob\n", "b": "3,cy\n", "c": "4,dee\n", "d": "5,eve\n"}.items():
        path = tmp_path / "in" / f"{name}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(body)
        out[name] = str(path)
    return out


@pytest.mark.spark
def test_text_file_rdd_to_dataframe_names_its_files(spark: Any, capture: Capture, files: dict[str, str],
                                                     tmp_path: pathlib.Path) -> None:
    sc = spark.sparkContext
    rows = sc.textFile(f"{files['a']},{files['b']}").map(lambda line: line.split(",")) \
        .map(lambda p: (int(p[0]), p[1]))
    df = spark.createDataFrame(rows, "id int, name string")
    result = capture.run(lambda: df.write.parquet(str(tmp_path / "out")))
    assert result.complete, result.incomplete_reason
    got = by_name(result.inputs)
    assert set(got) == {files["a"], files["b"]}
    for ds in got.values():
        assert (ds["namespace"], ds["format"], ds["properties"]) == ("file", "text", {"rdd": "textFile"})
    assert result.outputs[0]["name"] == str(tmp_path / "out")
    # Columns parsed from text lines are not columns of the files: no column lineage is made up.
    assert result.column_lineage == []


@pytest.mark.spark
def test_every_file_reading_rdd_through_to_df(spark: Any, capture: Capture, files: dict[str, str]) -> None:
    sc = spark.sparkContext
    parts = [
        sc.wholeTextFiles(files["a"]).map(lambda kv: (kv[0], len(kv[1]))),
        sc.binaryFiles(str(pathlib.Path(files["b"]).parent)).map(lambda kv: (kv[0], len(kv[1]))),
        sc.hadoopFile(files["c"], TEXT_IN, LONG, TEXT).map(lambda kv: (kv[1], kv[0])),
        sc.newAPIHadoopFile(files["d"], NEW_TEXT_IN, LONG, TEXT).map(lambda kv: (kv[1], kv[0])),
    ]
    # A schema, so that toDF does not sample rows (an action of its own, with an unclosed result socket).
    frames = [rdd.toDF("k string, n long") for rdd in parts]
    df = frames[0].unionByName(frames[1]).unionByName(frames[2]).unionByName(frames[3])
    result = capture.run(lambda: collect(df), reads)
    assert result.complete, result.incomplete_reason
    got = {d["name"]: (d["format"], d["properties"]["rdd"]) for d in result.inputs}
    assert got == {
        files["a"]: ("text", "wholeTextFiles"),
        str(pathlib.Path(files["b"]).parent): ("binaryFile", "binaryFiles"),
        files["c"]: (None, "hadoopFile"),
        files["d"]: (None, "newAPIHadoopFile"),
    }


@pytest.mark.spark
def test_in_memory_rdd_names_no_dataset(spark: Any, capture: Capture, tmp_path: pathlib.Path) -> None:
    rdd = spark.sparkContext.parallelize([(1, "a"), (2, "b")]).setName("my numbers")
    df = rdd.toDF("id long, name string")
    result = capture.run(lambda: df.write.parquet(str(tmp_path / "out")))
    assert result.complete, result.incomplete_reason
    assert result.inputs == []
    assert [o["name"] for o in result.outputs] == [str(tmp_path / "out")]


def test_debug_string_parsing_ignores_names_users_give_other_rdds() -> None:
    text = "\n".join([
        "(2) MapPartitionsRDD[5] at applySchemaToPythonRDD at NativeMethodAccessorImpl.java:0 []",
        " |  my numbers ParallelCollectionRDD[3] at readRDDFromFile at PythonRDD.scala:289 []",
        " |  +-(1) /data/x y.txt MapPartitionsRDD[1] at textFile at NativeMethodAccessorImpl.java:0 []",
        " |     |  /data/x y.txt HadoopRDD[0] at textFile at NativeMethodAccessorImpl.java:0 []",
    ])
    assert files_in_debug_string(text) == [("/data/x y.txt", "textFile", "text")]


def _parquet(spark: Any, path: pathlib.Path, rows: list[tuple[Any, ...]], schema: str, **options: Any) -> str:
    spark.createDataFrame(rows, schema).write.parquet(str(path), **options)
    return str(path)


def _edges(result: Any, field: str) -> set[tuple[str, str, str, str]]:
    """{(dataset name, source field, type, subtype)} of output column ``field``."""
    return {(i["name"], i["field"], t["type"], t["subtype"])
            for i in column(result, field)["inputs"] for t in i["transformations"]}


def _every_column(sources: dict[str, list[str]]) -> set[tuple[str, str, str, str]]:
    return {(name, f, *TRANSFORMATION) for name, fields in sources.items() for f in fields}


@pytest.mark.spark
def test_dataframe_through_rdd_map_names_the_folder_as_a_direct_read(spark: Any, capture: Capture,
                                                                      tmp_path: pathlib.Path) -> None:
    people = _parquet(spark, tmp_path / "people", [(1, "ann", 3.0), (2, "bob", 4.0)], "id int, name string, s double")
    direct = capture.run(lambda: collect(spark.read.parquet(people)), reads)
    df = spark.read.parquet(people).rdd.map(lambda r: (r.id, r.name.upper(), r.s * 2)) \
        .toDF("id int, name string, s2 double")
    result = capture.run(lambda: df.write.parquet(str(tmp_path / "out")))
    assert result.complete, result.incomplete_reason
    assert [(d["namespace"], d["name"]) for d in result.inputs] == \
        [(d["namespace"], d["name"]) for d in direct.inputs] == [("file", people)]
    assert result.inputs[0]["properties"] == {"rdd": "FileScanRDD"}
    assert [f["name"] for f in result.inputs[0]["fields"]] == ["id", "name", "s"]
    for field in ("id", "name", "s2"):
        assert _edges(result, field) == _every_column({people: ["id", "name", "s"]}), field


@pytest.mark.spark
def test_create_data_frame_of_df_rdd_and_map_partitions(spark: Any, capture: Capture, tmp_path: pathlib.Path) -> None:
    # A partitioned folder: the files sit in k=... folders, the dataset is the folder a direct read names.
    sales = _parquet(spark, tmp_path / "sales", [(1, 5, "x", "a"), (2, 7, "y", "b")],
                     "id int, amount int, note string, k string", partitionBy="k")
    df = spark.read.parquet(sales)
    rebuilt = spark.createDataFrame(df.rdd, df.schema)
    result = capture.run(lambda: rebuilt.write.parquet(str(tmp_path / "out1")))
    assert result.complete, result.incomplete_reason
    assert [(d["namespace"], d["name"]) for d in result.inputs] == [("file", sales)]
    assert _edges(result, "amount") == _every_column({sales: ["id", "amount", "note", "k"]})

    def double(rows: Any) -> Any:
        for r in rows:
            yield (r.id, r.amount * 2)

    mapped = df.select("id", "amount").rdd.mapPartitions(double).toDF("id int, twice int")
    result = capture.run(lambda: mapped.write.parquet(str(tmp_path / "out2")))
    assert result.complete, result.incomplete_reason
    assert [(d["namespace"], d["name"]) for d in result.inputs] == [("file", sales)]
    # Only the columns the RDD read: the select pruned note (a file scan reads the partition columns always).
    assert _edges(result, "twice") == _every_column({sales: ["id", "amount", "k"]})


@pytest.mark.spark
def test_reduce_by_key_and_join_of_rdds_from_two_folders(spark: Any, capture: Capture, tmp_path: pathlib.Path) -> None:
    orders = _parquet(spark, tmp_path / "orders", [(1, 5), (1, 6), (2, 7)], "cust int, amount int")
    names = _parquet(spark, tmp_path / "names", [(1, "ann"), (2, "bob")], "id int, name string")
    totals = spark.read.parquet(orders).rdd.map(lambda r: (r.cust, r.amount)).reduceByKey(lambda a, b: a + b)
    who = spark.read.parquet(names).rdd.map(lambda r: (r.id, r.name))
    joined = totals.join(who).map(lambda kv: (kv[0], kv[1][1], kv[1][0])).toDF("id int, name string, total int")
    result = capture.run(lambda: joined.write.parquet(str(tmp_path / "out")))
    assert result.complete, result.incomplete_reason
    assert {(d["namespace"], d["name"]) for d in result.inputs} == {("file", orders), ("file", names)}
    every = _every_column({orders: ["cust", "amount"], names: ["id", "name"]})
    for field in ("id", "name", "total"):
        assert _edges(result, field) == every, field


@pytest.mark.spark
def test_rdd_that_cannot_be_traced_makes_the_result_incomplete(spark: Any, capture: Capture,
                                                               tmp_path: pathlib.Path) -> None:
    people = _parquet(spark, tmp_path / "people", [(1, "ann")], "id int, name string")
    # An RDD checkpoint cuts the RDD's lineage: what the files it wrote hold is not known from the RDD.
    # (PySpark's localCheckpoint() is no cut: the next map pipelines the Python functions from the source again.)
    spark.sparkContext.setCheckpointDir(str(tmp_path / "checkpoints"))
    cut = spark.read.parquet(people).rdd.map(lambda r: (r.id, r.name))
    cut.checkpoint()
    collect(cut)
    result = capture.run(lambda: cut.toDF("id int, name string").write.parquet(str(tmp_path / "out")))
    assert not result.complete
    assert "LogicalRDD: the RDD reads through org.apache.spark.rdd.ReliableCheckpointRDD" in result.incomplete_reason
    assert result.inputs == []


@pytest.mark.spark
def test_rdd_of_a_v2_file_source_names_the_folder_without_columns(spark: Any, capture: Capture,
                                                                  tmp_path: pathlib.Path) -> None:
    people = _parquet(spark, tmp_path / "people", [(1, "ann")], "id int, name string")
    previous = spark.conf.get("spark.sql.sources.useV1SourceList")
    spark.conf.set("spark.sql.sources.useV1SourceList", "")
    try:
        df = spark.read.parquet(people).rdd.map(lambda r: (r.id, r.name)).toDF("id int, name string")
        result = capture.run(lambda: df.write.format("parquet").save(str(tmp_path / "out")))
    finally:
        spark.conf.set("spark.sql.sources.useV1SourceList", previous)
    assert [(d["namespace"], d["name"], d["properties"]) for d in result.inputs] == \
        [("file", people, {"rdd": "DataSourceRDD"})]
    assert not result.complete
    assert "DataSourceRDD, which does not say which columns it reads" in result.incomplete_reason


@pytest.mark.spark
def test_without_the_jvm_classes_only_what_the_debug_string_shows_is_complete(
        spark: Any, capture: Capture, files: dict[str, str], tmp_path: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from lineagewire.producers.spark.lineage import extract

    # As on a driver without a JDK's javac: no PlanJson, so the RDD walk is the debug string alone.
    monkeypatch.setattr(extract, "plan_writer", lambda: None)
    people = _parquet(spark, tmp_path / "people", [(1, "ann")], "id int, name string")
    df = spark.read.parquet(people).rdd.map(lambda r: (r.id, r.name)).toDF("id int, name string")
    result = capture.run(lambda: df.write.parquet(str(tmp_path / "out1")))
    assert not result.complete
    assert "LogicalRDD: the RDD goes through FileScanRDD, which only lineagewire's compiled JVM classes can trace" \
        in result.incomplete_reason
    lines = spark.sparkContext.textFile(files["a"]).map(lambda line: (line,)).toDF("line string")
    result = capture.run(lambda: lines.write.parquet(str(tmp_path / "out2")))
    assert result.complete, result.incomplete_reason
    assert [d["name"] for d in result.inputs] == [files["a"]]
