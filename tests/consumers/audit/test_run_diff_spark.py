"""Run diff end to end (issue 40.1): real PySpark jobs with the emitter -> the real broker -> ``consume registry``
-> ``runs diff`` and ``GET /runs/{id}/diff``.

One job, run three times, each in its own process (a JVM holds one SparkContext):
1. reads ``in/a`` and writes ``out/wide`` (columns a, b, c) and ``out/summary``;
2. drops c, reads a new input ``in/b``, and writes its summary under a new name, ``out/summary_v2``;
3. the same as 2: nothing changed (a diff that always, or never, reports something fails one of 2 and 3).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import uuid

import httpx
import pytest

from lineagewire.cli import main
from lineagewire.config import Settings
from lineagewire.kafka.local import free_port
from lineagewire.kafka.topics import TopicSpec, create_topics, delete_topics
from tests.consumers.audit.conftest import raw_records
from tests.helpers import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

JOB = textwrap.dedent('''
    import sys
    from pyspark.sql import SparkSession
    from lineagewire.producers.spark import install

    base, version = sys.argv[1], sys.argv[2]
    spark = (SparkSession.builder.appName("diff_wide").master("local[1]")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    install(spark)
    a = spark.read.parquet(base + "/in/a")
    wide = a.selectExpr("x AS a", "y AS b", "z AS c") if version == "1" else a.selectExpr("x AS a", "y AS b")
    wide.write.mode("overwrite").parquet(base + "/out/wide")
    if version == "1":
        a.groupBy("x").count().write.mode("overwrite").parquet(base + "/out/summary")
    else:
        spark.read.parquet(base + "/in/b").groupBy("k").count().write.mode("overwrite").parquet(
            base + "/out/summary_v2")
    spark.stop()
''')


def write_inputs(base: pathlib.Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name, table in (("a", pa.table({"x": [1, 2], "y": ["p", "q"], "z": [0.5, 1.5]})),
                        ("b", pa.table({"k": [1, 1, 2]}))):
        (base / "in" / name).mkdir(parents=True)
        pq.write_table(table, base / "in" / name / "part-0.parquet")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_runs_diff_shows_exactly_what_changed_between_real_spark_runs(
        kafka_settings: Settings, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyspark")
    import uvicorn

    from lineagewire.consumers.audit.registry import RegistryHandler
    from lineagewire.consumers.audit.registry_api import create_app
    from lineagewire.consumers.audit.registry_store import RegistryStore
    from lineagewire.consumers.runtime import ConsumerRuntime

    base = tmp_path / "data"
    write_inputs(base)
    (tmp_path / "job.py").write_text(JOB)
    topic = f"diff.{uuid.uuid4().hex[:10]}"
    create_topics(kafka_settings, [TopicSpec(topic, 1, 3600_000)])
    settings = kafka_settings.model_copy(update={"topics": kafka_settings.topics.model_copy(update={"jobs": topic})})
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers,
           "LINEAGEWIRE_KAFKA__TOPICS__JOBS": topic, "PYSPARK_PYTHON": sys.executable}
    db = f"sqlite:///{tmp_path / 'registry.db'}"
    try:
        for version in ("1", "2", "2"):
            job = subprocess.run([sys.executable, str(tmp_path / "job.py"), str(base), version], cwd=tmp_path,
                                 env=env, capture_output=True, text=True, timeout=300)
            assert job.returncode == 0, job.stderr[-3000:]
        count = len(raw_records(settings, topic))
        handler = RegistryHandler(db)
        ConsumerRuntime(settings, handler, group_id=f"diff-{uuid.uuid4().hex[:8]}").run(max_events=count)
        assert handler.applied == count
    finally:
        try:
            delete_topics(kafka_settings, [topic], timeout=20)
        except Exception:  # noqa: BLE001 - cleanup only
            pass

    code, out, err = cli(capsys, "jobs", "show", "diff_wide", "--db-url", db, "--format", "json")
    assert code == 0, err
    runs = json.loads(out)["runs"]
    assert [r["status"] for r in runs] == ["FINISHED"] * 3, runs
    first, second, third = (r["run_id"] for r in runs)

    def ds(path: str) -> dict[str, str]:
        return {"namespace": "file", "name": str(base / path)}

    code, out, err = cli(capsys, "runs", "diff", second, "--db-url", db, "--format", "json")
    assert code == 0, err
    diff = json.loads(out)
    assert diff["stored"] is True and diff["against"] == first and diff["changed"] is True
    assert diff["lineage_complete"] is True, diff["incomplete"]
    assert diff["inputs"] == {"added": [ds("in/b")], "removed": []}
    assert diff["outputs"] == {"added": [ds("out/summary_v2")], "removed": [ds("out/summary")]}
    assert [(s["name"], s["added"], [f["field"] for f in s["removed"]], s["retyped"], s["nullability"])
            for s in diff["schemas"]] == [(str(base / "out/wide"), [], ["c"], [], [])]
    assert diff["column_lineage"] == [] and diff["spec"] is None and diff["lifecycle"] == []
    assert diff["duration"]["ratio"] is not None

    code, out, _ = cli(capsys, "runs", "diff", second, "--db-url", db)
    wide = f"file {base / 'out/wide'}"
    assert out.splitlines()[1:-1] == [f"input added: file {base / 'in/b'}",
                                      f"output added: file {base / 'out/summary_v2'}",
                                      f"output removed: file {base / 'out/summary'}",
                                      f"schema of {wide}: column removed: c double"]

    code, out, _ = cli(capsys, "runs", "diff", third, "--db-url", db, "--format", "json")
    diff3 = json.loads(out)
    assert diff3["against"] == second and diff3["changed"] is False, diff3
    code, out, _ = cli(capsys, "runs", "diff", third, "--db-url", db)
    assert out.splitlines()[-2] == f"nothing changed since run {second}"

    store = RegistryStore(db)
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(store, "s3cret-token-0123456789"), host="127.0.0.1", port=port,
                                        log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: srv.started, timeout=30)
        r = httpx.get(f"http://127.0.0.1:{port}/runs/{second}/diff")
        assert r.status_code == 200 and r.json() == diff
        r = httpx.get(f"http://127.0.0.1:{port}/runs/{third}/diff", params={"against": first})
        assert r.status_code == 200 and r.json()["changed"] is True and r.json()["stored"] is False
        assert r.json()["outputs"] == diff["outputs"] and r.json()["schemas"] == diff["schemas"]
    finally:
        srv.should_exit = True
        thread.join(10)
        store.close()
