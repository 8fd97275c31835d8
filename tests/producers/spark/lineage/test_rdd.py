"""Inputs behind RDDs: a DataFrame built from an RDD names the files the RDD chain read."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from lineagewire.producers.spark.lineage.connectors.rdd import files_in_debug_string

from .conftest import Capture, by_name, collect, reads

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
