"""The pure rules of the scheduler, without SQLite, a broker or a clock: planning and refresh states."""

from __future__ import annotations

import datetime as dt

import pytest

from lineagewire.producers.scheduler import planner
from lineagewire.producers.scheduler.cron import CronSchedule
from lineagewire.producers.scheduler.exceptions import BadRequestError
from lineagewire.producers.scheduler.states import Current, StatusEvent, transition

UTC = dt.UTC
T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def every_minute(policy: str = "fire_once", cap: int = 3, next_fire: dt.datetime = T0) -> planner.Schedule:
    return planner.Schedule("PERIODIC", "0 * * * * *", "UTC", policy, cap, next_fire)


def test_on_time_fires_everything_up_to_now() -> None:
    p = planner.plan(every_minute(), at(2), misfire_grace=180)
    assert p.fires == [(at(0), "SCHEDULED"), (at(1), "SCHEDULED"), (at(2), "SCHEDULED")]
    assert p.next_fire == at(3) and p.status == "ACTIVE" and p.missed_from is None


@pytest.mark.parametrize(("policy", "missed"), [("skip", []), ("fire_once", [9]), ("catch_up", [7, 8, 9])])
def test_misfire_policies(policy: str, missed: list[int]) -> None:
    # down from minute 0 to 10.5, grace 60 s: minutes 0..9 are missed, 10 is within the grace
    p = planner.plan(every_minute(policy), at(10.5), misfire_grace=60)
    assert p.fires == [(at(m), "MISFIRE") for m in missed] + [(at(10), "SCHEDULED")]
    assert p.next_fire == at(11) and p.missed_from == T0


def test_horizon_plans_ahead_for_the_lead_and_limit_bounds_a_round() -> None:
    p = planner.plan(every_minute(), at(0.5), misfire_grace=60, horizon=at(1))
    assert [t for t, _ in p.fires] == [at(0), at(1)] and p.next_fire == at(2)
    p = planner.plan(every_minute(), at(100), misfire_grace=10_000, limit=5)
    assert len(p.fires) == 5 and p.next_fire == at(5)


def test_one_time_fires_once_however_late() -> None:
    w = planner.Schedule("ONE_TIME", None, "UTC", "fire_once", 1, T0)
    p = planner.plan(w, at(60 * 24 * 30), misfire_grace=1)
    assert p.fires == [(T0, "MANUAL")] and p.next_fire is None and p.status == "COMPLETED"


def test_last_fire_never_moves_backwards() -> None:
    assert planner.last_fire(None, []) is None
    assert planner.last_fire(at(5), [(at(3), "BACKFILL")]) == at(5)
    assert planner.last_fire(at(1), [(at(2), "SCHEDULED"), (at(3), "SCHEDULED")]) == at(3)


def test_first_fire_resume_and_backfill() -> None:
    cs = CronSchedule("0 * * * * *")
    assert planner.first_fire(cs, at(0.5)) == at(1)
    assert planner.first_fire(cs, at(0.5), start=at(5)) == at(5)  # start itself counts
    assert planner.resume_next_fire(cs, at(10.5), at(2), catch_up=False) == at(11)
    assert planner.resume_next_fire(cs, at(10.5), at(2), catch_up=True) == at(2)
    assert planner.backfill_times(cs, at(1), at(3), max_backfill=10) == [at(1), at(2), at(3)]
    with pytest.raises(BadRequestError, match="before start"):
        planner.backfill_times(cs, at(3), at(1), max_backfill=10)
    with pytest.raises(BadRequestError, match="more than 2"):
        planner.backfill_times(cs, at(1), at(3), max_backfill=2)


def backoff(attempt: int) -> float:
    return 10.0 * attempt


def move(status: str, job_status: str, *, attempt: int = 1, error: str | None = None,
         duration_ms: int | None = None) -> dict | None:
    return transition(Current(status, attempt, None), StatusEvent(job_status, at(1), duration_ms, error),
                      now=at(2), max_attempts=2, backoff=backoff)


def test_running_starts_only_a_refresh_that_is_not_final() -> None:
    assert move("QUEUED", "RUNNING") == {"status": "RUNNING", "started_at": at(1), "error": None}
    assert move("ABANDONED", "RESTARTING")["status"] == "RUNNING"  # type: ignore[index]
    for final in ("COMPLETED", "FAILED", "CANCELED"):
        assert move(final, "RUNNING") is None  # a late RUNNING changes nothing


