"""The runner end to end: scheduler → Kafka → runner on a real SparkSession → job events → scheduler status."""

from __future__ import annotations

import datetime as dt
import gc
import json
import pathlib
import threading
import urllib.request
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.publisher import Publisher
from lineagewire.producers.refresh_runner import CompletedStore, RefreshRunner
from lineagewire.producers.scheduler import (
    EmbeddedWorkflowScheduler,
    KafkaCommandSink,
    SchedulerOptions,
    TableCatalog,
    parse_tables,
)
from lineagewire.producers.scheduler.api import TERMINAL_REFRESH
from lineagewire.producers.scheduler.status import StatusTracker
from lineagewire.schemas import header, kind_of, refresh_command
from tests import helpers
from tests.helpers import read_topic
from tests.producers.scheduler.topics import fresh_topics

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

SLOW_QUERY = ("SELECT id AS n, java_method('java.lang.Thread', 'sleep', bigint(300)) AS slept "
              "FROM range(0, 400, 1, 2)")


def wait_for(predicate: Any, timeout: float = 120.0, every: float = 0.3) -> Any:  # noqa: ANN001
    return helpers.wait_for(predicate, timeout, every)


class Stack:
    """Scheduler (with its loop and status tracker) and a runner thread, on fresh topics."""

    def __init__(self, spark: Any, settings: Settings, tmp: pathlib.Path, tables: list[dict]) -> None:
        self.settings = settings
        self.catalog = TableCatalog(parse_tables({"tables": tables}))
        self.sink = KafkaCommandSink(settings)
        self.scheduler = EmbeddedWorkflowScheduler(
            self.catalog, url=f"sqlite:///{tmp / 'sched.db'}", sink=self.sink,
            options=SchedulerOptions(misfire_grace=30, max_attempts=2, retry_backoff=0.5, poll_interval=0.5))
        self.scheduler.start()
        self.tracker = StatusTracker(settings, self.scheduler, group_id=f"status-{uuid.uuid4().hex[:8]}")
        self.tracker.start()
        self.state = CompletedStore(tmp / "runner.db")
        self.runner = RefreshRunner(spark, settings, group_id=f"runner-{uuid.uuid4().hex[:8]}", state=self.state)
        self.thread = threading.Thread(target=self.runner.run, daemon=True)
        self.thread.start()
        wait_for(self.runner.ready.is_set, timeout=60)

    def refreshes(self, **kw: Any) -> list:
        return self.scheduler.refreshes(**kw)

    def close(self) -> None:
        self.runner.stop()
        self.thread.join(120)
        self.tracker.stop()
        self.scheduler.close()
        self.sink.close()
        self.state.close()


@pytest.fixture
def lw(kafka_settings: Settings) -> Iterator[Settings]:
    with fresh_topics(kafka_settings) as settings:
        yield settings


@pytest.fixture
def db_name(spark) -> Iterator[str]:  # noqa: ANN001
    name = f"lw_rt_{uuid.uuid4().hex[:8]}"
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


