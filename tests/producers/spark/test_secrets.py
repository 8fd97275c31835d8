"""Secrets never leave the driver: a real job full of them, every event on the real broker and every log line."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest

from lineagewire.schemas import Codec, kind_of
from tests.helpers import read_topic, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

SECRETS = {
    "jaas": "JAAS-pw-1f3a",  # in a conf value under an innocent key
    "userinfo": "URL-pw-9c2e",  # user:password@ in a URL conf value
    "jdbc": "JDBC-pw-77d0",  # ;password= in a JDBC URL (SQL text and the DataFrame writer)
    "options": "OPTIONS-pw-41b8",  # OPTIONS (password '...') in SQL
    "tag": "TAG-tok-0e6f",  # job_run tag under a secret-looking name
    "error": "ERR-pw-5a5a",  # in the message of an exception that fails a run
    "extra": "ghp_Zq81Ks",  # matched only by a configured extra pattern
}

JOB = textwrap.dedent("""
    import logging, sys, uuid
    from pyspark.sql import SparkSession
    from lineagewire.producers.spark import install, job_run

    secrets, log_path, topic, outbox = sys.argv[1:5]
    secrets = __import__("json").loads(secrets)
    # Every lineagewire logger at DEBUG (py4j's own DEBUG log echoes every py4j command, conf values included:
    # not ours to redact, so it stays at WARNING like any third-party logger).
    logging.basicConfig(filename=log_path, level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
    logging.getLogger("lineagewire").setLevel(logging.DEBUG)
    driver = "org.apache.derby.jdbc.EmbeddedDriver"
    spark = (SparkSession.builder.master("local[1]").appName("secrets-job")
             .config("spark.ui.enabled", "false")
             .config("spark.lineagewire.kafka.sasl.jaas.config",
                     'org.apache.kafka.common.security.plain.PlainLoginModule required username="svc" '
                     f'password="{secrets["jaas"]}";')
             .config("spark.lineagewire.catalog.url", f"https://svc:{secrets['userinfo']}@catalog.example/api")
             .config("spark.hadoop.fs.s3a.secret.key", secrets["jaas"])
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    emitter = install(spark, listeners=["kafka", "log"], job_name="secrets-job",
                      config={"topic": topic, "outbox_dir": outbox, "log_level": "DEBUG", "flush_timeout": "30",
                              "streaming_listener": "false", "redact_patterns": "ghp_[A-Za-z0-9]+"})
    db = "lw" + uuid.uuid4().hex[:8]
    url = f"jdbc:derby:memory:{db};create=true;user=app;password={secrets['jdbc']}"
    with job_run(spark, "secrets-run", tags={"api_token": secrets["tag"], "team": "sales"},
                 sql=f"SELECT 1 -- {secrets['extra']}"):
        spark.createDataFrame([(1, "a")], "id int, label string").write.jdbc(
            url, "APP.ITEMS", properties={"driver": driver, "password": secrets["jdbc"]})
        spark.sql(f"CREATE TEMPORARY VIEW items USING org.apache.spark.sql.jdbc OPTIONS (url '{url}', "
                  f"dbtable 'APP.ITEMS', driver '{driver}', user 'app', password '{secrets['options']}')")
        spark.sql("SELECT count(*) FROM items").collect()
    try:
        with job_run(spark, "failing-run"):
            raise RuntimeError(f"cannot reach https://svc:{secrets['error']}@db.example/x")
    except RuntimeError:
        pass
    emitter.close(30)
    print("events", emitter.events)
""")


def test_no_secret_reaches_the_broker_or_the_log(kafka_settings, topic_factory, tmp_path: pathlib.Path) -> None:  # noqa: ANN001
    topic = topic_factory("secrets", partitions=1)
    script = tmp_path / "job.py"
    script.write_text(JOB)
    log_path, outbox = tmp_path / "job.log", tmp_path / "outbox"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_") or k == "LINEAGEWIRE_HOME"}
    env.update(PYSPARK_PYTHON=sys.executable, LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS=kafka_settings.bootstrap_servers)
    proc = subprocess.run([sys.executable, str(script), json.dumps(SECRETS), str(log_path), topic, str(outbox)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    made = int(proc.stdout.split("events", 1)[1].split()[0])

    messages = read_topic(kafka_settings, topic, expected=made, timeout=60, decode=False)
    assert len(messages) == made
    raw = b"\n".join(m.value() for m in messages)
    log_text = log_path.read_text()
    spooled = b"".join(p.read_bytes() for p in outbox.rglob("*") if p.is_file())
    for what, secret in SECRETS.items():
        assert secret.encode() not in raw, f"the {what} secret reached the broker"
        assert secret not in log_text, f"the {what} secret reached the log"
        assert secret.encode() not in spooled, f"the {what} secret is in the outbox"

    # Not vacuous: the secrets' places are in the events, redacted.
    codec = Codec()
    events = [codec.decode(m.value()) for m in messages]
    created = {e["header"]["job_name"]: e for e in events if kind_of(e) == "JobCreatedEvent"}
    conf = created["secrets-job"]["spec"]["conf"]
    assert conf["spark.lineagewire.kafka.sasl.jaas.config"].endswith('username="svc" password="***";')
    assert conf["spark.lineagewire.catalog.url"] == "https://svc:***@catalog.example/api"
    assert "spark.hadoop.fs.s3a.secret.key" not in conf
    assert created["secrets-run"]["spec"]["tags"] == {"api_token": "***", "team": "sales"}
    assert created["secrets-run"]["spec"]["sql"] == "SELECT 1 -- ***"
    sql = [e["sql"] for e in events if kind_of(e) == "ActionLineageEvent" and e.get("sql")]
    view = [s for s in sql if "CREATE TEMPORARY VIEW" in s]
    assert view and ";password=***'" in view[0] and "password '***'" in view[0]
    failed = [e for e in events if e.get("new_status") == "FAILED"]
    assert failed and "https://svc:***@db.example/x" in failed[0]["error"]["message"]
    assert "DEBUG" in log_text and "ActionLineageEvent" in log_text  # the log listener did log the events

    # Downstream: the OpenLineage service at DEBUG (-vv) turns the same events into its output (the sql facet,
    # errorMessage...) and logs them; neither holds a secret.
    out, svc_log = tmp_path / "openlineage.jsonl", tmp_path / "consumer.log"
    (tmp_path / "openlineage.yml").write_text(f"transport:\n  type: file\n  log_file_path: {out}\n  append: true\n")
    with svc_log.open("w") as log_file:
        svc = subprocess.Popen(
            [sys.executable, "-m", "lineagewire", "-vv", "consume", "openlineage", "--openlineage-config",
             str(tmp_path / "openlineage.yml"), "--topic", topic, "--group", f"secrets-{uuid.uuid4().hex[:8]}",
             "--no-dlq"], env=env, cwd=tmp_path, stdout=log_file, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: out.exists() and len(out.read_text().splitlines()) >= made, timeout=120)
        finally:
            svc.send_signal(signal.SIGTERM)
            svc.wait(timeout=30)
    written, consumer_log = out.read_text(), svc_log.read_text()
    for what, secret in SECRETS.items():
        assert secret not in written, f"the {what} secret reached the OpenLineage output"
        assert secret not in consumer_log, f"the {what} secret reached the consumer's debug log"
    assert "password '***'" in written and '"sql"' in written  # the redacted SQL did reach the sql facet
    assert "DEBUG" in consumer_log and "***" in consumer_log  # it did log the events, redacted fields included
