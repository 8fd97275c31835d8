"""The scheduler's knowledge of its tables' inputs: contract events through the real broker into the tracker,
and what it answers (inputs, their writes, writers' runs and breaking changes)."""

from __future__ import annotations

import datetime as dt
import pathlib
import sqlite3
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from lineagewire.config import Settings
from lineagewire.consumers.runtime import OutputError, Record
from lineagewire.db import upgrade
from lineagewire.freshness import Promises, parse_promises
from lineagewire.kafka.publisher import Publisher
from lineagewire.producers.scheduler.holds import hold_reasons
from lineagewire.producers.scheduler.inputs import (
    InputsHandler,
    InputTracker,
    inputs_of,
    next_breaking,
    resolve_inputs,
    writes_after,
)
from lineagewire.producers.scheduler.sqlreads import QueryInputsError, query_reads, query_tables
from lineagewire.producers.scheduler.store import STORE, make_engine
from lineagewire.producers.scheduler.tables import MaterializedTable
from lineagewire.schemas import (
    action_lineage,
    dataset,
    header,
    job_created,
    job_spec,
    job_status_changed,
    schema_field,
)
from tests.helpers import wait_for

from .topics import fresh_topics

T0 = dt.datetime(2026, 3, 2, 5, 0, tzinfo=dt.UTC)
DAILY = MaterializedTable("mart.daily", "SELECT e.id, sum(e.amount) AS total, c.region FROM raw.events e "
                          "JOIN dim.customers c ON e.cid = c.id GROUP BY e.id, c.region")


@pytest.fixture
def engine(tmp_path: pathlib.Path) -> Iterator[sa.Engine]:
    eng = make_engine(f"sqlite:///{tmp_path / 'scheduler.db'}")
    upgrade(eng, STORE)
    yield eng
    eng.dispose()


def _hdr(kind: str, run: str, minute: float, job: str = "ingest_events", **kw: Any) -> Any:
    return header(kind, job_namespace="prod", job_name=job, run_id=run, event_time=T0 + dt.timedelta(minutes=minute),
                  **kw)


def _events(*cols: tuple[str, str], lifecycle: str | None = None) -> Any:
    return dataset("file", "/data/raw/events", fields=[schema_field(c, t) for c, t in cols], lifecycle_change=lifecycle,
                   symlinks=[{"namespace": "file:/warehouse", "name": "raw.events", "type": "TABLE"}])


def _customers() -> Any:
    return dataset("file", "/warehouse/dim.db/customers", fields=[schema_field("id", "int"),
                                                                  schema_field("region", "string")],
                   symlinks=[{"namespace": "file:/warehouse", "name": "dim.customers", "type": "TABLE"}])


def ingest_run(run: str, minute: float, cols: list[tuple[str, str]], status: str = "FINISHED") -> list[Any]:
    """A whole run of the upstream job: created, one write of raw.events, and its end."""
    err = {"error_class": "OutOfMemoryError", "message": "Java heap space", "stack_trace": None}
    return [job_created(_hdr("JobCreatedEvent", run, minute), job_spec("ingest_events", "4.0.0")),
            action_lineage(_hdr("ActionLineageEvent", run, minute + 1), "a1", "insertInto",
                           outputs=[_events(*cols)]),
            job_status_changed(_hdr("JobStatusChangedEvent", run, minute + 2), status, "RUNNING",
                               error=err if status == "FAILED" else None)]


def refresh_run(minute: float) -> Any:
    """A refresh of mart.daily (header.schedule set) that read both inputs, with its column lineage."""
    schedule = {"workflow_id": "w", "command_id": "c", "nominal_time": T0, "attempt": 1}
    cl = [{"namespace": "file", "name": "/warehouse/mart.db/daily", "field": "region",
           "inputs": [{"namespace": "file", "name": "/warehouse/dim.db/customers", "field": "region",
                       "transformations": []}]}]
    return action_lineage(header("ActionLineageEvent", job_namespace="lineagewire", job_name="refresh mart.daily",
                                 run_id="refresh-1", schedule=schedule,
                                 event_time=T0 + dt.timedelta(minutes=minute)),
                          "a1", "insertInto", inputs=[_events(("id", "int")), _customers(),
                                                      dataset("file", "/data/lookup/fx")],
                          column_lineage=cl)


def _by_table(engine: sa.Engine, now: dt.datetime, promises: Promises | None = None) -> dict[str, Any]:
    with engine.connect() as conn:
        return {s.label: s for s in inputs_of(conn, DAILY, now, promises=promises)}


