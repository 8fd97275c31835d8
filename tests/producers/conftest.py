"""One real local SparkSession for every producer test (a JVM can hold only one SparkContext).

spark-sql-kafka comes through ``spark.jars.packages`` (resolved by Spark's Ivy
from Maven Central once, then cached in ~/.ivy2) so Kafka sources and sinks
can be tested. Tests install and close their own emitter on this session.
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Iterator

import pytest


def spark_packages() -> str:
    import pyspark

    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator:  # noqa: ANN001
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    base = tmp_path_factory.mktemp("spark")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("lineagewire-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={base / 'derby'}")
        .config("spark.jars.packages", spark_packages())
        .config("spark.jars.ivySettings", str(pathlib.Path(__file__).with_name("ivysettings.xml")))
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
