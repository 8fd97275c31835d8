"""The supported Spark lines and the Scala/connector checks at emitter start (issue 29, item 6)."""

from __future__ import annotations

import logging

import pytest

from lineagewire.producers.spark import UnsupportedSparkError, versions


@pytest.mark.parametrize(("version", "ok"), [
    ("3.5.0", True), ("3.5.7", True), ("4.0.0", True), ("4.3.0", True), ("4.1.0-SNAPSHOT", True),
    ("3.4.4", False), ("3.3.2", False), ("2.4.8", False), ("5.0.0", False), ("", False), ("x.y", False),
])
def test_supported_lines(version: str, ok: bool) -> None:
    assert versions.supported(version) is ok


def test_an_old_spark_is_refused_with_the_versions_supported() -> None:
    with pytest.raises(UnsupportedSparkError, match=r"Spark 3\.4\.1 is not supported.*3\.5 and 4\.x"):
        versions.check("3.4.1", "", jvm=None)


def test_a_package_for_the_other_scala_is_named_with_the_one_that_fits() -> None:
    said = versions.package_mismatches(
        "io.delta:delta-spark_2.13:3.3.2, org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7,"
        "org.postgresql:postgresql:42.7.4", "2.12")
    assert said == ["spark.jars.packages has io.delta:delta-spark_2.13:3.3.2, built for Scala 2.13, but this Spark "
                    "runs Scala 2.12: its classes will fail to load; use io.delta:delta-spark_2.12:3.3.2 (a version "
                    "of it built for this Spark)"]
    assert versions.package_mismatches("io.delta:delta-spark_2.13:4.0.0", "2.13") == []


def test_connectors_for_another_spark_line_are_named() -> None:
    said = versions.connector_mismatches(
        "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.0,io.delta:delta-spark_2.12:4.0.0,"
        "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.1,org.apache.spark:spark-connect_2.12:3.5.7", "3.5.7")
    assert len(said) == 3, said
    assert "expected iceberg-spark-runtime-3.5" in said[0]
    assert "delta-spark 3.x for Spark 3.5" in said[1]
    assert "spark-sql-kafka-0-10_2.12:3.5.1" in said[2] and "version 3.5.7" in said[2]
    assert versions.connector_mismatches("org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.0,"
                                         "io.delta:delta-spark_2.12:3.3.2", "3.5.7") == []


@pytest.mark.spark
def test_the_check_reads_the_driver_scala_and_warns_about_the_other(spark, caplog) -> None:  # noqa: ANN001
    """Through the real driver JVM: its Scala version is read from the JVM, not guessed from PySpark's."""
    other = "2.13" if versions.scala_binary(spark.sparkContext._jvm) == "2.12" else "2.12"
    with caplog.at_level(logging.WARNING, logger=versions.__name__):
        versions.check(spark.version, f"io.delta:delta-spark_{other}:9.9.9", spark.sparkContext._jvm)
    assert f"built for Scala {other}" in caplog.text
