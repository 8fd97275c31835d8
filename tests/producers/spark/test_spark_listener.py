"""The SparkListener: Java, compiled once per machine; the Python one when no javac can compile it.

Job counts are checked against Spark's own status tracker, through a real SparkSession.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

from lineagewire.producers.spark import jvm_classes
from lineagewire.producers.spark.config import resolve_config
from lineagewire.producers.spark.exceptions import EmitterConfigError, JvmClassesError

ROOT = pathlib.Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(shutil.which("javac") is None and not os.environ.get("JAVA_HOME"),
                                reason="needs a JDK (javac)")


def _pyspark_info() -> jvm_classes.JvmInfo:
    pyspark = pytest.importorskip("pyspark")
    jars = pathlib.Path(pyspark.__file__).parent / "jars"
    javac = shutil.which("javac")
    assert javac is not None
    java_home = pathlib.Path(javac).resolve().parents[1]
    return jvm_classes.JvmInfo(spark_version=pyspark.__version__, java_version="17", java_home=str(java_home),
                               class_path=f"{jars}/*")


def _failing_javac(folder: pathlib.Path) -> str:
    script = folder / "javac"
    script.write_text("#!/bin/sh\necho 'error: this javac refuses everything' >&2\nexit 2\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.slow
def test_compile_writes_the_class_once_and_reuses_it(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("LINEAGEWIRE_HOME", str(tmp_path / "home"))
    info = _pyspark_info()
    assert jvm_classes.cached(info) is None
    javac = jvm_classes.find_javac(info)
    assert javac is not None

    folder = jvm_classes.compile_classes(info, javac)
    class_file = folder / "lineagewire" / "spark" / "JobEventsListener.class"
    assert class_file.read_bytes()[:4] == b"\xca\xfe\xba\xbe"
    assert jvm_classes.cached(info) == folder
    assert [p.name for p in folder.parent.iterdir()] == [folder.name], "no temporary folder left behind"

    # Cached: a javac that would fail is not even asked.
    assert jvm_classes.compile_classes(info, _failing_javac(tmp_path)) == folder
    # Another Spark version is another folder.
    other = jvm_classes.JvmInfo(**{**info.__dict__, "spark_version": "4.9.9"})
    assert jvm_classes.cache_dir(other) != folder and jvm_classes.cached(other) is None


def test_a_failing_javac_is_named_with_its_own_words(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("LINEAGEWIRE_HOME", str(tmp_path / "home"))
    info = _pyspark_info()
    javac = _failing_javac(tmp_path)
    with pytest.raises(JvmClassesError, match=r"exited with status 2 .*this javac refuses everything") as caught:
        jvm_classes.compile_classes(info, javac)
    assert javac in str(caught.value)
    assert jvm_classes.cached(info) is None
    assert not list((tmp_path / "home" / "jvm").iterdir()), "nothing half-written is left"


def test_an_unwritable_cache_folder_is_named(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    home = tmp_path / "home-is-a-file"
    home.write_text("not a folder")
    monkeypatch.setenv("LINEAGEWIRE_HOME", str(home))
    info = _pyspark_info()
    with pytest.raises(JvmClassesError, match=r"cannot write the compiled classes under .*home-is-a-file.*"
                                              r"set LINEAGEWIRE_HOME"):
        jvm_classes.compile_classes(info, jvm_classes.find_javac(info) or "javac")


def test_javac_setting_must_be_an_executable(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.delenv("LINEAGEWIRE_EMITTER__JAVAC", raising=False)
    with pytest.raises(EmitterConfigError, match=r"spark\.lineagewire\.javac=.*expected the path of a JDK's javac"):
        resolve_config(config={"javac": str(tmp_path / "no-such-javac")})
    monkeypatch.setenv("LINEAGEWIRE_EMITTER__JAVAC", "/bin/sh")
    assert resolve_config().javac == "/bin/sh"


def _ground_truth(spark) -> dict[str, int]:  # noqa: ANN001
    """Runs two good actions and one failing one in a job group; returns Spark's own count of their jobs."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    sc = spark.sparkContext
    group = f"lineagewire-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, "job counting test")
    try:
        spark.range(1000).selectExpr("id % 3 AS k").groupBy("k").count().count()
        spark.range(10).count()
        # A noop write evaluates every column (a failing collect() would leak PySpark's result socket).
        with pytest.raises((PySparkException, Py4JJavaError)):
            spark.range(3).selectExpr("raise_error(concat('boom ', cast(id AS string))) AS x") \
                .write.format("noop").mode("overwrite").save()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    tracker = sc.statusTracker()
    ids = tracker.getJobIdsForGroup(group)
    failed = sum(1 for i in ids if tracker.getJobInfo(i).status == "FAILED")
    return {"started": len(ids), "succeeded": len(ids) - failed, "failed": failed}


