"""The embedded scheduler on a real SQLite file, a settable clock and an in-memory sink."""

from __future__ import annotations

import datetime as dt
import threading
import uuid

import pytest

from lineagewire.producers.scheduler import (
    CronError,
    ListSink,
    UnknownTableError,
    UnknownWorkflowError,
    WorkflowStateError,
    command_id_for,
    run_id_for,
)
from lineagewire.producers.scheduler.exceptions import BadRequestError
from lineagewire.schemas import Codec, header, job_status_changed

UTC = dt.UTC


def nominal(sink: ListSink) -> list[dt.datetime]:
    return [e["nominal_time"] for e in sink.events if "nominal_time" in e]


def status(cmd: dict, new: str, *, error: bool = False, duration_ms: int | None = None) -> dict:
    h = cmd["header"]
    hdr = header("JobStatusChangedEvent", job_namespace=h["job_namespace"], job_name=h["job_name"],
                 run_id=h["run_id"], parent_run=h["parent_run"], schedule=h["schedule"])
    err = {"error_class": "java.lang.RuntimeException", "message": "boom", "stack_trace": None} if error else None
    return job_status_changed(hdr, new, error=err, duration_ms=duration_ms)  # type: ignore[arg-type]


def test_fire_publishes_a_complete_refresh_command(make_scheduler, clock) -> None:
    sink = ListSink()
    s = make_scheduler(sink)
    w = s.create_periodic("mart.hourly", name="hourly")
    assert w.next_fire == dt.datetime(2026, 1, 1, 1, tzinfo=UTC) and w.status == "ACTIVE"
    clock.advance(minutes=59, seconds=30)
    assert s.tick() == 1
    (cmd,) = sink.events
    t = dt.datetime(2026, 1, 1, 1, tzinfo=UTC)
    cid = command_id_for(w.id, t)
    assert cmd["command_id"] == cid and cmd["nominal_time"] == t and cmd["table"] == "mart.hourly"
    assert cmd["static_partitions"] == {"dt": "2026-01-01", "hr": "01"}
    assert cmd["execution_config"] == {"spark.sql.shuffle.partitions": "2"} and cmd["attempt"] == 1
    h = cmd["header"]
    assert h["job_name"] == "refresh mart.hourly" and h["run_id"] == run_id_for(cid, 1)
    assert h["schedule"] == {"workflow_id": w.id, "command_id": cid, "nominal_time": t, "attempt": 1,
                             "trigger": "CRON", "trigger_run": None}
    assert h["parent_run"] == {"job_namespace": "lineagewire", "job_name": "workflow hourly", "run_id": w.id}
    Codec().decode(Codec().encode(cmd))  # it is a valid event of the contract
    info = s.get(w.id)
    assert info.last_fire == t and info.next_fire == dt.datetime(2026, 1, 1, 2, tzinfo=UTC)
    assert s.tick() == 0  # nothing fires twice
    assert [r.status for r in s.refreshes()] == ["QUEUED"]


def test_command_id_is_deterministic_and_run_id_per_attempt() -> None:
    wid = str(uuid.uuid4())
    t = dt.datetime(2026, 5, 1, tzinfo=UTC)
    assert command_id_for(wid, t) == command_id_for(wid, t.astimezone(dt.timezone(dt.timedelta(hours=5))))
    assert command_id_for(wid, t) != command_id_for(wid, t + dt.timedelta(seconds=1))
    assert run_id_for(command_id_for(wid, t), 1) != run_id_for(command_id_for(wid, t), 2)


def test_suspend_resume_fires_nothing_for_the_paused_past(make_scheduler, clock) -> None:
    sink = ListSink()
    s = make_scheduler(sink)
    w = s.create_periodic("mart.hourly", cron="*/10 * * * * *")
    assert s.suspend(w.id).status == "PAUSED"
    clock.advance(minutes=5)
    assert s.tick() == 0
    r = s.resume(w.id)
    assert r.status == "ACTIVE" and r.next_fire > clock.now
    assert s.tick() == 0
    clock.advance(seconds=10)
    assert s.tick() == 1 and len(sink.events) == 1


