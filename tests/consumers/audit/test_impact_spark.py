"""Impact end to end (issue 40.2): real PySpark jobs with the emitter -> the real broker -> ``consume registry`` ->
``lineagewire impact`` and ``GET /impact``.

One Spark process runs four jobs (``job_run``, as the refresh runner runs its refreshes): a producer writes a
table with columns a, b, c; job1 reads a and b into t1; job2 reads c into t2; job3 reads t1 into t3, as the
scheduler's refresh of a materialized table (``schedule`` with its workflow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from tests.consumers.audit.conftest import raw_records

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

JOBS = textwrap.dedent('''
    import datetime as dt
    import sys
    from pyspark.sql import SparkSession
    from lineagewire.producers.spark import install, job_run

    out = sys.argv[1]
    spark = (SparkSession.builder.appName("impact_chain").master("local[2]")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    install(spark)
    with job_run(spark, "producer", tags={"owner": "pat"}):
        spark.createDataFrame([(1, 2, 3), (4, 5, 6)], "a INT, b INT, c INT").write.mode("overwrite").parquet(
            out + "/abc")
    with job_run(spark, "job1", tags={"owners": "ann,bob"}):
        spark.read.parquet(out + "/abc").select("a", "b").write.mode("overwrite").parquet(out + "/t1")
    with job_run(spark, "job2", tags={"team": "sales"}):
        spark.read.parquet(out + "/abc").select("c").write.mode("overwrite").parquet(out + "/t2")
    schedule = {"workflow_id": "wf-t3", "command_id": "cmd-t3", "attempt": 1,
                "nominal_time": dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)}
    with job_run(spark, "refresh db.t3", schedule=schedule, tags={"table": "db.t3", "command_id": "cmd-t3"}):
        spark.read.parquet(out + "/t1").write.mode("overwrite").parquet(out + "/t3")
    spark.stop()
''')


def test_impact_of_a_table_and_of_one_column_after_real_spark_jobs(kafka_settings, topic_factory, tmp_path
                                                                   ) -> None:  # noqa: ANN001
    pytest.importorskip("pyspark")
    from lineagewire.consumers.audit.impact_cli import impact as impact_command
    from lineagewire.consumers.audit.registry import RegistryHandler
    from lineagewire.consumers.audit.registry_api import create_app
    from lineagewire.consumers.audit.registry_store import RegistryStore
    from lineagewire.consumers.runtime import ConsumerRuntime

    topic = topic_factory()
    settings = kafka_settings.model_copy(update={"topics": kafka_settings.topics.model_copy(update={"jobs": topic})})
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers,
           "LINEAGEWIRE_KAFKA__TOPICS__JOBS": topic, "PYSPARK_PYTHON": sys.executable}
    (tmp_path / "jobs.py").write_text(JOBS)
    out = tmp_path / "out"
    job = subprocess.run([sys.executable, str(tmp_path / "jobs.py"), str(out)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert job.returncode == 0, job.stderr[-3000:]
    count = len(raw_records(settings, topic))
    db = f"sqlite:///{tmp_path / 'registry.db'}"
    handler = RegistryHandler(db)
    ConsumerRuntime(settings, handler, group_id=f"impact-{uuid.uuid4().hex[:8]}").run(max_events=count)
    assert handler.applied == count

    runner = CliRunner()
    got = runner.invoke(impact_command, [str(out / "abc"), "--format", "json", "--db-url", db])
    assert got.exit_code == 0, got.output
    result = json.loads(got.stdout)
    hops = {d["name"].rsplit("/", 1)[-1]: d["hops"] for d in result["datasets"]}
    assert hops == {"t1": 1, "t2": 1, "t3": 2}
    jobs = {j["job"].split("/", 1)[1]: j for j in result["jobs"]}
    assert {name: (j["hops"], j["owners"]) for name, j in jobs.items()} == {
        "job1": (1, ["ann", "bob"]), "job2": (1, ["sales"]), "refresh db.t3": (2, [])}
    assert [(t["table"], t["workflow_id"], t["hops"]) for t in result["materialized_tables"]] == [
        ("db.t3", "wf-t3", 2)]
    fields = {(c["name"].rsplit("/", 1)[-1], c["field"]) for c in result["columns"]}
    assert {("t1", "a"), ("t1", "b"), ("t2", "c"), ("t3", "a"), ("t3", "b")} <= fields

    got = runner.invoke(impact_command, [str(out / "abc"), "--column", "c", "--format", "json", "--db-url", db])
    assert got.exit_code == 0, got.output
    only_c = json.loads(got.stdout)
    assert [(j["job"].split("/", 1)[1], j["hops"], j["type"]) for j in only_c["jobs"]] == [("job2", 1, "DIRECT")]
    assert [(d["name"].rsplit("/", 1)[-1], d["hops"]) for d in only_c["datasets"]] == [("t2", 1)]
    assert [(c["field"], c["type"]) for c in only_c["columns"]] == [("c", "DIRECT")]
    text = runner.invoke(impact_command, [str(out / "abc"), "--db-url", db]).stdout
    assert "refreshes db.t3" in text and "owners ann, bob" in text

    store = RegistryStore(db)
    try:
        client = TestClient(create_app(store, "t" * 16))
        assert client.get("/impact", params={"dataset": str(out / "abc")}).json() == result
        rest_c = client.get("/impact", params={"dataset": f"file:{out / 'abc'}", "column": "c"}).json()
        assert rest_c == only_c
    finally:
        store.close()
