"""Actions that need a SparkSession of their own (Hive support, Delta Lake, Iceberg), run in a child process.

A JVM holds one SparkContext, and the shared test session (tests/producers/conftest.py)
has neither Hive support nor the lakehouse extensions and jars. So each test module
that needs one declares *scenarios*: functions ``(spark, capture, folder) -> results``
marked with ``@scenario``. ``Scenarios.run`` starts ONE child process per module, which
builds the session of the module's kind, registers the capturing listener, runs every
scenario in order and writes each scenario's ``ActionLineage`` results (or its error)
as JSON. The tests then assert on ``results["name"]``, one test per feature.

Run by hand (e.g. to debug): ``python -m tests.producers.spark.lineage.isolated MODULE KIND FOLDER OUT``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from lineagewire.producers.spark.lineage import ActionLineage
from tests.producers.packages import scala_binary

SCENARIO_TIMEOUT_S = 900
#: Messages of Spark's Ivy when a package has no build for this Spark / Scala version.
_UNRESOLVED = ("unresolved dependency", "not found", "java.lang.RuntimeException: [unresolved")

Scenario = Callable[[Any, Any, pathlib.Path], "ActionLineage | dict[str, ActionLineage]"]


def scenario(fn: Scenario) -> Scenario:
    """Mark ``fn`` as a scenario of its module (they run in definition order)."""
    fn._lineage_scenario = True  # type: ignore[attr-defined]
    return fn


def shipped_budget_s() -> float:
    """The time budget users get (the emitter's default)."""
    from .conftest import BUDGET_S

    return BUDGET_S


def delta_package() -> str:
    from importlib.metadata import version

    return f"io.delta:delta-spark_{scala_binary()}:{version('delta-spark')}"


def iceberg_package() -> str:
    import pyspark

    major_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"org.apache.iceberg:iceberg-spark-runtime-{major_minor}_{scala_binary()}:1.10.0"


def _session(kind: str, folder: pathlib.Path) -> Any:
    from pyspark.sql import SparkSession

    ivy = pathlib.Path(__file__).parents[2] / "ivysettings.xml"
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(f"lineagewire-tests-{kind}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(folder / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={folder / 'derby'}")
        .config("spark.jars.ivySettings", str(ivy))
        .config("spark.driver.memory", "1g")
    )
    if kind == "hive":
        url = f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true"
        builder = builder.config("spark.hadoop.javax.jdo.option.ConnectionURL", url).enableHiveSupport()
    elif kind == "delta":
        builder = (builder.config("spark.jars.packages", delta_package())
                   .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
                   .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
    elif kind == "iceberg":
        builder = (builder.config("spark.jars.packages", iceberg_package())
                   .config("spark.sql.extensions",
                           "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
                   .config("spark.sql.catalog.ice", "org.apache.iceberg.spark.SparkCatalog")
                   .config("spark.sql.catalog.ice.type", "hadoop")
                   .config("spark.sql.catalog.ice.warehouse", str(folder / "iceberg")))
    elif kind != "plain":
        raise ValueError(f"session kind {kind!r}: expected hive, delta, iceberg or plain")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _child(module_name: str, kind: str, folder: pathlib.Path, out: pathlib.Path) -> None:
    import importlib

    from pyspark.java_gateway import ensure_callback_server_started

    from .conftest import Capture

    report: dict[str, Any] = {}
    try:
        spark = _session(kind, folder)
    except Exception:  # noqa: BLE001 - reported to the parent, which skips or fails with it
        out.write_text(json.dumps({"__session__": {"error": traceback.format_exc()}}))
        return
    try:
        ensure_callback_server_started(spark.sparkContext._gateway)
        capture = Capture(spark, budget_s=shipped_budget_s())
        spark._jsparkSession.listenerManager().register(capture)
        module = importlib.import_module(module_name)
        for name, fn in vars(module).items():
            if not getattr(fn, "_lineage_scenario", False):
                continue
            sub = folder / name
            sub.mkdir()
            try:
                got = fn(spark, capture, sub)
                results = got if isinstance(got, dict) else {"": got}
                report[name] = {"ok": {k: dataclasses.asdict(v) for k, v in results.items()}}
            except Exception:  # noqa: BLE001 - one scenario's failure is that test's failure only
                report[name] = {"error": traceback.format_exc()}
            out.write_text(json.dumps(report))
    finally:
        spark.stop()


class Scenarios:
    """The results of one module's scenarios, run once in a child process."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report

    @classmethod
    def run(cls, module_name: str, kind: str, folder: pathlib.Path) -> Scenarios:
        out = folder / "results.json"
        log = folder / "child.log"
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        with log.open("w") as sink:
            proc = subprocess.run(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", __name__, module_name, kind, str(folder), str(out)],
                stdout=sink, stderr=subprocess.STDOUT, env=env, timeout=SCENARIO_TIMEOUT_S, check=False,
                cwd=pathlib.Path(__file__).parents[4])
        if not out.exists():
            tail = log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"the {kind} child session wrote no results (exit {proc.returncode}):\n{tail}")
        report = json.loads(out.read_text())
        session_error = report.get("__session__", {}).get("error")
        if session_error:
            if any(marker in session_error for marker in _UNRESOLVED):
                pytest.skip(f"{kind}: its Spark package has no build that resolves for this Spark version "
                            f"from Maven Central: {session_error.strip().splitlines()[-1][:300]}")
            raise AssertionError(f"the {kind} session did not start:\n{session_error}")
        return cls(report)

    def __getitem__(self, name: str) -> dict[str, ActionLineage]:
        entry = self.report.get(name)
        if entry is None:
            raise AssertionError(f"scenario {name} did not run (the child stopped before it); "
                                 f"ran: {sorted(self.report)}")
        if "error" in entry:
            raise AssertionError(f"scenario {name} failed in the child session:\n{entry['error']}")
        return {k: ActionLineage(**v) for k, v in entry["ok"].items()}

    def one(self, name: str) -> ActionLineage:
        """The single result of scenario ``name``."""
        return self[name][""]


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4]))