@pytest.mark.spark
def test_the_jvm_listener_counts_the_jobs_spark_ran(spark, make_emitter) -> None:  # noqa: ANN001
    emitter = make_emitter(listeners=[])
    assert emitter._hooks.spark_listener_ready.wait(120), "the compile did not finish"
    assert emitter.stats()["spark_listener"] == "jvm"

    expected = _ground_truth(spark)
    assert emitter.flush(30)
    assert expected["started"] >= 3 and expected["failed"] >= 1
    assert emitter.stats()["spark_jobs"] == expected


@pytest.mark.spark
def test_without_a_working_javac_the_python_listener_does_the_same(spark, make_emitter, tmp_path,  # noqa: ANN001
                                                                  monkeypatch, caplog) -> None:
    monkeypatch.setenv("LINEAGEWIRE_HOME", str(tmp_path / "home"))  # an empty cache: it has to compile
    caplog.set_level(logging.WARNING, logger="lineagewire.producers.spark.hooks")
    emitter = make_emitter(listeners=[], config={"javac": _failing_javac(tmp_path)})
    assert emitter._hooks.spark_listener_ready.wait(60)
    assert emitter.stats()["spark_listener"] == "py4j"
    [warning] = [r.getMessage() for r in caplog.records if "JVM SparkListener is unavailable" in r.getMessage()]
    assert "this javac refuses everything" in warning and "spark.lineagewire.javac" in warning

    expected = _ground_truth(spark)
    assert emitter.flush(30)
    assert emitter.stats()["spark_jobs"] == expected


@pytest.mark.spark
def test_spark_listener_off_counts_nothing(spark, make_emitter) -> None:  # noqa: ANN001
    emitter = make_emitter(listeners=[], config={"spark_listener": "false"})
    assert emitter._hooks.spark_listener_ready.is_set()
    spark.range(3).count()
    assert emitter.stats()["spark_listener"] is None and emitter.stats()["spark_jobs"] is None


STOPPED_FROM_THE_JVM = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    from tests.helpers import wait_for
    from lineagewire.producers.spark import install

    events_path = sys.argv[1]
    spark = SparkSession.builder.master("local[1]").appName("stopped-from-jvm") \\
        .config("spark.ui.enabled", "false").getOrCreate()
    emitter = install(spark, listeners=["file"], config={"file_path": events_path, "streaming_listener": "false"})
    emitter._hooks.spark_listener_ready.wait(120)
    spark.range(5).count()
    spark.sparkContext._jsc.sc().stop()  # the JVM side stops: no Python stop(), no atexit yet

    def finished():
        emitter.flush(1)
        lines = [json.loads(x) for x in open(events_path)] if emitter.events else []
        return lines if any(e.get("new_status") == "FINISHED" for e in lines) else None

    lines = wait_for(finished, timeout=60)
    print(json.dumps({"kind": emitter.stats()["spark_listener"],
                      "statuses": [e.get("new_status") for e in lines if "new_status" in e]}))
""")


@pytest.mark.spark
@pytest.mark.slow
def test_a_stop_on_the_jvm_side_ends_the_application_run(tmp_path) -> None:  # noqa: ANN001
    script = tmp_path / "job.py"
    script.write_text(STOPPED_FROM_THE_JVM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_") or k == "LINEAGEWIRE_HOME"}
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])  # tests.helpers
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "events.jsonl")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"kind": "jvm", "statuses": ["RUNNING", "FINISHED"]}, "ended by the Java listener, before exit"
