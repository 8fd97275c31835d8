"""Fixtures of the UI tests: a registry filled by the real ``consume registry`` from a real PySpark job's
events, the UI served on 127.0.0.1, and Debian's chromium driven by Playwright."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.local import free_port
from lineagewire.kafka.topics import TopicSpec, create_topics, delete_topics
from tests.consumers.audit.conftest import raw_records, serving
from tests.consumers.openlineage.test_spark_end_to_end import JOB  # aggregates by key: DIRECT and INDIRECT
from tests.helpers import wait_for


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("Debian's chromium is not installed (make system-deps installs it)")
    return path


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Any]:
    import playwright.sync_api as sync_api  # dev installs it: missing fails, it does not skip
    with sync_api.sync_playwright() as p:
        # Playwright's own browser download cannot work here: Debian's chromium, headless
        b = p.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.errors = errors
    try:
        yield pg
    finally:
        context.close()
    assert errors == [], errors


class UiServer:
    """``build_app`` served by uvicorn on a free port of 127.0.0.1, in a thread."""

    def __init__(self, db_url: str, **options: Any) -> None:
        import uvicorn

        from lineagewire.consumers.audit.registry_store import RegistryStore
        from lineagewire.consumers.audit.ui import build_app

        self.store = RegistryStore(db_url)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(build_app(self.store, **options), host="127.0.0.1",
                                                    port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> UiServer:
        self.thread.start()
        wait_for(lambda: self.server.started, timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.store.close()


@pytest.fixture(scope="module")
def spark_registry(kafka_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URL of a registry that ``consume registry`` filled from the events of a real PySpark job."""
    pytest.importorskip("pyspark")
    from lineagewire.consumers.audit.registry import RegistryHandler
    from lineagewire.consumers.runtime import ConsumerRuntime

    tmp = tmp_path_factory.mktemp("ui-spark")
    topic = f"ui.{uuid.uuid4().hex[:10]}"
    create_topics(kafka_settings, [TopicSpec(topic, 1, 3600_000)])
    settings = kafka_settings.model_copy(update={"topics": kafka_settings.topics.model_copy(update={"jobs": topic})})
    try:
        env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers,
               "LINEAGEWIRE_KAFKA__TOPICS__JOBS": topic, "PYSPARK_PYTHON": sys.executable}
        (tmp / "job.py").write_text(JOB)
        job = subprocess.run([sys.executable, str(tmp / "job.py"), str(tmp / "out")], cwd=tmp, env=env,
                             capture_output=True, text=True, timeout=300)
        assert job.returncode == 0, job.stderr[-3000:]
        count = len(raw_records(settings, topic))
        assert count > 0
        db = f"sqlite:///{tmp / 'registry.db'}"
        handler = RegistryHandler(db)
        ConsumerRuntime(settings, handler, group_id=f"ui-{uuid.uuid4().hex[:8]}").run(max_events=count)
        assert handler.applied == count
    finally:
        try:
            delete_topics(kafka_settings, [topic], timeout=20)
        except Exception:  # noqa: BLE001 - cleanup only
            pass
    return db


@pytest.fixture(scope="module")
def spark_ui(spark_registry: str) -> Iterator[UiServer]:
    with UiServer(spark_registry) as srv:
        yield srv


#: the table the scheduler stand-in declares (``refresh_run``'s table: its refresh job is ``daily_orders``)
TABLE = "daily_orders"