def rows(spark: Any, sql: str) -> list[Any]:
    """``collect()`` without PySpark 4.0's unclosed result socket becoming a test error (as in the lineage tests:
    PySpark leaves that socket to the garbage collector; collect it here, where the warning is ignored)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        out = spark.sql(sql).collect()
        gc.collect()
    return out


def partitions(spark: Any, table: str) -> list[str]:
    return sorted(r[0] for r in rows(spark, f"SHOW PARTITIONS {table}"))


def test_periodic_workflow_writes_partitions_and_reports_status(spark, lw: Settings, tmp_path: pathlib.Path,
                                                                db_name: str) -> None:
    table = f"{db_name}.events"
    stack = Stack(spark, lw, tmp_path, [{
        "identifier": table, "query": "SELECT id AS n, 'x' AS tag FROM range(3)",
        "partition_fields": {"dt": "yyyy-MM-dd", "at": "HHmmss"}, "cron": "*/4 * * * * *",
        "execution_config": {"spark.sql.shuffle.partitions": "1"}}])
    try:
        w = stack.scheduler.create_periodic(table, name="every-4s")
        done = wait_for(lambda: [r for r in stack.refreshes(workflow_id=w.id) if r.status == "COMPLETED"][:2]
                        if len([r for r in stack.refreshes(workflow_id=w.id) if r.status == "COMPLETED"]) >= 2
                        else None, timeout=180)
        stack.scheduler.suspend(w.id)
        for r in done:
            assert r.duration_ms is not None and r.duration_ms >= 0 and r.attempt == 1 and r.error is None
            t = r.nominal_time
            part = f"dt={t:%Y-%m-%d}/at={t:%H%M%S}"
            assert part in partitions(spark, table)
            got = rows(spark, f"SELECT n, tag FROM {table} WHERE dt = '{t:%Y-%m-%d}' AND at = '{t:%H%M%S}'")
            assert sorted(row.n for row in got) == [0, 1, 2]
        assert stack.scheduler.table_status(table).healthy

        # the runs came back on the jobs topic with the schedule, the command's run id and the workflow as parent
        events = read_topic(lw, lw.topics.jobs, 10_000, timeout=8)
        mine = [e for e in events if (e["header"].get("schedule") or {}).get("command_id") == done[0].command_id]
        assert mine, "no job event of the refresh run"
        assert {e["header"]["run_id"] for e in mine} == {done[0].run_id}
        run_events = [e for e in mine if kind_of(e) in ("JobCreatedEvent", "JobStatusChangedEvent")]
        assert run_events and {e["header"]["parent_run"]["run_id"] for e in run_events} == {w.id}
        actions = [e for e in mine if kind_of(e) == "ActionLineageEvent"]
        assert any(table.split(".")[1] in d["name"] for e in actions for d in e["outputs"]), \
            "no lineage of the INSERT into the table"
        assert any(e.get("new_status") == "FINISHED" for e in mine)
        assert all(e["header"]["schedule"]["nominal_time"] == done[0].nominal_time for e in mine)

        # a duplicate of a completed command is skipped: no second run, table unchanged. Republished with a new
        # event id (as after a scheduler crash), so the runtime's event-id dedup does not hide it from the runner.
        # Commands published before the suspend still run (a busy machine queues several): let them end first.
        wait_for(lambda: all(r.status in TERMINAL_REFRESH for r in stack.refreshes(workflow_id=w.id)), timeout=180)
        before = partitions(spark, table)
        dup = [e for e in read_topic(lw, lw.topics.refresh_commands, 1000, timeout=5)
               if e["command_id"] == done[0].command_id]
        stack.sink.send([{**dup[0], "header": {**dup[0]["header"], "event_id": str(uuid.uuid4())}}])
        stack.sink.flush()
        wait_for(lambda: (done[0].command_id, "SKIPPED") in stack.runner.outcomes, timeout=60)
        assert partitions(spark, table) == before
        assert sum(1 for cid, what in stack.runner.outcomes if cid == done[0].command_id and what == "COMPLETED") == 1
    finally:
        stack.close()


def test_failed_refresh_is_retried_then_reported(spark, lw: Settings, tmp_path: pathlib.Path, db_name: str) -> None:
    table = f"{db_name}.broken"
    stack = Stack(spark, lw, tmp_path, [{"identifier": table, "query": f"SELECT * FROM {db_name}.does_not_exist"}])
    try:
        w = stack.scheduler.create_one_time(table, nominal_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
        r = wait_for(lambda: (rs := stack.refreshes(workflow_id=w.id)) and rs[0].status == "FAILED"
                     and rs[0].attempt == 2 and rs[0], timeout=180)
        assert "does_not_exist" in (r.error or "") and r.retry_count == 1 and r.next_retry_at is None
        assert not stack.scheduler.table_status(table).healthy
    finally:
        stack.close()


def test_cancel_interrupts_a_running_refresh(spark, lw: Settings, tmp_path: pathlib.Path, db_name: str) -> None:
    table = f"{db_name}.slow"
    stack = Stack(spark, lw, tmp_path, [{"identifier": table, "query": SLOW_QUERY}])
    try:
        w = stack.scheduler.create_one_time(table)
        running = wait_for(lambda: (rs := stack.refreshes(workflow_id=w.id)) and rs[0].status == "RUNNING"
                           and rs[0], timeout=120)
        # Spark itself says the INSERT's job runs (the refresh's only job: analysis and CREATE TABLE run none),
        # so the cancel must interrupt it rather than find the refresh not started yet.
        tracker = spark.sparkContext.statusTracker()
        active = wait_for(tracker.getActiveJobsIds, timeout=120)
        stack.scheduler.cancel(running.command_id, "test cancel")
        outcome = wait_for(lambda: [what for cid, what in stack.runner.outcomes if cid == running.command_id],
                           timeout=180)
        assert outcome == ["CANCELED"]
        assert wait_for(lambda: (info := tracker.getJobInfo(active[0])) and info.status != "RUNNING" and info,
                        timeout=60).status == "FAILED", "the running Spark job was interrupted"
        # the INSERT was interrupted, not finished: none of the query's 400 rows are in the table
        assert rows(spark, f"SELECT count(*) FROM {table}")[0][0] == 0
        events = read_topic(lw, lw.topics.jobs, 10_000, timeout=8)
        statuses = [e.get("new_status") for e in events if e["header"]["run_id"] == running.run_id
                    and "new_status" in e]
        assert statuses == ["RUNNING", "CANCELED"]
        assert stack.refreshes(workflow_id=w.id)[0].status == "CANCELED"
        assert not stack.state.completed(running.command_id)
    finally:
        stack.close()


def _command(table: str, query: str, command_id: str | None = None) -> dict[str, Any]:
    cid = command_id or uuid.uuid4().hex
    hdr = header("RefreshCommand", job_namespace="refresh", job_name=f"refresh {table}", run_id=cid, sequence=0)
    return dict(refresh_command(hdr, command_id=cid, workflow_id="w1", table=table,
                                nominal_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), query=query))


def test_bad_messages_are_dead_lettered_and_the_runner_goes_on(spark, lw: Settings, tmp_path: pathlib.Path,
                                                               db_name: str) -> None:
    """Undecodable bytes, a wrong event kind and an invalid command go to the DLQ with their reasons; the valid
    command behind them (same partition) is refreshed and committed; /healthz and /metrics answer meanwhile."""
    table = f"{db_name}.after_bad"
    cmds = lw.topics.refresh_commands
    good = _command(table, "SELECT 1 AS x")
    with Publisher(lw) as pub:
        pub.produce_raw(cmds, b"not an event", key=table)
        pub.publish(helpers.status_event(), topic=cmds, key=table)
        pub.publish(_command("  ", "SELECT 1"), topic=cmds, key=table)
        pub.publish(good, topic=cmds, key=table)
        pub.flush(30)
    state = CompletedStore(tmp_path / "runner.db")
    runner = RefreshRunner(spark, lw, group_id=f"runner-{uuid.uuid4().hex[:8]}", state=state, install_emitter=False,
                           metrics_port=0)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: (good["command_id"], "COMPLETED") in runner.outcomes, timeout=180)
        host, port = wait_for(lambda: runner.metrics_address, timeout=30)
        with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=10) as resp:
            assert resp.status == 200 and json.loads(resp.read())["dead_lettered"] == 3
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as resp:
            assert b"refresh-runner" in resp.read()
        # committed past the valid command once its refresh finished
        wait_for(lambda: sum(runner.runtime.stats.committed.values()) >= 4, timeout=60)
    finally:
        runner.stop()
        thread.join(120)
        state.close()
    dead = read_topic(lw, lw.topics.dlq(cmds, "refresh-runner"), 3, timeout=60, decode=False)
    reasons = [dict(m.headers())["lineagewire.error.message"].decode() for m in dead]
    assert len(dead) == 3 and dead[0].value() == b"not an event"
    assert "JobStatusChangedEvent on the refresh-commands topic" in reasons[1]
    assert "table is empty" in reasons[2]
    assert rows(spark, f"SELECT x FROM {table}")[0][0] == 1
