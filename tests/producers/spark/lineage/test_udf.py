"""Column lineage through user-defined functions: Python ``udf``, ``pandas_udf`` and a Java/Scala UDF.

Nothing is known about a UDF's body, so its result derives from its argument columns as a
TRANSFORMATION; a UDF in a filter or a join condition makes its arguments INDIRECT.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

from .conftest import Capture, inputs_of

pytestmark = pytest.mark.spark

TRANSFORMATION = ("DIRECT", "TRANSFORMATION")


@pytest.fixture
def people(spark: Any, tmp_path: pathlib.Path) -> Iterator[Any]:
    path = str(tmp_path / "people")
    spark.createDataFrame([(1, "ann", 30.0, 10), (2, "bob", 40.0, 11)],
                          "id int, name string, score double, team int").write.parquet(path)
    yield spark.read.parquet(path)


def test_python_udf_column_derives_from_its_arguments(capture: Capture, people: Any,
                                                      tmp_path: pathlib.Path) -> None:
    from pyspark.sql.functions import udf

    label = udf(lambda name, score: f"{name}:{score}", "string")
    same = udf(lambda name: name, "string")  # returns its argument, but nothing can know that
    df = people.select("id", label("name", "score").alias("label"), same("name").alias("name2"))
    result = capture.run(lambda: df.write.parquet(str(tmp_path / "out")))
    assert result.complete, result.incomplete_reason
    assert inputs_of(result, "label") == {"name": {TRANSFORMATION}, "score": {TRANSFORMATION}}
    assert inputs_of(result, "name2") == {"name": {TRANSFORMATION}}
    assert inputs_of(result, "id") == {"id": {("DIRECT", "IDENTITY")}}


def test_pandas_udf_column_derives_from_its_arguments(capture: Capture, people: Any,
                                                      tmp_path: pathlib.Path) -> None:
    pytest.importorskip("pandas", reason="pandas_udf needs pandas")
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    def product(score: Any, team: Any) -> Any:
        return score * team

    # Real classes, not the strings `from __future__ import annotations` leaves: pandas_udf reads the hints.
    product.__annotations__ = {"score": pd.Series, "team": pd.Series, "return": pd.Series}
    weighted = pandas_udf(product, "double")  # type: ignore[call-overload]
    df = people.select("id", weighted("score", "team").alias("w"))
    result = capture.run(lambda: df.write.parquet(str(tmp_path / "out")))
    assert result.complete, result.incomplete_reason
    assert inputs_of(result, "w") == {"score": {TRANSFORMATION}, "team": {TRANSFORMATION}}


def test_udf_in_filter_and_join_makes_its_arguments_indirect(spark: Any, capture: Capture, people: Any,
                                                             tmp_path: pathlib.Path) -> None:
    from pyspark.sql.functions import udf

    keep = udf(lambda score: score > 35, "boolean")
    same_team = udf(lambda a, b: a == b, "boolean")
    teams = spark.createDataFrame([(10, "red")], "tid int, colour string")
    teams.write.parquet(str(tmp_path / "teams"))
    teams = spark.read.parquet(str(tmp_path / "teams"))
    df = people.where(keep("score")).join(teams, same_team(people["team"], teams["tid"])).select("id", "colour")
    result = capture.run(lambda: df.write.parquet(str(tmp_path / "out")))
    assert result.complete, result.incomplete_reason
    got = inputs_of(result, "id")
    assert got["id"] == {("DIRECT", "IDENTITY")}
    assert {t[0] for t in got["score"]} == {"INDIRECT"}
    # Spark evaluates a Python UDF of a join condition as a filter over the joined rows.
    assert {t[0] for t in got["team"]} == {"INDIRECT"} and {t[0] for t in got["tid"]} == {"INDIRECT"}
    assert "name" not in got


_JAVA_UDF = """
import org.apache.spark.sql.api.java.UDF2;

