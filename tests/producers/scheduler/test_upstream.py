"""trigger: upstream and holds, on the embedded scheduler with a real SQLite file, a settable clock and inputs a
test controls (``FakeInputs``): which writes the inputs got, and what holds a table now."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from lineagewire.producers.scheduler import EmbeddedWorkflowScheduler, ListSink, SchedulerOptions, TableCatalog
from lineagewire.producers.scheduler.exceptions import TableDeclarationError
from lineagewire.producers.scheduler.tables import parse_tables
from lineagewire.producers.scheduler.upstream import Write
from lineagewire.schemas import Codec, header, job_status_changed, kind_of

from .conftest import Clock

UTC = dt.UTC

TABLES = {"tables": [
    {"identifier": "mart.orders", "query": "SELECT customer, sum(amount) AS amount FROM raw.orders GROUP BY 1",
     "trigger": "upstream", "debounce": "5s"},
    {"identifier": "mart.bounded", "query": "SELECT * FROM raw.orders", "trigger": "upstream", "debounce": "0s",
     "min_interval": "1min", "max_staleness": "10min"},
    {"identifier": "mart.daily", "query": "SELECT * FROM raw.orders", "cron": "0 0 6 * * *"},
]}


def run(job: str = "ingest_orders", run_id: str | None = None) -> dict[str, str]:
    return {"job_namespace": "spark", "job_name": job, "run_id": run_id or str(uuid.uuid4())}


def reason(condition: str = "UPSTREAM_FAILED", upstream: dict[str, str] | None = None) -> dict[str, Any]:
    return {"condition": condition, "input": {"namespace": "file", "name": "/lake/raw/orders"},
            "upstream_run": upstream or run(), "detail": "ingest_orders FAILED: disk full"}


class FakeInputs:
    """``upstream.Inputs`` as the test says: writes stored at the clock's time, and the current hold reasons."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.writes: list[Write] = []
        self.holding: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def write(self, upstream: dict[str, str] | None = None) -> dict[str, str]:
        upstream = upstream or run()
        with self.lock:
            self.writes.append(Write(self.clock(), upstream))
        return upstream

    def writes_after(self, table: Any, after: dt.datetime) -> list[Write]:
        with self.lock:
            return [w for w in self.writes if w.recorded_at > after]

    def hold_reasons(self, table: Any, now: dt.datetime) -> list[dict[str, Any]]:
        return [dict(r) for r in self.holding]

    def states(self, table: Any, now: dt.datetime) -> list[dict[str, Any]]:
        return [{"dataset": {"namespace": "file", "name": "/lake/raw/orders"}, "health": "ok"}]


@pytest.fixture
def inputs(clock: Clock) -> FakeInputs:
    return FakeInputs(clock)


@pytest.fixture
def make(clock: Clock, db_url: str, inputs: FakeInputs) -> Iterator[Any]:
    catalog = TableCatalog(parse_tables(TABLES))
    made: list[EmbeddedWorkflowScheduler] = []

    def make(sink: ListSink | None = None, lead: float = 0) -> EmbeddedWorkflowScheduler:
        s = EmbeddedWorkflowScheduler(catalog, url=db_url, sink=sink or ListSink(), clock=clock, inputs=inputs,
                                      options=SchedulerOptions(misfire_grace=5, retry_backoff=1, lead=lead))
        s.open()
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def commands(sink: ListSink) -> list[dict[str, Any]]:
    return [e for e in sink.events if kind_of(e) == "RefreshCommand"]


def finished(s: EmbeddedWorkflowScheduler, cmd: dict[str, Any], status: str = "FINISHED") -> None:
    h = cmd["header"]
    hdr = header("JobStatusChangedEvent", job_namespace=h["job_namespace"], job_name=h["job_name"],
                 run_id=h["run_id"], parent_run=h["parent_run"], schedule=h["schedule"])
    assert s.apply_status(job_status_changed(hdr, status, duration_ms=5))  # type: ignore[arg-type]