@pytest.mark.integration
def test_tracker_follows_writes_failures_and_breaking_changes_through_the_broker(
        kafka_settings: Settings, engine: sa.Engine) -> None:
    now = T0 + dt.timedelta(hours=1)
    with fresh_topics(kafka_settings) as settings, Publisher(settings) as pub:
        tracker = InputTracker(settings, engine, group_id=f"inputs-{uuid.uuid4().hex[:8]}", metrics_port=0)
        tracker.start()
        try:
            # dim.customers is read by a refresh run only: the lineage of the table's own runs names it too
            r1 = [("id", "int"), ("cid", "int"), ("amount", "double"), ("note", "string")]
            for ev in [*ingest_run("r1", 0, r1), refresh_run(5)]:
                pub.publish(ev)
            pub.flush()
            # two jobs, two partitions: the refresh run's event may come in before or after the writer's
            wait_for(lambda: _by_table(engine, now)["raw.events"].health == "ok"
                     and "dim.customers" in _by_table(engine, now))
            states = _by_table(engine, now)
            assert states["raw.events"].as_json() == {
                "dataset": {"namespace": "file", "name": "/data/raw/events"}, "table": "raw.events",
                "last_write_at": "2026-03-02T05:01:00Z",
                "writer": {"job_namespace": "prod", "job_name": "ingest_events", "run_id": "r1"},
                "writer_status": "FINISHED", "writer_error": None,
                "last_write_run": {"job_namespace": "prod", "job_name": "ingest_events", "run_id": "r1"},
                "breaking_columns": [], "breaking_run": None, "freshness_seconds": None,
                "columns_read": ["amount", "cid", "id"], "health": "ok",
                "detail": "raw.events: written 05:01 UTC by ingest_events"}
            # read by the refresh run, never written: resolved by its symlink, its column from the lineage
            assert states["dim.customers"].health == "never_written"
            assert states["dim.customers"].dataset == ("file", "/warehouse/dim.db/customers")
            assert states["dim.customers"].columns is not None and "region" in states["dim.customers"].columns
            # a dataset the query does not name (behind a view, say) that the refresh run read is an input too
            assert states["/data/lookup/fx"].table is None and states["/data/lookup/fx"].columns is None
            with engine.connect() as conn:
                first = writes_after(conn, DAILY, None)
            assert [(w.dataset, w.run["run_id"]) for w in first] == [(("file", "/data/raw/events"), "r1")]

            pub.publish(ingest_run("r2", 50, [])[0])  # a new run begins
            pub.flush()
            wait_for(lambda: _by_table(engine, now)["raw.events"].health == "running")
            pub.publish(ingest_run("r2", 50, [], status="FAILED")[2])
            pub.flush()
            wait_for(lambda: _by_table(engine, now)["raw.events"].health == "failed")
            [reason] = hold_reasons(_by_table(engine, now).values(), now=now)
            assert reason["condition"] == "UPSTREAM_FAILED" and reason["upstream_run"]["run_id"] == "r2"
            assert reason["detail"] == ("raw.events: writer ingest_events FAILED at 05:52 UTC: "
                                        "OutOfMemoryError: Java heap space")

            # r3 drops amount (the query reads it) and retypes cid to string
            for ev in ingest_run("r3", 60, [("id", "int"), ("cid", "string")]):
                pub.publish(ev)
            pub.flush()
            later = T0 + dt.timedelta(hours=2)
            wait_for(lambda: _by_table(engine, later)["raw.events"].health == "breaking")
            s = _by_table(engine, later)["raw.events"]
            assert s.breaking_columns == ("amount", "cid") and s.breaking_run == ("prod", "ingest_events", "r3")
            # note went too, but the query does not read it
            assert s.detail == ("raw.events: ingest_events removed amount, note; retyped cid: int -> string; "
                                "the query reads amount, cid")
            # r4 brings amount back but leaves cid a string: only cid still breaks the table
            for ev in ingest_run("r4", 70, [("id", "int"), ("cid", "string"), ("amount", "double")]):
                pub.publish(ev)
            pub.flush()
            wait_for(lambda: _by_table(engine, later)["raw.events"].breaking_columns == ("cid",))
            with engine.connect() as conn:
                new = writes_after(conn, DAILY, first[-1].recorded_at)
            assert [w.run["run_id"] for w in new] == ["r3", "r4"]

            # bytes that are no event go to the dead-letter topic; the tracker goes on
            pub.produce_raw(settings.topics.jobs, b"\xc3\x01not an event", key=b"prod/ingest_events")
            pub.flush()
            wait_for(lambda: tracker.stats.dead_lettered == 1)
            wait_for(lambda: tracker.lag == 0)
            assert tracker.metrics_address is not None and tracker.alive
            applied = {k: v.as_json() for k, v in _by_table(engine, later).items()}
        finally:
            tracker.stop()

        # Everything delivered again (a new group from the start, on the same database): nothing changes
        again = InputTracker(settings, engine, group_id=f"inputs-{uuid.uuid4().hex[:8]}")
        again.start()
        try:
            wait_for(lambda: again.stats.consumed >= 13 and again.stats.dead_lettered == 1)  # 12 events, 1 not
        finally:
            again.stop()
        assert {k: v.as_json() for k, v in _by_table(engine, later).items()} == applied
        with engine.connect() as conn:
            assert writes_after(conn, DAILY, None) == [*first, *new]