public class LwJoin implements UDF2<String, Double, String> {
    @Override
    public String call(String name, Double score) { return name + ":" + score; }
}
"""


@pytest.fixture
def java_udf(spark: Any, tmp_path: pathlib.Path) -> str:
    """A Java UDF (run by Spark as a ScalaUDF) compiled here and added with ADD JAR."""
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar is None:
        pytest.skip("no javac/jar on PATH: the Java UDF cannot be compiled")
    import pyspark

    src = tmp_path / "udf" / "LwJoin.java"
    src.parent.mkdir()
    src.write_text(_JAVA_UDF)
    classpath = str(pathlib.Path(pyspark.__file__).parent / "jars" / "*")
    subprocess.run([javac, "-cp", classpath, "-d", str(src.parent), str(src)], check=True, capture_output=True)
    subprocess.run([jar, "cf", str(tmp_path / "lwudf.jar"), "-C", str(src.parent), "LwJoin.class"], check=True)
    spark.sql(f"ADD JAR '{tmp_path / 'lwudf.jar'}'")
    spark.udf.registerJavaFunction("lw_join", "LwJoin", "string")
    return "lw_join"


def test_java_scala_udf_column_derives_from_its_arguments(spark: Any, capture: Capture, people: Any,
                                                          java_udf: str, tmp_path: pathlib.Path) -> None:
    from pyspark.sql.functions import expr

    df = people.select("id", expr(f"{java_udf}(name, score)").alias("label"))
    result = capture.run(lambda: df.write.parquet(str(tmp_path / "out")))
    assert result.complete, result.incomplete_reason
    assert inputs_of(result, "label") == {"name": {TRANSFORMATION}, "score": {TRANSFORMATION}}


def _shout(batches: Iterator[Any]) -> Iterator[Any]:
    for pdf in batches:
        yield pdf.assign(name=pdf["name"].str.upper())[["id", "name"]]


def _arrow_ids(batches: Iterator[Any]) -> Iterator[Any]:
    for batch in batches:
        yield batch.select(["id"])


def _team_total(pdf: Any) -> Any:
    return pdf.assign(total=pdf["score"].sum())[["team", "total"]]


def test_map_in_pandas_and_arrow_derive_from_every_column_given(capture: Capture, people: Any,
                                                                tmp_path: pathlib.Path) -> None:
    # The function gets whole rows: which column went where is unknown, so every output column derives
    # from all the columns the function was given (here the projection's two, not score or team).
    given = people.select("id", "name")
    result = capture.run(lambda: given.mapInPandas(_shout, "id int, name string").write.parquet(str(tmp_path / "p")))
    assert result.complete, result.incomplete_reason
    for out in ("id", "name"):
        assert inputs_of(result, out) == {"id": {TRANSFORMATION}, "name": {TRANSFORMATION}}

    arrow = capture.run(lambda: given.mapInArrow(_arrow_ids, "id int").write.parquet(str(tmp_path / "a")))
    assert arrow.complete, arrow.incomplete_reason
    assert inputs_of(arrow, "id") == {"id": {TRANSFORMATION}, "name": {TRANSFORMATION}}


def test_apply_in_pandas_derives_from_every_column_of_the_group(capture: Capture, people: Any,
                                                                 tmp_path: pathlib.Path) -> None:
    grouped = people.groupBy("team").applyInPandas(_team_total, "team int, total double")
    result = capture.run(lambda: grouped.write.parquet(str(tmp_path / "g")))
    assert result.complete, result.incomplete_reason
    every = {"id": {TRANSFORMATION}, "name": {TRANSFORMATION}, "score": {TRANSFORMATION}}
    # A grouped-map function gets every column of its group; the key also decides which rows meet.
    assert inputs_of(result, "total") == {**every, "team": {TRANSFORMATION, ("INDIRECT", "GROUP_BY")}}
    assert inputs_of(result, "team") == {**every, "team": {TRANSFORMATION, ("INDIRECT", "GROUP_BY")}}

    cogrouped = people.groupBy("team").cogroup(people.groupBy("team")) \
        .applyInPandas(lambda left, right: _team_total(left), "team int, total double")
    both = capture.run(lambda: cogrouped.write.parquet(str(tmp_path / "c")))
    assert both.complete, both.incomplete_reason
    assert inputs_of(both, "total") == {**every, "team": {TRANSFORMATION, ("INDIRECT", "GROUP_BY")}}


def test_grouped_aggregate_pandas_udf_and_arrow_udf(spark: Any, capture: Capture, people: Any,
                                                     tmp_path: pathlib.Path) -> None:
    from pyspark.sql.functions import pandas_udf, udf

    @pandas_udf("double")  # type: ignore[call-overload,misc]
    def mean(v: pd.Series) -> float:
        return float(v.mean())

    @udf("string", useArrow=True)  # type: ignore[misc]
    def tag(name: str) -> str:
        return f"<{name}>"

    agg = people.groupBy("team").agg(mean("score").alias("avg_score"))
    result = capture.run(lambda: agg.write.parquet(str(tmp_path / "m")))
    assert result.complete, result.incomplete_reason
    # A grouped-aggregate pandas_udf is Spark's aggregate function (its body is opaque, its kind is not).
    assert inputs_of(result, "avg_score") == {"score": {("DIRECT", "AGGREGATION")}, "team": {("INDIRECT", "GROUP_BY")}}

    tagged = capture.run(lambda: people.select(tag("name").alias("t")).write.parquet(str(tmp_path / "t")))
    assert tagged.complete, tagged.incomplete_reason
    assert inputs_of(tagged, "t") == {"name": {TRANSFORMATION}}