def test_five_writes_within_the_debounce_make_one_refresh_naming_the_upstream_run(make, clock, inputs) -> None:
    sink = ListSink()
    s = make(sink)
    w = s.create_periodic("mart.orders")
    assert w.kind == "UPSTREAM" and w.refresh_trigger == "UPSTREAM"
    inputs.write()  # before the workflow: the past fires nothing
    clock.advance(seconds=1)
    s2 = s.create_upstream("mart.orders", name="second")  # a second workflow of the same table
    clock.advance(seconds=1)
    runs = []
    for _ in range(5):
        runs.append(inputs.write())
        clock.advance(seconds=0.5)
        assert s.tick() == 0  # still inside the 5 s window that the first write opened
    clock.advance(seconds=3)
    assert s.tick() == 1
    (cmd,) = commands(sink)
    sched = cmd["header"]["schedule"]
    assert sched["trigger"] == "UPSTREAM" and sched["trigger_run"] == runs[-1]
    assert cmd["nominal_time"] == w.created + dt.timedelta(seconds=2 + 5)  # the first write + debounce
    Codec().decode(Codec().encode(cmd))
    assert s.tick() == 0  # one refresh for the five writes, and one in flight for the table: not the second one's
    (r,) = s.refreshes(table="mart.orders")
    assert (r.trigger, r.refresh_trigger, r.trigger_run, r.workflow_id) == ("UPSTREAM", "UPSTREAM", runs[-1], w.id)
    assert s2.id != w.id


def test_a_change_during_a_refresh_makes_exactly_one_more(make, clock, inputs) -> None:
    sink = ListSink()
    s = make(sink)
    s.create_periodic("mart.orders")
    clock.advance(seconds=1)
    inputs.write()
    clock.advance(seconds=6)
    assert s.tick() == 1
    first = commands(sink)[0]
    for _ in range(3):  # writes while it runs
        clock.advance(seconds=4)
        last = inputs.write()
        assert s.tick() == 0
    clock.advance(seconds=30)
    assert s.tick() == 0  # still running
    finished(s, first)
    assert s.tick() == 1
    second = commands(sink)[1]
    assert second["header"]["schedule"]["trigger_run"] == last
    finished(s, second)
    clock.advance(seconds=60)
    assert s.tick() == 0 and len(commands(sink)) == 2


def test_floor_and_ceiling(make, clock, inputs) -> None:
    sink = ListSink()
    s = make(sink)
    w = s.create_periodic("mart.bounded")
    clock.advance(minutes=10)
    assert s.tick() == 1  # no write for max_staleness: a FRESHNESS refresh
    (stale,) = commands(sink)
    assert stale["header"]["schedule"]["trigger"] == "FRESHNESS"
    assert stale["nominal_time"] == w.created + dt.timedelta(minutes=10)
    finished(s, stale)
    clock.advance(seconds=5)
    inputs.write()
    clock.advance(seconds=5)
    assert s.tick() == 0  # debounce 0, but min_interval: not before a minute after the last refresh
    clock.advance(seconds=50)
    assert s.tick() == 1 and commands(sink)[-1]["header"]["schedule"]["trigger"] == "UPSTREAM"