def test_resume_with_catch_up_follows_the_misfire_policy(make_scheduler, clock) -> None:
    sink = ListSink()
    s = make_scheduler(sink)
    w = s.create_periodic("mart.hourly", cron="0 * * * * *", misfire_policy="catch_up", catchup_cap=2)
    s.suspend(w.id)
    clock.advance(minutes=10)
    s.resume(w.id, catch_up=True)
    s.tick()
    # the latest two missed minutes, oldest first
    assert nominal(sink) == [dt.datetime(2026, 1, 1, 0, 9, tzinfo=UTC), dt.datetime(2026, 1, 1, 0, 10, tzinfo=UTC)]


@pytest.mark.parametrize(("policy", "expected_minutes"), [("skip", []), ("fire_once", [9]), ("catch_up", [7, 8, 9])])
def test_restart_after_downtime_follows_misfire_policy(make_scheduler, clock, policy, expected_minutes) -> None:
    first = make_scheduler(ListSink())
    w = first.create_periodic("mart.hourly", cron="0 * * * * *", misfire_policy=policy, catchup_cap=3)
    first.close()  # the scheduler is down from 00:00:30 ...
    clock.now = dt.datetime(2026, 1, 1, 0, 9, 59, tzinfo=UTC)  # ... until 00:09:59, grace 5 s
    sink = ListSink()
    second = make_scheduler(sink)
    second.tick()
    assert nominal(sink) == [dt.datetime(2026, 1, 1, 0, m, tzinfo=UTC) for m in expected_minutes]
    assert second.get(w.id).next_fire == dt.datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    clock.advance(seconds=1)
    second.tick()
    assert nominal(sink)[-1] == dt.datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    assert len(set(nominal(sink))) == len(nominal(sink))