def test_a_database_error_is_an_output_error_not_a_dead_letter(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "locked.db"
    eng = make_engine(f"sqlite:///{db}?timeout=0.1")
    upgrade(eng, STORE)
    locker = sqlite3.connect(db, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        record = Record("jobs", 1, 7, None, 0, ingest_run("r1", 0, [("id", "int")])[1])
        with pytest.raises(OutputError, match=r"jobs\[1\]@7: database error storing input state: OperationalError"):
            InputsHandler(eng).handle(record)
    finally:
        locker.execute("ROLLBACK")
        eng.dispose()


def test_lifecycle_changes_and_promises(engine: sa.Engine) -> None:
    """A dropped input breaks every reader until it is written again; a promise makes an old write stale."""
    h = InputsHandler(engine, clock=lambda: T0)
    for i, ev in enumerate([*ingest_run("r1", 0, [("id", "int"), ("amount", "double")]), refresh_run(5)]):
        h.handle(Record("jobs", 0, i, None, 0, ev))
    promises = parse_promises([{"dataset": "raw.events", "freshness": "1h"}])
    stale = _by_table(engine, T0 + dt.timedelta(hours=3), promises)["raw.events"]
    assert stale.health == "stale" and stale.promise is not None and stale.promise.freshness == 3600
    assert stale.detail.startswith("raw.events: last written 05:01 UTC by ingest_events, 2h59m ago; promised:")
    drop = action_lineage(_hdr("ActionLineageEvent", "r9", 30, job="admin"), "a1", "DropTable",
                          outputs=[_events(lifecycle="DROP")])
    h.handle(Record("jobs", 0, 9, None, 0, drop))
    gone = _by_table(engine, T0 + dt.timedelta(hours=1))["raw.events"]
    assert gone.health == "breaking" and gone.breaking_columns == ("*",) and gone.breaking_change == "dropped"
    with engine.connect() as conn:  # a drop is no write: nothing to trigger on
        assert [w.run["run_id"] for w in writes_after(conn, DAILY, None)] == ["r1"]
    for i, ev in enumerate(ingest_run("r10", 40, [("id", "int"), ("amount", "double")])):
        h.handle(Record("jobs", 0, 20 + i, None, 0, ev))
    assert _by_table(engine, T0 + dt.timedelta(hours=1))["raw.events"].health == "ok"
    moved = dataset("file", "/data/raw/events_v2", lifecycle_change="RENAME",
                    symlinks=[{"namespace": "file:/warehouse", "name": "raw.events_v2", "type": "TABLE"}],
                    previous_identifier={"namespace": "file", "name": "/data/raw/events"})
    h.handle(Record("jobs", 0, 30, None, 0, action_lineage(_hdr("ActionLineageEvent", "r11", 50, job="admin"), "a1",
                                                           "AlterTableRename", outputs=[moved])))
    renamed = _by_table(engine, T0 + dt.timedelta(hours=1))["raw.events"]
    assert renamed.health == "breaking" and renamed.breaking_change == "renamed to raw.events_v2"
    # writes older than the retention are pruned by the hourly tick
    h.tick((T0 + dt.timedelta(days=7, minutes=30)).timestamp())
    with engine.connect() as conn:
        assert [w.run["run_id"] for w in writes_after(conn, DAILY, None)] == ["r10"]


def test_an_older_event_delivered_late_changes_nothing(engine: sa.Engine) -> None:
    h = InputsHandler(engine, clock=lambda: T0)
    created, write, failed = ingest_run("r1", 0, [("id", "int"), ("amount", "double")], status="FAILED")
    for i, ev in enumerate([created, write, failed, created]):  # the run's start again, after its end
        h.handle(Record("jobs", 0, i, None, 0, ev))
    assert _by_table(engine, T0)["raw.events"].health == "failed"
    older = ingest_run("r0", -30, [("id", "int")])  # an earlier run, replayed now
    for i, ev in enumerate(older):
        h.handle(Record("jobs", 0, 10 + i, None, 0, ev))
    s = _by_table(engine, T0)["raw.events"]
    assert (s.health, s.writer, s.last_write_run) == ("failed", ("prod", "ingest_events", "r1"),
                                                      ("prod", "ingest_events", "r1"))
    assert s.breaking_columns == ()  # the older schema is not compared with the newer one


def test_breaking_change_memory_is_pure() -> None:
    run, at = ("p", "j", "r"), T0
    old = {"id": "int", "s": "struct", "s.x": "int", "amount": "double"}
    change = next_breaking(None, old, {"id": "string", "s": "struct", "amount": "double"}, None, run, at)
    assert change is not None and change["old_types"] == {"id": "int", "s.x": "int"}
    # a write that names no schema keeps the change; one that restores a column takes it off
    assert next_breaking(change, None, None, None, run, at) == change
    left = next_breaking(change, {"id": "string"}, {"id": "int", "s.x": "long"}, None, ("p", "j", "r2"), at)
    assert left is not None and left["old_types"] == {"s.x": "int"} and left["run_id"] == "r"
    assert next_breaking(left, None, {"id": "int", "s.x": "int"}, None, run, at) is None


def test_query_reads_tables_and_columns_as_the_emitter_names_them() -> None:
    assert query_reads(DAILY.query) == {"raw.events": frozenset({"id", "amount", "cid"}),
                                        "dim.customers": frozenset({"id", "region"})}
    # catalogs drop out (symlinks carry them in their namespace); an unqualified table is in default
    assert set(query_reads("SELECT a FROM spark_catalog.db.t JOIN other o ON t.k = o.k")) == {"db.t", "default.other"}
    # unknown columns are None (every column), never "none": *, t.*, and an unqualified column of a join
    assert query_reads("SELECT * FROM raw.x") == {"raw.x": None}
    assert query_reads("SELECT o.*, c.id FROM a o JOIN b c ON o.k = c.k")["default.a"] is None
    assert query_reads("SELECT amount FROM a JOIN b ON a.k = b.k") == {"default.a": None, "default.b": None}
    assert query_reads("WITH w AS (SELECT id, s.x FROM raw.y) SELECT id FROM w") == {
        "raw.y": frozenset({"id", "s.x"})}
    assert query_tables("SELECT v FROM raw.y UNION ALL SELECT v FROM raw.z") == ["raw.y", "raw.z"]
    with pytest.raises(QueryInputsError, match=r"query 'SELECT 1 AS x' reads no table; expected a SELECT from"):
        query_tables("SELECT 1 AS x")
    with pytest.raises(QueryInputsError, match=r"is not Spark SQL sqlglot can read: Invalid expression"):
        query_tables("SELEKT oops FROM")


def test_unresolved_and_unparseable_queries_resolve_what_they_can(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        [ref] = resolve_inputs(MaterializedTable("mart.x", "SELECT id FROM raw.nowhere"), conn)
        assert (ref.namespace, ref.name, ref.table, ref.known) == ("", "raw.nowhere", "raw.nowhere", False)
        assert resolve_inputs(MaterializedTable("mart.y", "SELEKT"), conn) == []


def test_a_write_is_stamped_when_its_transaction_ends_not_when_it_began(engine: sa.Engine) -> None:
    # An upstream fire moves its cursor past writes stamped up to planner.SETTLE ago: a stamp taken at the start of
    # a transaction that then waited (for the database's lock) could fall behind a cursor already past it.
    ticks = iter([T0, T0 + dt.timedelta(seconds=5)] * 10)
    h = InputsHandler(engine, clock=lambda: next(ticks))
    _created, write, _finished = ingest_run("r1", 0, [("id", "int")])
    assert h.handle(Record("jobs", 0, 1, None, 0, write)) == 1
    with engine.connect() as conn:
        (stored,) = writes_after(conn, DAILY, None)
        assert stored.recorded_at == T0 + dt.timedelta(seconds=5)
        assert writes_after(conn, DAILY, T0 + dt.timedelta(seconds=1)) == [stored]