def test_finished_completes_with_a_duration() -> None:
    assert move("RUNNING", "FINISHED", duration_ms=50) == {
        "status": "COMPLETED", "started_at": at(1), "ended_at": at(1), "duration_ms": 50, "error": None,
        "next_retry_at": None}
    got = transition(Current("RUNNING", 1, at(0)), StatusEvent("FINISHED", at(1)), now=at(2), max_attempts=1,
                     backoff=backoff)
    assert got is not None and got["duration_ms"] == 60_000


def test_failed_retries_while_attempts_remain() -> None:
    first = move("RUNNING", "FAILED", error="E: boom")
    assert first is not None and first["status"] == "FAILED" and first["error"] == "E: boom"
    assert first["next_retry_at"] == at(2) + dt.timedelta(seconds=10)
    last = move("RUNNING", "FAILED", attempt=2)
    assert last is not None and last["next_retry_at"] is None and last["error"] == "FAILED without error details"
    assert move("CANCELED", "FAILED") is None  # a cancel is not reopened


def test_canceled_and_unknown_statuses() -> None:
    assert move("RUNNING", "CANCELED") == {"status": "CANCELED", "ended_at": at(1), "next_retry_at": None}
    assert move("RUNNING", "SUSPENDED")["status"] == "CANCELED"  # type: ignore[index]
    assert move("RUNNING", "SOMETHING_NEW") is None


# -- trigger: upstream (planner.upstream_plan) and holds (states.hold / release) --------------------------------------

def s_(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


RUN = {"job_namespace": "spark", "job_name": "ingest", "run_id": "r"}


def test_upstream_debounce_covers_the_settled_writes_and_names_the_newest_run() -> None:
    w = planner.UpstreamState(seen=T0, last_fire=None, debounce=5)
    writes = [(s_(1), {**RUN, "run_id": "a"}), (s_(3), {**RUN, "run_id": "b"}), (s_(6), {**RUN, "run_id": "c"})]
    assert planner.upstream_plan(w, writes, s_(5.9), in_flight=False) == (None, s_(6))
    fire, due = planner.upstream_plan(w, writes, s_(6.1), in_flight=False)
    assert fire is not None and due == s_(6)
    # the write stored 0.1 s ago is left to the next fire (a commit stamped before it may still come)
    assert (fire.nominal_time, fire.seen, fire.trigger_run, fire.trigger) == (s_(6), s_(3), writes[1][1], "UPSTREAM")
    assert planner.upstream_plan(w, writes, s_(60), in_flight=True) == (None, s_(6))  # one in flight: wait


def test_upstream_floor_ceiling_and_growing_nominal_times() -> None:
    w = planner.UpstreamState(seen=T0, last_fire=s_(100), debounce=0, min_interval=60, max_staleness=600)
    fire, due = planner.upstream_plan(w, [(s_(110), RUN)], s_(120), in_flight=False)
    assert fire is None and due == s_(160)  # the floor
    fire, _ = planner.upstream_plan(w, [], s_(700), in_flight=False)
    assert fire is not None and (fire.trigger, fire.refresh_trigger, fire.nominal_time) == ("STALENESS", "FRESHNESS",
                                                                                            s_(700))
    w = planner.UpstreamState(seen=s_(50), last_fire=s_(100), debounce=1)  # a write before the last fire
    fire, _ = planner.upstream_plan(w, [(s_(60), RUN)], s_(200), in_flight=False)
    assert fire is not None and fire.nominal_time > s_(100)  # its own command id
    assert planner.upstream_plan(planner.UpstreamState(T0, None, 30), [], s_(10**6), in_flight=False) == (None, None)


def test_hold_and_release_columns() -> None:
    from lineagewire.producers.scheduler.states import hold, release

    why = [{"condition": "UPSTREAM_FAILED", "input": {"namespace": "f", "name": "x"}, "upstream_run": RUN,
            "detail": "d"}]
    assert hold(why, s_(1)) == {"status": "HELD", "hold_reasons": why, "held_since": s_(1), "held_announced": None}
    assert hold(why, s_(9), held_since=s_(1))["held_since"] == s_(1)
    with pytest.raises(ValueError, match="at least one"):
        hold([], s_(1))
    assert release(force=False) == {"status": "PENDING", "hold_reasons": None}
    assert release(force=True)["refresh_trigger"] == "MANUAL"
