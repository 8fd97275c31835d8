"""Refresh status tracking on the shared consumer runtime, through the real broker and a real SQLite file."""

from __future__ import annotations

import datetime as dt
import pathlib
import sqlite3
import uuid
from collections.abc import Iterator

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from lineagewire.config import Settings
from lineagewire.kafka.publisher import Publisher
from lineagewire.producers.scheduler import ListSink, TableCatalog
from lineagewire.producers.scheduler.service import SchedulerService, ServiceConfig
from lineagewire.producers.scheduler.status import StatusHandler
from lineagewire.schemas import header, job_status_changed
from tests.helpers import wait_for

from .topics import fresh_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def lw_settings(kafka_settings: Settings) -> Iterator[Settings]:
    with fresh_topics(kafka_settings) as settings:
        yield settings


def finished(cmd: dict) -> dict:
    h = cmd["header"]
    hdr = header("JobStatusChangedEvent", job_namespace=h["job_namespace"], job_name=h["job_name"],
                 run_id=h["run_id"], parent_run=h["parent_run"], schedule=h["schedule"])
    return job_status_changed(hdr, "FINISHED", "RUNNING", duration_ms=42)  # type: ignore[arg-type]


def committed(settings: Settings, group: str) -> int:
    """Sum of the committed offsets of ``group`` on the jobs topic (partitions without a commit count 0)."""
    c = Consumer({**settings.as_librdkafka_dict(), "group.id": group})
    try:
        parts = [TopicPartition(settings.topics.jobs, p) for p in range(3)]
        return sum(max(tp.offset, 0) for tp in c.committed(parts, timeout=30))
    finally:
        c.close()


def test_status_survives_a_locked_database_and_a_restart(lw_settings: Settings, catalog: TableCatalog,
                                                         tmp_path: pathlib.Path) -> None:
    db_file = tmp_path / "s.db"
    group = f"status-{uuid.uuid4().hex[:8]}"
    # A short busy timeout, so each attempt fails fast while the lock is held; quick backoff for the test.
    config = ServiceConfig(db_url=f"sqlite:///{db_file}?timeout=0.2", token="t", status_group=group,
                           status_retry_initial=0.2, status_retry_max=0.5, status_metrics_port=0)
    sink = ListSink()
    service = SchedulerService(config, lw_settings, sink=sink, catalog=catalog)
    service.start()
    try:
        w = service.scheduler.create_one_time("mart.hourly", nominal_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
        cmd = wait_for(lambda: [e for e in sink.events if e["workflow_id"] == w.id])[0]
        # Another connection holds the write lock: every attempt to store the status fails.
        locker = sqlite3.connect(db_file, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        with Publisher(lw_settings) as pub:
            pub.publish(finished(cmd))
        assert service.tracker is not None
        # Far past the old tracker's five attempts, with the partitions paused and /healthz showing it.
        wait_for(lambda: service.tracker.stats.retries >= 8, timeout=60)
        host, port = service.tracker.metrics_address  # type: ignore[misc]
        health = httpx.get(f"http://{host}:{port}/healthz", timeout=5).json()
        assert health["output"] == "retrying" and "database error" in health["retrying"]
        assert service.tracker.stats.handled == 0 and service.tracker.stats.dead_lettered == 0
    finally:
        service.stop()
    # Stopped while the database was still locked: nothing applied, nothing committed.
    assert committed(lw_settings, group) == 0
    locker.execute("ROLLBACK")
    locker.close()
    with sqlite3.connect(db_file) as c:
        assert c.execute("SELECT status FROM lw_refreshes WHERE command_id = ?", (cmd["command_id"],)).fetchone() \
            == ("QUEUED",)

    restarted = SchedulerService(config, lw_settings, sink=ListSink(), catalog=catalog)
    restarted.start()
    try:
        done = wait_for(lambda: (r := restarted.scheduler.refresh(cmd["command_id"])).status == "COMPLETED" and r,
                        timeout=90)
        assert done.duration_ms == 42
        wait_for(lambda: committed(lw_settings, group) == 1, timeout=30)
    finally:
        restarted.stop()


def test_handler_turns_database_errors_into_retries(catalog: TableCatalog, tmp_path: pathlib.Path) -> None:
    """A unit check of the handler's contract: a database error is an OutputError, never a PermanentError."""
    from lineagewire.consumers.runtime import OutputError, PermanentError, Record
    from lineagewire.producers.scheduler import EmbeddedWorkflowScheduler

    db_file = tmp_path / "u.db"
    sched = EmbeddedWorkflowScheduler(catalog, url=f"sqlite:///{db_file}?timeout=0.05", sink=ListSink())
    sched.open()
    try:
        w = sched.create_one_time("mart.hourly", nominal_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
        sched.tick(dt.datetime(2026, 1, 1, 0, 0, 1, tzinfo=dt.UTC))
        cmd = next(e for e in sched.sink.events if e["workflow_id"] == w.id)  # type: ignore[attr-defined]
        record = Record("jobs", 0, 7, None, 0, finished(cmd))
        locker = sqlite3.connect(db_file, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        with pytest.raises(OutputError, match=r"jobs\[0\]@7: database error") as err:
            StatusHandler(sched).handle(record)
        assert not isinstance(err.value, PermanentError)
        locker.execute("ROLLBACK")
        locker.close()
        assert StatusHandler(sched).handle(record) == 1
        assert sched.refresh(cmd["command_id"]).status == "COMPLETED"
    finally:
        sched.close()
