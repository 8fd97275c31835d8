"""Lineage-aware refresh end to end (issue 41), with real parts: an upstream PySpark job writing a catalog table,
the broker, the scheduler service (loop, status and inputs trackers, REST) and the refresh runner, on one
SparkSession.

* an upstream write triggers exactly one refresh of the ``trigger: upstream`` table, which reads the new data;
* a failed upstream run holds the cron table's refresh with the reason (HELD, one RefreshHeld naming the run),
  and the next good upstream run releases it: it runs once, with its command id, and reads that run's data.
"""

from __future__ import annotations

import contextlib
import gc
import pathlib
import threading
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lineagewire.config import Settings
from lineagewire.producers.refresh_runner import CompletedStore, RefreshRunner
from lineagewire.producers.scheduler.service import SchedulerService, ServiceConfig, create_app
from lineagewire.producers.scheduler.tables import TableCatalog, parse_tables
from lineagewire.producers.spark import job_run
from lineagewire.schemas import kind_of
from tests import helpers
from tests.helpers import read_topic

from .conftest import ServerThread
from .topics import fresh_topics

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

TOKEN = "e2e-token"


def wait_for(predicate: Any, timeout: float = 90.0, every: float = 0.3) -> Any:  # noqa: ANN001
    return helpers.wait_for(predicate, timeout, every)


def rows(spark: Any, sql: str) -> list[Any]:
    with warnings.catch_warnings():  # PySpark 4.0's result socket, left to the collector (as in test_runner)
        warnings.simplefilter("ignore", ResourceWarning)
        out = spark.sql(sql).collect()
        gc.collect()
    return out


@pytest.fixture
def lw(kafka_settings: Settings) -> Iterator[Settings]:
    with fresh_topics(kafka_settings) as settings:
        yield settings


@pytest.fixture
def db(spark) -> Iterator[str]:  # noqa: ANN001
    name = f"lw_up_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


def ingest(spark: Any, db: str, values: str, *, fail: bool = False) -> None:
    """One run of the upstream job ``ingest_orders``: an INSERT into ``db.orders`` (failing on purpose)."""
    select = f"SELECT * FROM VALUES {values} AS v(customer, amount)"
    if fail:
        select = f"SELECT customer, IF(amount > 0, raise_error('disk full'), amount) FROM ({select})"
    with contextlib.suppress(Exception) if fail else contextlib.nullcontext(), \
            job_run(spark, "ingest_orders", namespace="spark"):
        spark.sql(f"INSERT INTO {db}.orders {select}")


def test_upstream_write_refreshes_once_and_a_failed_upstream_holds_the_cron_refresh(
        spark, lw: Settings, db: str, tmp_path: pathlib.Path) -> None:  # noqa: ANN001
    upstream, daily = f"{db}.by_customer", f"{db}.daily"
    catalog = TableCatalog(parse_tables({"tables": [
        {"identifier": upstream, "trigger": "upstream", "debounce": "2s",
         "query": f"SELECT customer, sum(amount) AS amount FROM {db}.orders GROUP BY customer"},
        {"identifier": daily, "cron": "*/3 * * * * *", "query": f"SELECT customer, amount FROM {db}.orders"},
    ]}))
    config = ServiceConfig(db_url=f"sqlite:///{tmp_path / 'sched.db'}", token=TOKEN, misfire_grace=30, lead=0,
                           poll_interval=0.5, status_group=f"status-{uuid.uuid4().hex[:8]}",
                           inputs_group=f"inputs-{uuid.uuid4().hex[:8]}")
    service = SchedulerService(config, lw, catalog=catalog)
    state = CompletedStore(tmp_path / "runner.db")
    runner = RefreshRunner(spark, lw, group_id=f"runner-{uuid.uuid4().hex[:8]}", state=state)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        with ServerThread(create_app(service)) as srv, \
                httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            wait_for(runner.ready.is_set, timeout=60)  # its emitter (on lw's topics) is the session's now
            spark.sql(f"CREATE TABLE {db}.orders (customer STRING, amount INT) USING parquet")

            def inputs(table: str) -> list[dict[str, Any]]:
                return http.get(f"/tables/{table}/inputs").json()["inputs"]

            wait_for(lambda: inputs(upstream)[0]["last_write_at"])  # the CREATE is known: it fires nothing
            wf = http.post("/workflows", json={"table": upstream}).json()
            assert wf["kind"] == "UPSTREAM"

            # 1. an upstream write: one refresh, which reads the new data
            ingest(spark, db, "('c1', 10), ('c1', 5)")
            first = wait_for(lambda: (rs := http.get("/refreshes", params={"table": upstream}).json())
                             and rs[0]["status"] == "COMPLETED" and rs[0])
            run_a = first["trigger_run"]
            assert first["refresh_trigger"] == "UPSTREAM" and run_a["job_name"] == "ingest_orders"
            assert [(r.customer, r.amount) for r in rows(spark, f"SELECT * FROM {upstream}")] == [("c1", 15)]

            # 2. a failed upstream run holds the cron refresh, naming the run and why
            ingest(spark, db, "('c2', 7)", fail=True)
            wait_for(lambda: inputs(daily)[0]["health"] == "failed")
            cron = http.post("/workflows", json={"table": daily}).json()
            held = wait_for(lambda: [r for r in http.get("/refreshes", params={"workflow_id": cron["id"]}).json()
                                     if r["status"] == "HELD"])
            http.post(f"/workflows/{cron['id']}/suspend")
            (why,) = held[0]["hold_reasons"]
            assert why["condition"] == "UPSTREAM_FAILED" and why["input"]["name"].endswith("orders")
            assert why["upstream_run"]["job_name"] == "ingest_orders" and why["upstream_run"] != run_a
            assert "disk full" in why["detail"]
            assert not http.get(f"/tables/{daily}/status").json()["healthy"]

            # 3. the next good upstream run releases it: it runs once, with its command id, and reads that run
            ingest(spark, db, "('c2', 7)")
            done = wait_for(lambda: (r := http.get(f"/refreshes/{held[0]['command_id']}").json())["status"]
                            == "COMPLETED" and r)
            assert done["hold_reasons"] == [] and done["refresh_trigger"] == "CRON"
            assert sorted((r.customer, r.amount) for r in rows(spark, f"SELECT * FROM {daily}")) == [
                ("c1", 5), ("c1", 10), ("c2", 7)]
            ups = wait_for(lambda: (rs := http.get("/refreshes", params={"table": upstream}).json())
                           and len(rs) == 2 and rs[0]["status"] == "COMPLETED" and rs)
            wait_for(lambda: all(r["status"] != "HELD" for r in
                                 http.get("/refreshes", params={"workflow_id": cron["id"]}).json()))
        # on the topic: one refresh per successful upstream run, one RefreshHeld per held refresh
        events = read_topic(lw, lw.topics.refresh_commands, 1000, timeout=5)
        ran = [e["header"]["schedule"]["trigger_run"]["run_id"] for e in events
               if kind_of(e) == "RefreshCommand" and e["table"] == upstream]
        assert len(ran) == 2 and len(set(ran)) == 2 and run_a["run_id"] in ran
        assert {r["trigger_run"]["run_id"] for r in ups} == set(ran)
        helds = [e["command_id"] for e in events if kind_of(e) == "RefreshHeld"]
        assert held[0]["command_id"] in helds and len(helds) == len(set(helds))
        assert sum(1 for cid, what in runner.outcomes if cid == held[0]["command_id"] and what == "COMPLETED") == 1
    finally:
        runner.stop()
        thread.join(120)
        state.close()