def scheduler_app(upstream_run: dict[str, str] | None = None) -> Any:
    """A stand-in for the scheduler's REST API (docs/scheduler.md): the workflow ``wf-1`` of ``TABLE`` and its
    health, the declared tables, ``TABLE``'s status (HELD) and inputs: ``/data/orders`` (``sales.orders``) whose
    writer ``upstream_run`` FAILED, which holds the 06:00 refresh, and ``/data/customers``, never written.

    The answers are the scheduler's own objects' JSON (``MaterializedTable``, ``TableStatus``, ``RefreshInfo``,
    ``InputState``), so a change of the scheduler's JSON shows here."""
    from fastapi import FastAPI, HTTPException

    from lineagewire.producers.scheduler.api import RefreshInfo, TableStatus
    from lineagewire.producers.scheduler.inputs import InputState
    from lineagewire.producers.scheduler.tables import MaterializedTable

    app = FastAPI()
    upstream = upstream_run or {"job_namespace": "spark", "job_name": "ingest_orders", "run_id": "no-such-run"}
    run = (upstream["job_namespace"], upstream["job_name"], upstream["run_id"])
    orders = {"namespace": "file", "name": "/data/orders"}
    detail = f"{upstream['job_name']} FAILED at 2026-11-01T03:00:09Z: Job aborted"
    reason = {"condition": "UPSTREAM_FAILED", "input": orders, "upstream_run": upstream, "detail": detail}
    declared = MaterializedTable(identifier=TABLE, query="SELECT * FROM sales.orders JOIN customers", cron="0 6 * * *",
                                 owner="sales", trigger="upstream")
    at = dt.datetime(2026, 11, 1, 6, 0, tzinfo=dt.UTC)
    held = RefreshInfo(command_id="c-0600", workflow_id="wf-1", table=TABLE, nominal_time=at, trigger="SCHEDULED",
                       status="HELD", attempt=1, run_id="r-0600", claimed_at=at, refresh_trigger="CRON",
                       hold_reasons=[reason], held_since=at + dt.timedelta(milliseconds=120))
    status = TableStatus(table=TABLE, healthy=False, reason="HELD: upstream failed", last_success=None, latest=held,
                         counts={"HELD": 1}, hold_reasons=[reason])
    none: dict[str, Any] = {"last_write_run": None, "writer_at": None, "streaming_writer": False,
                            "breaking_columns": (), "breaking_run": None, "breaking_change": "", "promise": None}
    inputs = [InputState(dataset=("file", "/data/orders"), table="sales.orders",
                         last_write_at=dt.datetime(2026, 10, 31, 3, 0, 2, tzinfo=dt.UTC), writer=run,
                         writer_status="FAILED", writer_error="Job aborted", health="failed", detail=detail,
                         columns=frozenset({"amount", "id"}), **none),
              InputState(dataset=("file", "/data/customers"), table=None, last_write_at=None, writer=None,
                         writer_status=None, writer_error=None, health="never_written",
                         detail="/data/customers: no successful write seen", **none)]

    def known(table: str) -> None:
        if table != TABLE:
            raise HTTPException(404, f"table {table!r} is not declared")

    @app.get("/workflows/{workflow_id}")
    def show(workflow_id: str) -> dict[str, Any]:
        if workflow_id != "wf-1":
            raise HTTPException(404, "unknown")
        return {"id": "wf-1", "table": TABLE, "kind": "PERIODIC", "status": "ACTIVE", "cron": "0 * * * *",
                "next_fire": "2026-11-01T01:00:00Z",
                "refreshes": [{"nominal_time": "2026-11-01T00:00:00Z", "status": "FAILED", "attempt": 3,
                               "duration_ms": 4000, "error": "no retry left"}],
                "table_status": {**status.as_dict(), "reason": "newest refresh failed"}}

    @app.get("/tables")
    def tables() -> list[dict[str, Any]]:
        return [declared.as_dict()]

    @app.get("/tables/{table}/status")
    def table_status(table: str) -> dict[str, Any]:
        known(table)
        return status.as_dict()

    @app.get("/tables/{table}/inputs")
    def table_inputs(table: str) -> dict[str, Any]:
        known(table)
        return {"table": TABLE, "trigger": declared.trigger, "hold_on": list(declared.hold_on),
                "inputs": [x.as_json() for x in inputs], "hold_reasons": [reason], "held": [held.as_dict()]}

    return app


@contextlib.contextmanager
def scheduler_stand_in(upstream_run: dict[str, str] | None = None) -> Iterator[str]:
    """``scheduler_app`` served on 127.0.0.1; its base URL."""
    with serving(scheduler_app(upstream_run)) as url:
        yield url
