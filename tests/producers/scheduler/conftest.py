"""Shared pieces of the scheduler tests: a table catalog, a settable clock, a scheduler factory."""

from __future__ import annotations

import datetime as dt
import pathlib
from collections.abc import Iterator

import pytest

from lineagewire.producers.scheduler import EmbeddedWorkflowScheduler, ListSink, SchedulerOptions, TableCatalog
from lineagewire.producers.scheduler.tables import parse_tables

TABLES = {"tables": [
    {"identifier": "mart.hourly", "query": "SELECT 1 AS x", "partition_fields": {"dt": "yyyy-MM-dd", "hr": "HH"},
     "cron": "0 0 * * * *", "misfire_policy": "catch_up", "catchup_cap": 3,
     "execution_config": {"spark.sql.shuffle.partitions": "2"}},
    {"identifier": "mart.berlin", "query": "SELECT 2 AS y", "partition_fields": {"dt": "yyyy-MM-dd"},
     "cron": "0 30 2 * * *", "time_zone": "Europe/Berlin"},
    {"identifier": "mart.nocron", "query": "SELECT 3 AS z"},
]}


class Clock:
    """A settable clock for the scheduler."""

    def __init__(self, start: dt.datetime) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **kw: float) -> dt.datetime:
        self.now += dt.timedelta(**kw)
        return self.now


@pytest.fixture
def catalog() -> TableCatalog:
    return TableCatalog(parse_tables(TABLES))


@pytest.fixture
def clock() -> Clock:
    return Clock(dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=dt.UTC))


@pytest.fixture
def db_url(tmp_path: pathlib.Path) -> str:
    return f"sqlite:///{tmp_path / 'scheduler.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def shared_db(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    """A database URL several scheduler instances share: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture
def make_scheduler(catalog: TableCatalog, clock: Clock, db_url: str) -> Iterator:
    made: list[EmbeddedWorkflowScheduler] = []

    def make(sink: ListSink | None = None, **opts: float) -> EmbeddedWorkflowScheduler:
        opts.setdefault("misfire_grace", 5)
        s = EmbeddedWorkflowScheduler(catalog, url=db_url, sink=sink or ListSink(), clock=clock,
                                      options=SchedulerOptions(**opts))  # type: ignore[arg-type]
        s.open()
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


class ServerThread:
    """A real uvicorn server on 127.0.0.1 in a thread."""

    def __init__(self, app: object) -> None:
        import threading

        import uvicorn

        from lineagewire.kafka.local import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        from tests.helpers import wait_for

        self.thread.start()

        def up() -> bool:
            if not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            return bool(self.server.started)

        wait_for(up, timeout=60, every=0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(60)