def test_two_instances_on_one_database_fire_each_nominal_time_once(make_scheduler, clock) -> None:
    sinks = [ListSink(), ListSink()]
    a, b = make_scheduler(sinks[0]), make_scheduler(sinks[1])
    ids = [a.create_periodic("mart.hourly", cron="*/5 * * * * *").id for _ in range(40)]
    errors: list[BaseException] = []

    def run(s) -> None:  # noqa: ANN001
        try:
            for _ in range(5):
                s.tick()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    for _ in range(6):
        clock.advance(seconds=5)
        threads = [threading.Thread(target=run, args=(s,)) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors
    fired = [(e["workflow_id"], e["nominal_time"]) for sink in sinks for e in sink.events]
    assert len(fired) == len(set(fired)) == 40 * 6
    assert {wid for wid, _ in fired} == set(ids)


def test_one_time_refresh_fires_once_and_completes(make_scheduler, clock) -> None:
    sink = ListSink()
    s = make_scheduler(sink)
    when = dt.datetime(2025, 12, 31, 23, tzinfo=UTC)
    w = s.create_one_time("mart.hourly", nominal_time=when)
    assert w.kind == "ONE_TIME" and w.next_fire == when
    s.tick()
    s.tick()
    assert nominal(sink) == [when]
    assert sink.events[0]["static_partitions"] == {"dt": "2025-12-31", "hr": "23"}
    info = s.get(w.id)
    assert info.status == "COMPLETED" and info.next_fire is None and info.last_fire == when
    with pytest.raises(WorkflowStateError, match="COMPLETED"):
        s.resume(w.id)


def test_backfill_fires_only_what_was_never_fired(make_scheduler, clock) -> None:
    sink = ListSink()
    s = make_scheduler(sink)
    w = s.create_periodic("mart.hourly", start=dt.datetime(2026, 1, 1, tzinfo=UTC))
    s.tick()  # 00:00 fires (within grace? no: 30 s late > 5 s grace, catch_up fires it)
    assert nominal(sink) == [dt.datetime(2026, 1, 1, tzinfo=UTC)]
    got = s.backfill(w.id, dt.datetime(2025, 12, 31, 21, tzinfo=UTC), dt.datetime(2026, 1, 1, tzinfo=UTC))
    assert [r.nominal_time.hour for r in got] == [21, 22, 23]
    assert all(r.trigger == "BACKFILL" and r.status == "QUEUED" for r in got)
    assert len(sink.events) == 4
    with pytest.raises(BadRequestError, match="before start"):
        s.backfill(w.id, dt.datetime(2026, 1, 2, tzinfo=UTC), dt.datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(BadRequestError, match="more than"):
        s.backfill(w.id, dt.datetime(2020, 1, 1, tzinfo=UTC), dt.datetime(2026, 1, 1, tzinfo=UTC))


def test_status_events_drive_refresh_state_with_retries(make_scheduler, clock) -> None:
    sink = ListSink()
    s = make_scheduler(sink, max_attempts=2, retry_backoff=10)
    s.create_periodic("mart.hourly", cron="0 * * * * *")
    clock.advance(seconds=30)
    s.tick()
    cmd = sink.events[0]
    assert s.apply_status(status(cmd, "RUNNING")) == "RUNNING"
    clock.advance(seconds=2)
    assert s.apply_status(status(cmd, "FAILED", error=True)) == "FAILED"
    (r,) = s.refreshes()
    assert r.error == "java.lang.RuntimeException: boom" and r.next_retry_at == clock.now + dt.timedelta(seconds=10)
    assert s.table_status("mart.hourly").healthy  # a retry is pending: not unhealthy yet
    clock.advance(seconds=10)
    s.tick()
    retry = sink.events[-1]
    assert retry["command_id"] == cmd["command_id"] and retry["attempt"] == 2
    assert retry["header"]["run_id"] == run_id_for(cmd["command_id"], 2)
    # a late event of attempt 1 changes nothing
    assert s.apply_status(status(cmd, "FINISHED")) is None
    assert s.apply_status(status(retry, "FAILED", error=True)) == "FAILED"
    (r,) = s.refreshes()
    assert r.attempt == 2 and r.retry_count == 1 and r.next_retry_at is None  # limit reached
    ts = s.table_status("mart.hourly")
    assert not ts.healthy and "FAILED" in ts.reason


def test_completed_status_has_duration_and_makes_table_healthy(make_scheduler, clock) -> None:
    sink = ListSink()
    s = make_scheduler(sink)
    s.create_periodic("mart.hourly", cron="0 * * * * *")
    clock.advance(seconds=30)
    s.tick()
    cmd = sink.events[0]
    s.apply_status(status(cmd, "RUNNING"))
    assert s.apply_status(status(cmd, "FINISHED", duration_ms=1234)) == "COMPLETED"
    assert s.apply_status(status(cmd, "RUNNING")) == "COMPLETED"  # a late RUNNING does not reopen it
    (r,) = s.refreshes()
    assert r.duration_ms == 1234 and r.status == "COMPLETED"
    ts = s.table_status("mart.hourly")
    assert ts.healthy and ts.last_success == cmd["nominal_time"] and ts.counts == {"COMPLETED": 1}


def test_no_status_becomes_abandoned(make_scheduler, clock) -> None:
    s = make_scheduler(ListSink(), abandon_after=60)
    s.create_periodic("mart.hourly", cron="0 * * * * *")
    clock.advance(seconds=30)
    s.tick()
    clock.advance(seconds=61)
    s.tick()
    r = s.refreshes()[-1]
    assert r.status == "ABANDONED" and "no status" in (r.error or "")
    assert not s.table_status("mart.hourly").healthy


def test_undelivered_commands_stay_pending_and_are_republished(make_scheduler, clock) -> None:
    sink = ListSink()
    s = make_scheduler(sink, republish_after=15)
    s.create_periodic("mart.hourly", cron="0 * * * * *")
    clock.advance(seconds=30)
    sink.fail = RuntimeError("broker down")
    assert s.tick() == 0
    assert [r.status for r in s.refreshes()] == ["PENDING"]
    clock.advance(seconds=16)
    assert s.tick() == 1
    assert [r.status for r in s.refreshes()] == ["QUEUED"]
    assert len({e["command_id"] for e in sink.events}) == 1  # the same command again, not a new fire


def test_cancel_publishes_cancel_refresh(make_scheduler, clock) -> None:
    sink = ListSink()
    s = make_scheduler(sink)
    s.create_periodic("mart.hourly", cron="0 * * * * *")
    clock.advance(seconds=30)
    s.tick()
    cid = sink.events[0]["command_id"]
    r = s.cancel(cid, "not needed")
    assert r.status == "CANCELED"
    cancel = sink.events[-1]
    assert cancel["command_id"] == cid and cancel["reason"] == "not needed" and cancel["table"] == "mart.hourly"
    with pytest.raises(WorkflowStateError, match="already CANCELED"):
        s.cancel(cid)
    with pytest.raises(UnknownWorkflowError):
        s.cancel(str(uuid.uuid4()))


def test_set_cron_time_zone_and_dst(make_scheduler, clock) -> None:
    s = make_scheduler(ListSink())
    clock.now = dt.datetime(2026, 3, 28, 12, tzinfo=UTC)
    w = s.create_periodic("mart.berlin")
    assert w.next_fire == dt.datetime(2026, 3, 29, 1, 30, tzinfo=UTC)  # 02:30 does not exist: 03:30 CEST
    w = s.set_cron(w.id, "0 0 6 * * *", time_zone="America/New_York")
    assert w.cron == "0 0 6 * * *" and w.next_fire == dt.datetime(2026, 3, 29, 10, tzinfo=UTC)
    with pytest.raises(CronError, match="cron="):
        s.set_cron(w.id, "not a cron")


def test_errors_are_specific(make_scheduler) -> None:
    s = make_scheduler(ListSink())
    with pytest.raises(UnknownTableError, match=r"mart\.nope"):
        s.create_periodic("mart.nope", cron="0 * * * *")
    with pytest.raises(CronError, match="neither cron nor freshness"):
        s.create_periodic("mart.nocron")
    with pytest.raises(CronError, match="cron='0 0 0 0 0 0'"):
        s.create_periodic("mart.hourly", cron="0 0 0 0 0 0")
    with pytest.raises(UnknownWorkflowError, match="does not exist"):
        s.suspend("nope")
    w = s.create_periodic("mart.hourly")
    s.delete(w.id)
    with pytest.raises(UnknownWorkflowError):
        s.get(w.id)


def test_state_survives_reopen(make_scheduler, clock) -> None:
    a = make_scheduler(ListSink())
    w = a.create_periodic("mart.hourly", cron="0 * * * * *")
    a.suspend(w.id)
    a.close()
    b = make_scheduler(ListSink())
    info = b.get(w.id)
    assert info.status == "PAUSED" and info.paused_at == clock.now and info.handler.workflow_id == w.id
    from lineagewire.producers.scheduler import RefreshHandler

    assert RefreshHandler.deserialize(info.handler.serialize()) == info.handler


def test_lead_claims_ahead_and_sends_at_the_nominal_time(make_scheduler, clock) -> None:
    sink = ListSink()
    s = make_scheduler(sink, lead=2)
    kept = s.create_periodic("mart.hourly", cron="0 * * * * *")
    dropped = s.create_periodic("mart.hourly", cron="0 * * * * *")
    clock.now = dt.datetime(2026, 1, 1, 0, 0, 58, 500_000, tzinfo=UTC)
    assert s.tick() == 0 and sink.events == []  # claimed, held
    assert {r.status for r in s.refreshes()} == {"PENDING"}
    s.suspend(dropped.id)  # a change after the claim: its held fire must not go out
    clock.now = dt.datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    assert s.tick() == 1
    assert [e["workflow_id"] for e in sink.events] == [kept.id]
    assert [r.workflow_id for r in s.refreshes()] == [kept.id]  # the dropped claim is gone
    s.resume(dropped.id)
    clock.now = dt.datetime(2026, 1, 1, 0, 2, tzinfo=UTC)
    s.tick()
    assert sorted(e["workflow_id"] for e in sink.events[1:]) == sorted([kept.id, dropped.id])
