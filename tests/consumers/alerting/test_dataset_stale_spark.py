"""``dataset_stale`` end to end (issue 41.3): real PySpark jobs under ``lineagewire instrument``, the real broker,
the alerting service as ``consume alerting`` runs it (a new group catches up with the history on the topic first)
and a webhook at a real HTTP receiver on 127.0.0.1.

One Spark application runs the jobs in sequence, each in a ``job_run`` block of its own (its own job identity),
so the machine starts one JVM:

1. ``ingest_events`` writes raw_events;
2. ``sessions`` reads raw_events and writes sessions, the dataset with the promise (``freshness: 5s``);
3. ``ingest_events`` fails in a Python UDF while it overwrites raw_events.

The service starts after them: it reads that history silently, then its clock finds the promise of sessions
broken. Exactly one page must come, naming sessions' last write and run, and the upstream cause: raw_events not
written since the first run, job ingest_events FAILED with the UDF's error.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import uuid

import pytest

from lineagewire.consumers.alerting.catchup import CatchUp
from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.consumers.runtime import ConsumerRuntime

from .receivers import HttpReceiver

ROOT = pathlib.Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.integration]

JOBS = textwrap.dedent('''
    import sys

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from lineagewire.producers.spark import job_run

    out = sys.argv[1]
    spark = (SparkSession.builder.appName("events").master("local[1]")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    events = spark.createDataFrame([(1, "click"), (2, "view")], "id INT, kind STRING")

    with job_run(spark, "ingest_events"):
        events.write.mode("overwrite").parquet(f"{out}/raw_events")
    with job_run(spark, "sessions") as run:
        spark.read.parquet(f"{out}/raw_events").groupBy("kind").count().write.mode("overwrite").parquet(
            f"{out}/sessions")
    print(f"sessions run: {run.run_id}")

    @F.udf("string")
    def explode(kind):
        raise ValueError(f"bad event {kind}")

    try:
        with job_run(spark, "ingest_events"):
            events.withColumn("kind", explode("kind")).write.mode("overwrite").parquet(f"{out}/raw_events")
    except Exception:
        print("ingest_events: failed as it should")
    print("jobs: done")
    spark.stop()
''')


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_missed_promise_pages_once_naming_the_failed_upstream_job(settings, tmp_path: pathlib.Path,  # noqa: ANN001
                                                                    http_receiver: HttpReceiver) -> None:
    pytest.importorskip("pyspark")
    out = tmp_path / "out"
    script = tmp_path / "jobs.py"
    script.write_text(JOBS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_")}
    env["PYSPARK_PYTHON"] = sys.executable
    job = subprocess.run([sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers,
                          "instrument", "--topic", settings.topics.jobs, "--namespace", "events",
                          "--set", f"outbox_dir={tmp_path / 'outbox'}", "--set", "time_budget_ms=10000",
                          "--", sys.executable, str(script), str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert job.returncode == 0 and "failed as it should" in job.stdout and "jobs: done" in job.stdout, \
        job.stderr[-3000:]

    cfg = parse_config({"route": {"group_wait": "0s", "group_interval": "0s", "channels": ["hook"]},
                        "channels": {"hook": {"type": "webhook", "url": f"{http_receiver.url}/hook"}},
                        "rules": [{"name": "stale", "kind": "dataset_stale", "severity": "critical"}],
                        "datasets": [{"dataset": str(out / "sessions"), "freshness": "5s", "owner": "web"}]})
    group = f"g-{uuid.uuid4().hex[:8]}"
    handler = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}",
                              catch_up=CatchUp(settings, group, [settings.topics.jobs]))
    runtime = ConsumerRuntime(settings, handler, topics=[settings.topics.jobs], group_id=group, dead_letters=False)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    try:
        http_receiver.wait("/hook", lambda r: len(r) >= 1, timeout=120)
        handler.settle()
    finally:
        runtime.stop()
        thread.join(60)
    got = http_receiver.on("/hook")
    alerts = [a for r in got for a in r.json["alerts"]]
    assert len(got) == 1 and len(alerts) == 1, [a["annotations"].get("summary") for a in alerts]
    (alert,) = alerts
    assert alert["status"] == "firing"
    assert (alert["labels"]["kind"], alert["labels"]["job"], alert["labels"]["dataset"]) == (
        "dataset_stale", "sessions", f"file/{out}/sessions")
    ann = alert["annotations"]
    assert f"sessions run: {ann['last_run']}" in job.stdout and ann["owner"] == "web", ann
    cause = ann["causes"].splitlines()[0]
    assert cause.startswith(f"{out}/raw_events has not been written since "), ann
    assert cause.endswith("(job ingest_events FAILED: ValueError: bad event click)") or \
        cause.endswith("(job ingest_events FAILED: ValueError: bad event view)"), cause
    assert ann["summary"].endswith(f"; stale because {cause}"), ann
