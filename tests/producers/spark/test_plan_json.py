"""The JVM plan JSON writer (java/PlanJson.java) writes exactly what Spark's own toJSON() writes.

Compared string for string on the analyzed, optimized and physical plans of real actions on the
shared SparkSession: wide projections, joins, aggregates, windows, CASE WHEN, subqueries, a cached
frame, catalog commands, and literals of every type with characters JSON has to escape.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lineagewire.producers.spark import jvm_classes
from lineagewire.producers.spark.lineage import extract_action_lineage, jvm

from .listening import query_listener

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(shutil.which("javac") is None and not os.environ.get("JAVA_HOME"), reason="needs a JDK (javac)"),
]


class _Capture:
    """Keeps the QueryExecution of every action (a QueryExecutionListener through py4j)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def onSuccess(self, func_name: str, qe: Any, duration_ns: int) -> None:  # noqa: N802 - Java interface
        with self.lock:
            self.seen.append((str(func_name), qe))

    def onFailure(self, func_name: str, qe: Any, exception: Any) -> None:  # noqa: N802 - Java interface
        self.onSuccess(func_name, qe, 0)

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]


@pytest.fixture
def writer(spark: Any) -> Iterator[Any]:
    """The compiled PlanJson in the driver JVM (compiled as the emitter does, into the shared cache)."""
    info = jvm_classes.JvmInfo.of(spark)
    javac = jvm_classes.find_javac(info)
    assert javac is not None
    jvm_classes.compile_classes(info, javac)
    jvm._WRITERS.clear()  # look the cache up now, not after the retry interval of an earlier miss
    found = jvm.plan_writer()
    assert found is not None, "compiled, yet not loaded"
    yield found
    jvm._WRITERS.clear()


def _actions(spark: Any, base: str) -> None:
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812

    wide = spark.range(20).select(F.col("id").alias("key"), *[(F.col("id") * i).alias(f"c{i}") for i in range(60)])
    wide.write.mode("overwrite").parquet(f"{base}/wide")
    src = spark.read.parquet(f"{base}/wide")
    dims = spark.range(5).select(F.col("id").alias("key"), F.lit('la"bel\\ \n\t\u00e9\u2603\x01').alias("label"))
    src.where("c1 > 3").join(dims, "key", "left").select(
        "key", "label", *[(F.col(f"c{i}") + 1).alias(f"t{i}") for i in range(60)]
    ).write.mode("overwrite").parquet(f"{base}/out")
    src.groupBy((F.col("key") % 3).alias("g")).agg(F.sum("c1"), F.avg("c2"), F.countDistinct("c3")) \
        .write.format("noop").mode("overwrite").save()
    w = Window.partitionBy(F.col("key") % 2).orderBy(F.col("c1").desc())
    src.select("key", F.rank().over(w).alias("r"), F.when(F.col("c2") > 4, "big").otherwise(None).alias("size"),
               F.sha2(F.col("key").cast("string"), 256).alias("h")).write.format("noop").mode("overwrite").save()
    spark.sql(
        "SELECT 1.5D AS d, CAST('NaN' AS DOUBLE) AS nan, 2.25F AS f, 12345678901234567890.123BD AS dec, "
        "DATE'2026-11-23' AS day, TIMESTAMP'2026-11-23 12:00:00' AS ts, X'00FF' AS bin, array(1, 2) AS arr, "
        "map('k', 'v') AS m, named_struct('a', 1, 'b', 'x') AS s, CAST(NULL AS STRING) AS nothing, "
        "'quote \" and \\\\ and /' AS text, 9223372036854775807L AS big, CAST(7 AS TINYINT) AS tiny"
    ).write.format("noop").mode("overwrite").save()
    src.createOrReplaceTempView("lw_pj_src")
    spark.sql("SELECT key, (SELECT max(c1) FROM lw_pj_src) AS top FROM lw_pj_src "
              "WHERE key IN (SELECT key FROM lw_pj_src WHERE c2 > 10) "
              "UNION ALL SELECT key, c1 FROM lw_pj_src").write.format("noop").mode("overwrite").save()
    cached = src.select("key", "c1").cache()
    cached.where("c1 > 0").write.format("noop").mode("overwrite").save()
    cached.unpersist()
    spark.sql("DROP TABLE IF EXISTS lw_pj_table")
    spark.sql("CREATE TABLE lw_pj_table USING parquet PARTITIONED BY (p) "
              "AS SELECT key, c1, key % 2 AS p FROM lw_pj_src")
    spark.sql("INSERT OVERWRITE lw_pj_table PARTITION (p = 1) SELECT key, c1 FROM lw_pj_src")
    spark.range(10).selectExpr("explode(array(id, id + 1)) AS e").sample(0.5, seed=3).repartition(3, "e") \
        .write.format("noop").mode("overwrite").save()


_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions."


def _compacted(value: Any, in_expression: bool = False) -> Any:
    """toJSON's document as PlanJson.writeCompact writes it (its attribute references expanded): leaves
    without num-children, expressions without metadata and qualifier, an ExprId as {"id": n}."""
    if isinstance(value, list):
        return [_compacted(v, in_expression) for v in value]
    if not isinstance(value, dict):
        return value
    if value.get("product-class") == _EXPRESSIONS + "ExprId":
        return {"id": value["id"]}
    expression = str(value.get("class", "")).startswith(_EXPRESSIONS)
    return {k: _compacted(v) for k, v in value.items()
            if not (k == "num-children" and v == 0) and not (expression and k in ("metadata", "qualifier"))}


