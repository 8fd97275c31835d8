"""``breaking_change`` end to end: real PySpark jobs under ``lineagewire instrument``, the real broker, the
alerting service and a real webhook receiver on 127.0.0.1 (the example chain of issue 40).

One Spark application runs the chain's jobs in sequence, each in a ``job_run`` block of its own (its own job
identity), so the machine starts one JVM:

1. ``producer`` writes table ``t`` with columns a, b, c;
2. ``consumer_1`` reads a and b, ``consumer_2`` reads c (each writes what it read);
3. ``producer`` overwrites ``t`` without c.

Exactly one ``breaking_change`` notification must come, naming consumer_2 and ``c``, with consumer_1 counted
as safe.
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

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.consumers.runtime import ConsumerRuntime
from tests.helpers import wait_for

from .receivers import HttpReceiver

ROOT = pathlib.Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.integration]

CHAIN = textwrap.dedent('''
    import sys

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from lineagewire.producers.spark import job_run

    out = sys.argv[1]
    spark = (SparkSession.builder.appName("chain").master("local[2]")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.warehouse.dir", f"{out}/warehouse")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    with job_run(spark, "producer", tags={"owner": "platform"}):
        spark.createDataFrame([(1, 2, 3), (4, 5, 6)], "a INT, b INT, c INT").write.mode("overwrite").saveAsTable("t")
    with job_run(spark, "consumer_1", tags={"owner": "ann"}):
        spark.table("t").select((F.col("a") + F.col("b")).alias("ab")).write.mode("overwrite").parquet(f"{out}/c1")
    with job_run(spark, "consumer_2", tags={"owner": "bob"}):
        spark.table("t").select((F.col("c") * 2).alias("c2")).write.mode("overwrite").parquet(f"{out}/c2")
    with job_run(spark, "producer", tags={"owner": "platform"}):
        spark.createDataFrame([(1, 2), (4, 5)], "a INT, b INT").write.mode("overwrite").saveAsTable("t")
    print("chain: done")
    spark.stop()
''')


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_dropping_a_column_pages_once_for_the_consumer_that_reads_it(settings, tmp_path: pathlib.Path,  # noqa: ANN001
                                                                      http_receiver: HttpReceiver) -> None:
    pytest.importorskip("pyspark")
    cfg = parse_config({"route": {"group_wait": "0s", "group_interval": "0s", "channels": ["hook"]},
                        "channels": {"hook": {"type": "webhook", "url": f"{http_receiver.url}/hook"}},
                        "rules": [{"name": "breaking", "kind": "breaking_change", "severity": "critical"}]})
    handler = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}")
    runtime = ConsumerRuntime(settings, handler, topics=[settings.topics.jobs], group_id=f"g-{uuid.uuid4().hex[:8]}",
                              dead_letters=False)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    try:
        script = tmp_path / "chain.py"
        script.write_text(CHAIN)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_")}
        env["PYSPARK_PYTHON"] = sys.executable
        job = subprocess.run([sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers,
                              "instrument", "--topic", settings.topics.jobs, "--namespace", "chain",
                              "--set", f"outbox_dir={tmp_path / 'outbox'}", "--set", "time_budget_ms=10000",
                              "--", sys.executable, str(script), str(tmp_path / "out")],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert job.returncode == 0 and "chain: done" in job.stdout, job.stderr[-3000:]
        facts = handler.engine.facts

        def all_ended() -> bool:  # the four job runs and the application run, all read by the service
            runs = list(facts.runs.values())
            return len(runs) >= 5 and all(r.terminal for r in runs)

        wait_for(all_ended, timeout=120)
        got = http_receiver.wait("/hook", lambda r: len(r) >= 1, timeout=60)
        handler.settle()
    finally:
        runtime.stop()
        thread.join(60)
    got = http_receiver.on("/hook")
    alerts = [a for r in got for a in r.json["alerts"]]
    assert len(got) == 1 and len(alerts) == 1, (
        [a["annotations"].get("summary") for a in alerts], facts.changes, facts.readers)
    alert = alerts[0]
    assert alert["status"] == "firing"
    assert (alert["labels"]["kind"], alert["labels"]["job"], alert["labels"]["change"]) == (
        "breaking_change", "producer", "removed c")
    ann = alert["annotations"]
    assert ann["breaking"] == "chain/consumer_2 reads c (owner bob)", ann
    assert (ann["breaking_count"], ann["safe_count"], ann["unknown_count"]) == ("1", "1", "0"), ann
    assert "consumer_1" not in ann["details"]
