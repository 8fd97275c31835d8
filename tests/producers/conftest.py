"""One real local SparkSession for every producer test (a JVM can hold only one SparkContext).

spark-sql-kafka comes through ``spark.jars.packages`` (resolved by Spark's Ivy
from Maven Central once, then cached in ~/.ivy2) so Kafka sources and sinks
can be tested. Tests install and close their own emitter on this session.
"""

from __future__ import annotations

import gc
import os
import pathlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from tests.producers.packages import IVY_SETTINGS, scala_binary, split_resolvable


def spark_packages() -> str:
    import pyspark

    return f"org.apache.spark:spark-sql-kafka-0-10_{scala_binary()}:{pyspark.__version__}"


def _start(base: pathlib.Path, packages: list[str]) -> Any:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("lineagewire-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={base / 'derby'}")
        .config("spark.jars.ivySettings", str(IVY_SETTINGS))
        .config("spark.driver.memory", "1g")
    )
    if packages:
        builder = builder.config("spark.jars.packages", ",".join(packages))
    return builder.getOrCreate()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator:  # noqa: ANN001
    pytest.importorskip("pyspark")
    from pyspark.errors import PySparkRuntimeError

    base = tmp_path_factory.mktemp("spark")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    packages = spark_packages().split(",")
    with warnings.catch_warnings():
        # PySpark leaves the stdin pipe of a JVM that did not start to the collector: close it here.
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            session = _start(base, packages)
        except PySparkRuntimeError:
            session = None
        gc.collect()
    if session is None:
        # A package without a build for this Spark (the newest one): start without it, and the tests
        # that need it skip (tests/producers/packages.py).
        kept = split_resolvable(packages)
        if kept == packages:
            raise RuntimeError(f"the test SparkSession did not start, though its packages resolve: {packages}")
        session = _start(base, kept)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(autouse=True)
def no_emitter_left_open() -> Iterator[None]:
    """A test that leaves an emitter open on the shared session makes every later ``install()`` return it (and its
    listeners, not the later test's): close it and fail the test that left it, not the one that trips over it."""
    yield
    hooks = sys.modules.get("lineagewire.producers.spark.process_hooks")
    left = hooks.active() if hooks is not None else []
    for emitter in left:
        emitter.close(5)
    assert not left, (f"this test left {len(left)} emitter(s) open, listeners "
                      f"{[e.config.listeners for e in left]}; close what the test installed")