def _expanded(doc: dict[str, Any]) -> Any:
    """The compact document's tree with every attribute reference (-(i + 1) in a list) replaced by attrs[i]."""
    attrs = doc["attrs"]
    assert len({json.dumps(a, sort_keys=True) for a in attrs}) == len(attrs), "an attribute written twice"

    def expand(value: Any) -> Any:
        if isinstance(value, list):
            return [attrs[-v - 1] if type(v) is int and v < 0 else expand(v) for v in value]
        if isinstance(value, dict):
            return {k: expand(v) for k, v in value.items()}
        return value

    return expand(doc["tree"])


def test_the_jvm_writer_writes_what_tojson_writes(spark: Any, writer: Any, tmp_path) -> None:  # noqa: ANN001
    try:
        with query_listener(spark, _Capture()) as capture:
            _actions(spark, str(tmp_path))
            spark._jsparkSession.sparkContext().listenerBus().waitUntilEmpty(60_000)
    finally:
        spark.sql("DROP TABLE IF EXISTS lw_pj_table")
    written_before = writer.written()
    compared = 0
    kinds: set[str] = set()
    for func_name, qe in capture.seen:
        for stage in ("analyzed", "optimizedPlan", "executedPlan"):
            plan = getattr(qe, stage)()
            expected = str(plan.toJSON())
            got = str(writer.write(plan))
            if got != expected:
                at = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
                          min(len(got), len(expected)))
                raise AssertionError(f"{func_name} {stage}: differs at {at}: got {got[at - 80:at + 80]!r}, "
                                     f"toJSON {expected[at - 80:at + 80]!r}")
            compact = _expanded(json.loads(str(writer.writeCompact(plan))))
            assert compact == _compacted(json.loads(expected)), f"{func_name} {stage}: compact form differs"
            compared += 1
            kinds.add(str(plan.getClass().getSimpleName()))
    assert writer.fallbacks() == 0, writer.lastFallback()
    # At least: emitters of earlier tests may still be extracting through the same writer.
    assert writer.written() - written_before >= compared
    assert compared >= 30, f"only {compared} plans compared"
    # The plans covered what the rules are about: commands with catalog tables, a cached relation, writes.
    assert {"CreateDataSourceTableAsSelectCommand", "InsertIntoHadoopFsRelationCommand"} <= kinds, kinds


def test_extraction_reads_the_jvm_writers_json(spark: Any, writer: Any, tmp_path) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F  # noqa: N812

    df = spark.range(5).select(F.col("id").alias("a"), (F.col("id") * 2).alias("b"))
    df.write.parquet(f"{tmp_path}/in")
    qe = spark.read.parquet(f"{tmp_path}/in").selectExpr("a + b AS c")._jdf.queryExecution()
    calls: list[Any] = []
    here = threading.get_ident()

    class Spy:  # the real JVM writer, with a record of what this thread's extraction asked it
        def __getattr__(self, name: str) -> Any:
            def call(*args: Any) -> Any:
                if threading.get_ident() == here:  # not the emitters of earlier tests, on the listener bus
                    calls.append(name)
                return getattr(writer, name)(*args)
            return call

    jvm._WRITERS[id(spark.sparkContext._gateway)] = (Spy(), time.monotonic())
    # 30 s, not the shipped 1 s: this test counts py4j calls through a spy, which is slow by design.
    result = extract_action_lineage(qe, "collect", budget_s=30)
    assert result.complete, result.incomplete_reason
    assert [d["name"] for d in result.inputs] == [f"{tmp_path}/in"]
    assert [d["format"] for d in result.inputs] == ["parquet"]
    # One call each: the compact JSON, whether the analyzed plan reads a persisted view (which the optimized
    # plan no longer shows), then the input relations' formats and paths (all inputs at once).
    assert calls == ["writeCompact", "readsPersistedView", "fileRelations"], calls


def test_the_writer_finds_nodes_and_file_relations_as_py4j_does(spark: Any, writer: Any, tmp_path) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F  # noqa: N812

    from lineagewire.producers.spark.lineage.plan import parse_plan_json

    spark.range(4).select(F.col("id").alias("k"), F.col("id").alias("v")).write.parquet(f"{tmp_path}/a")
    spark.range(4).select(F.col("id").alias("k")).write.csv(f"{tmp_path}/b", header=True)
    df = spark.read.parquet(f"{tmp_path}/a").join(spark.read.csv(f"{tmp_path}/b", header=True), "k") \
        .where("v > 0")
    df.write.parquet(f"{tmp_path}/out")
    root = df._jdf.queryExecution().optimizedPlan()
    plan = parse_plan_json(str(root.toJSON()))
    fast = jvm.JvmPlan(root, jvm.Deadline(30), writer)
    slow = jvm.JvmPlan(root, jvm.Deadline(30))
    relations = []
    for node in reversed(list(plan.walk())):  # deepest first: no way cached yet
        assert fast.node(node.path).equals(slow.node(node.path)), node.path
        if node.simple == "LogicalRelation":
            relations.append(slow.node(node.path).relation())
    assert len(relations) == 2
    facts = sorted(fast.file_relation(r) for r in relations)
    assert facts == [("CSVFileFormat", "csv", [f"file:{tmp_path}/b"]),
                     ("ParquetFileFormat", "parquet", [f"file:{tmp_path}/a"])]
    assert fast.file_relation(root) is None  # not a relation
    assert jvm.JvmPlan(root, jvm.Deadline(30)).file_relation(relations[0]) is None  # no writer: ask py4j


def test_without_the_compiled_class_plan_json_is_tojson(spark: Any, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("LINEAGEWIRE_HOME", str(tmp_path / "empty-home"))
    jvm._WRITERS.clear()
    try:
        assert jvm.plan_writer() is None
        plan = spark.range(3).selectExpr("id * 2 AS x")._jdf.queryExecution().optimizedPlan()
        assert jvm.plan_json(plan) == str(plan.toJSON())
    finally:
        jvm._WRITERS.clear()
