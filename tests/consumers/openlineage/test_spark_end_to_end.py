"""A real PySpark job with the emitter -> Kafka -> ``lineagewire consume openlineage`` -> HTTP backend -> replay.

Runs the job in its own process (a JVM holds one SparkContext; the producer tests own theirs).
Skipped when the emitter (lineagewire.producers.spark.install) is not there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest

from .receiver import Receiver, event_key
from .spec import load_validator

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

JOB = textwrap.dedent('''
    import sys
    from pyspark.sql import SparkSession, functions as F
    from lineagewire.producers.spark import install

    out = sys.argv[1]
    spark = (SparkSession.builder.appName("e2e_orders").master("local[2]")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.warehouse.dir", out + "/warehouse").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    install(spark)
    orders = spark.createDataFrame([(1, 10, 25.0), (2, 11, 40.5), (3, 10, 12.0)],
                                   "order_id INT, customer_id INT, amount DOUBLE")
    orders.write.mode("overwrite").parquet(out + "/raw/orders")
    raw = spark.read.parquet(out + "/raw/orders")
    raw.groupBy("customer_id").agg(F.sum("amount").alias("revenue")).write.mode("overwrite").parquet(
        out + "/marts/revenue")
    spark.stop()
''')


def test_pyspark_job_shows_up_as_valid_openlineage_runs_and_replays(settings, tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("pyspark")
    spark_mod = pytest.importorskip("lineagewire.producers.spark")
    if not hasattr(spark_mod, "install"):
        pytest.skip("the emitter has no install() yet")
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers,
           "LINEAGEWIRE_KAFKA__TOPICS__JOBS": settings.topics.jobs, "PYSPARK_PYTHON": sys.executable}
    env.pop("OPENLINEAGE_CONFIG", None)
    (tmp_path / "job.py").write_text(JOB)
    with Receiver() as rx:
        consumer = subprocess.Popen(
            [sys.executable, "-m", "lineagewire", "consume", "openlineage", "--url", rx.url,
             "--group", f"e2e-{uuid.uuid4().hex[:8]}"],
            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            job = subprocess.run([sys.executable, str(tmp_path / "job.py"), str(tmp_path / "out")], cwd=tmp_path,
                                 env=env, capture_output=True, text=True, timeout=300)
            assert job.returncode == 0, job.stderr[-3000:]
            got = rx.wait_for(lambda evs: any(e["eventType"] == "COMPLETE" and "." not in e["job"]["name"]
                                              for e in evs), timeout=90)
        finally:
            consumer.send_signal(signal.SIGTERM)
            _, err = consumer.communicate(timeout=60)
        assert consumer.returncode == 0, err[-2000:]
    apps = [e for e in got if e["job"]["name"] == "e2e_orders"]
    actions = [e for e in got if e["job"]["name"].startswith("e2e_orders.")]
    assert apps and apps[0]["eventType"] == "START" and apps[-1]["eventType"] == "COMPLETE"
    app_run_id = apps[0]["run"]["runId"]
    assert {e["run"]["runId"] for e in apps} == {app_run_id}
    assert actions, "no action run"
    for a in actions:
        assert a["run"]["facets"]["parent"]["run"]["runId"] == app_run_id
    validate = load_validator()
    if validate is not None:
        assert validate(got) == []
    # Replay reproduces what the backend received (minus the client's own version tag).
    out = tmp_path / "replay.jsonl"
    r = subprocess.run([sys.executable, "-m", "lineagewire", "replay", "--into", "file", "--output", str(out),
                        "--format", "openlineage"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    replayed = [json.loads(x) for x in out.read_text().splitlines()]
    for e in got:
        e["run"]["facets"].pop("tags", None)
    assert sorted(replayed, key=event_key) == sorted(got, key=event_key)