def test_two_instances_fire_one_refresh_per_change(make, clock, inputs) -> None:
    sinks = [ListSink(), ListSink()]
    a, b = make(sinks[0]), make(sinks[1])
    a.create_periodic("mart.orders")
    errors: list[BaseException] = []

    def go(s: EmbeddedWorkflowScheduler) -> None:
        try:
            for _ in range(3):
                s.tick()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    for _ in range(8):
        clock.advance(seconds=1)
        inputs.write()
        clock.advance(seconds=6)
        threads = [threading.Thread(target=go, args=(s,)) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        newest = max((c for sink in sinks for c in commands(sink)), key=lambda c: c["nominal_time"])
        finished(a, newest)
    assert not errors
    cmds = [c for sink in sinks for c in commands(sink)]
    assert len(cmds) == 8 and len({c["command_id"] for c in cmds}) == 8


def test_an_instance_that_dies_mid_debounce_leaves_the_change_to_the_other(make, clock, inputs) -> None:
    sinks = [ListSink(), ListSink()]
    a, b = make(sinks[0]), make(sinks[1])
    a.create_periodic("mart.orders")
    clock.advance(seconds=1)
    upstream = inputs.write()
    clock.advance(seconds=2)
    assert a.tick() == 0  # a saw the write, inside the debounce, and dies
    a.close()
    clock.advance(seconds=4)
    assert b.tick() == 1 and b.tick() == 0
    (cmd,) = commands(sinks[1])
    assert cmd["header"]["schedule"]["trigger_run"] == upstream and not commands(sinks[0])


def test_a_held_refresh_is_announced_once_and_runs_once_on_recovery(make, clock, inputs) -> None:
    sink = ListSink()
    s = make(sink)
    w = s.create_periodic("mart.daily")
    failed_run = run()
    inputs.holding = [reason(upstream=failed_run)]
    clock.now = dt.datetime(2026, 1, 1, 6, tzinfo=UTC)
    assert s.tick() == 0
    (held,) = [e for e in sink.events if kind_of(e) == "RefreshHeld"]
    Codec().decode(Codec().encode(held))
    assert held["reasons"] == inputs.holding and held["table"] == "mart.daily"
    assert held["header"]["schedule"]["trigger"] == "CRON"
    (r,) = s.refreshes(workflow_id=w.id)
    assert r.status == "HELD" and r.hold_reasons == inputs.holding and r.held_since == clock.now
    assert held["command_id"] == r.command_id
    status = s.table_status("mart.daily")
    assert not status.healthy and status.held and "UPSTREAM_FAILED" in status.reason
    for _ in range(3):
        clock.advance(seconds=10)
        assert s.tick() == 0
    assert len(sink.events) == 1  # once per hold, not every round
    inputs.holding = []  # the next good upstream run
    clock.advance(seconds=10)
    assert s.tick() == 1
    cmd = sink.events[-1]
    assert kind_of(cmd) == "RefreshCommand" and cmd["command_id"] == r.command_id
    assert s.refresh(r.command_id).status == "QUEUED" and s.refresh(r.command_id).hold_reasons == []
    assert s.tick() == 0


def test_a_table_held_through_several_fires_refreshes_once_on_recovery(make, clock, inputs) -> None:
    # mart.daily has no partitions: each refresh rewrites the whole table, so only the newest held fire runs.
    sink = ListSink()
    s = make(sink)
    w = s.create_periodic("mart.daily")
    inputs.holding = [reason()]
    for day in (1, 2, 3):
        clock.now = dt.datetime(2026, 1, day, 6, tzinfo=UTC)
        assert s.tick() == 0
    held = s.refreshes(workflow_id=w.id)
    assert sorted(r.status for r in held) == ["HELD"] * 3
    inputs.holding = []
    clock.advance(seconds=10)
    assert s.tick() == 1 and s.tick() == 0
    (cmd,) = [e for e in sink.events if kind_of(e) == "RefreshCommand"]
    assert cmd["nominal_time"] == dt.datetime(2026, 1, 3, 6, tzinfo=UTC)
    by_time = {r.nominal_time.day: r for r in s.refreshes(workflow_id=w.id)}
    assert by_time[3].status == "QUEUED"
    assert by_time[1].status == by_time[2].status == "CANCELED" and "superseded" in by_time[1].error


def test_a_fire_claimed_ahead_is_checked_when_claimed(make, clock, inputs) -> None:
    sink = ListSink()
    s = make(sink, lead=2)
    s.create_periodic("mart.daily")
    inputs.holding = [reason()]
    clock.now = dt.datetime(2026, 1, 1, 5, 59, 59, tzinfo=UTC)
    assert s.tick() == 0
    (r,) = s.refreshes(table="mart.daily")
    assert r.status == "HELD" and [kind_of(e) for e in sink.events] == ["RefreshHeld"]
    clock.advance(seconds=1)
    assert s.tick() == 0 and len(sink.events) == 1  # the nominal time came: still held, nothing sent
    inputs.holding = []
    assert s.tick() == 1 and sink.events[-1]["command_id"] == r.command_id


def test_force_publishes_the_held_refresh_and_a_forced_one_is_never_held(make, clock, inputs) -> None:
    sink = ListSink()
    s = make(sink)
    s.create_periodic("mart.daily")
    inputs.holding = [reason()]
    clock.now = dt.datetime(2026, 1, 1, 6, tzinfo=UTC)
    s.tick()
    (held,) = s.refreshes(table="mart.daily")
    released, workflow = s.force_refresh("mart.daily")
    assert workflow is None and [r.command_id for r in released] == [held.command_id]
    cmd = sink.events[-1]
    assert cmd["command_id"] == held.command_id and cmd["header"]["schedule"]["trigger"] == "MANUAL"
    released, workflow = s.force_refresh("mart.daily")  # nothing held now: a forced one-time refresh
    assert released == [] and workflow is not None and workflow.force
    s.tick()
    cmd = sink.events[-1]
    assert kind_of(cmd) == "RefreshCommand" and cmd["workflow_id"] == workflow.id
    assert cmd["header"]["schedule"]["trigger"] == "MANUAL"
    one = s.create_one_time("mart.daily")  # not forced: held
    s.tick()
    assert s.refreshes(workflow_id=one.id)[0].status == "HELD"


def test_upstream_fire_is_held_and_its_release_is_the_one_refresh(make, clock, inputs) -> None:
    sink = ListSink()
    s = make(sink)
    s.create_periodic("mart.orders")
    inputs.holding = [reason("UPSTREAM_RUNNING")]
    clock.advance(seconds=1)
    inputs.write()
    clock.advance(seconds=6)
    assert s.tick() == 0
    (r,) = s.refreshes(table="mart.orders")
    assert r.status == "HELD"
    inputs.holding = []
    clock.advance(seconds=1)
    inputs.write()  # the write that ends the hold
    clock.advance(seconds=1)
    assert s.tick() == 1
    finished(s, commands(sink)[-1])
    clock.advance(seconds=30)
    assert s.tick() == 0 and len(commands(sink)) == 1  # the released refresh read that write already


@pytest.mark.parametrize(("raw", "words"), [
    ({"identifier": "db.t", "query": "SELECT 1 AS x", "trigger": "upstream"},
     ["(db.t)", "trigger='upstream'", "reads no table"]),
    ({"identifier": "db.t", "query": "SELECT * FROM a", "trigger": "cron"}, ["trigger='cron'", "expected upstream"]),
    ({"identifier": "db.t", "query": "SELECT * FROM a", "trigger": "upstream", "debounce": "soon"},
     ["debounce", "'soon' is not a duration"]),
    ({"identifier": "db.t", "query": "SELECT * FROM a", "min_interval": "1h"},
     ["min_interval='1h' without trigger: upstream"]),
    ({"identifier": "db.t", "query": "SELECT * FROM a", "trigger": "upstream", "min_interval": "2h",
      "max_staleness": "1h"}, ["min_interval=7200s", "max_staleness=3600s"]),
    ({"identifier": "db.t", "query": "SELECT * FROM a", "hold_on": ["UPSTREAM_FAILED", "LATE"]},
     ["hold_on has 'LATE'", "INPUT_STALE"]),
])
def test_bad_upstream_declarations_name_file_table_field_and_value(raw: dict, words: list[str]) -> None:
    with pytest.raises(TableDeclarationError) as info:
        parse_tables({"tables": [raw]}, "t.yaml")
    assert str(info.value).startswith("t.yaml: tables[0]")
    for w in words:
        assert w in str(info.value)


def test_upstream_declaration_defaults() -> None:
    up, bounded, daily = parse_tables(TABLES)
    assert up.upstream and up.debounce == 5 and up.hold_on == ("UPSTREAM_FAILED", "UPSTREAM_RUNNING", "BREAKING_CHANGE")
    assert (bounded.min_interval, bounded.max_staleness, bounded.debounce) == (60, 600, 0)
    assert not daily.upstream and daily.debounce == 30
    (fresh,) = parse_tables({"tables": [{"identifier": "db.t", "query": "SELECT * FROM a", "trigger": "upstream",
                                         "freshness": "1h", "hold_on": []}]})
    assert fresh.max_staleness == 3600 and fresh.hold_on == ()
