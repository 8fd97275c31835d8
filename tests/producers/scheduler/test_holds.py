"""The hold decision (pure): which inputs hold a refresh, on which conditions, with which run and words."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lineagewire.freshness import Promise
from lineagewire.producers.scheduler.holds import CONDITIONS, DEFAULT_HOLD_ON, hold_reasons, parse_hold_on
from lineagewire.producers.scheduler.inputs import InputState
from lineagewire.schemas.codec import Codec
from lineagewire.schemas.events import header, refresh_held

NOW = dt.datetime(2026, 3, 2, 6, 0, tzinfo=dt.UTC)
INGEST = ("prod", "ingest_events", "run-5")


def state(**kw: object) -> InputState:
    base: dict[str, object] = dict(
        dataset=("file", "/data/raw/events"), table="raw.events", last_write_at=NOW - dt.timedelta(hours=1),
        last_write_run=("prod", "ingest_events", "run-4"), writer=INGEST, writer_status="FINISHED",
        writer_error=None, writer_at=NOW - dt.timedelta(minutes=58), streaming_writer=False, breaking_columns=(),
        breaking_run=None, breaking_change="", promise=None, health="ok", detail="")
    base.update(kw)
    return InputState(**base)


def test_a_failed_writer_holds_with_its_run_and_error() -> None:
    s = state(writer_status="FAILED", writer_error="OutOfMemoryError: Java heap space",
              writer_at=dt.datetime(2026, 3, 2, 5, 2, tzinfo=dt.UTC))
    assert hold_reasons([s], DEFAULT_HOLD_ON, NOW) == [{
        "condition": "UPSTREAM_FAILED", "input": {"namespace": "file", "name": "/data/raw/events"},
        "upstream_run": {"job_namespace": "prod", "job_name": "ingest_events", "run_id": "run-5"},
        "detail": "raw.events: writer ingest_events FAILED at 05:02 UTC: OutOfMemoryError: Java heap space"}]


def test_running_holds_unless_the_writer_streams() -> None:
    running = state(writer_status="RUNNING", writer_at=dt.datetime(2026, 3, 1, 23, 0, tzinfo=dt.UTC))
    (reason,) = hold_reasons([running], DEFAULT_HOLD_ON, NOW)
    assert reason["condition"] == "UPSTREAM_RUNNING" and reason["upstream_run"]["run_id"] == "run-5"
    assert reason["detail"] == "raw.events: writer ingest_events RUNNING since 2026-03-01 23:00 UTC (run run-5)"
    assert hold_reasons([state(writer_status="RUNNING", streaming_writer=True)], DEFAULT_HOLD_ON, NOW) == []


def test_breaking_change_names_the_columns_and_the_run_that_broke_them() -> None:
    s = state(breaking_columns=("amount",), breaking_run=("prod", "ingest_events", "run-3"),
              breaking_change="removed amount")
    (reason,) = hold_reasons([s], DEFAULT_HOLD_ON, NOW)
    assert reason["condition"] == "BREAKING_CHANGE"
    assert reason["upstream_run"] == {"job_namespace": "prod", "job_name": "ingest_events", "run_id": "run-3"}
    assert reason["detail"] == "raw.events: ingest_events removed amount; the query reads amount"
    dropped = state(breaking_columns=("*",), breaking_run=INGEST, breaking_change="dropped")
    assert hold_reasons([dropped], DEFAULT_HOLD_ON, NOW)[0]["detail"].endswith("the query reads the whole dataset")


def test_staleness_holds_only_when_asked_and_inside_business_hours() -> None:
    hourly = Promise(dataset="raw.events", freshness="1h")
    stale = state(last_write_at=NOW - dt.timedelta(hours=3, minutes=50), promise=hourly)
    assert hold_reasons([stale], DEFAULT_HOLD_ON, NOW) == []  # the default leaves staleness out
    (reason,) = hold_reasons([stale], {"INPUT_STALE"}, NOW)
    assert reason["condition"] == "INPUT_STALE" and reason["upstream_run"]["run_id"] == "run-4"
    assert reason["detail"].startswith("raw.events: last written 02:10 UTC by ingest_events, 3h50m ago; promised:")
    fresh = state(last_write_at=NOW - dt.timedelta(minutes=30), promise=hourly)
    assert hold_reasons([fresh], {"INPUT_STALE"}, NOW) == []
    weekdays = Promise(dataset="raw.events", freshness="1h", business_hours="* 8-18 * * MON-FRI")
    assert hold_reasons([state(last_write_at=NOW - dt.timedelta(hours=5), promise=weekdays)],
                        {"INPUT_STALE"}, NOW) == []  # 06:00 is outside 8-18
    never = state(last_write_at=None, last_write_run=None, writer=None, writer_status=None, promise=hourly)
    assert hold_reasons([never], {"INPUT_STALE"}, NOW) == []  # "never written", not stale


def test_hold_on_chooses_conditions_and_every_met_one_is_a_reason() -> None:
    s = state(writer_status="FAILED", writer_error="boom", breaking_columns=("id",), breaking_run=INGEST,
              breaking_change="retyped id: int -> string")
    assert [r["condition"] for r in hold_reasons([s, state()], DEFAULT_HOLD_ON, NOW)] == [
        "UPSTREAM_FAILED", "BREAKING_CHANGE"]
    assert [r["condition"] for r in hold_reasons([s], {"BREAKING_CHANGE"}, NOW)] == ["BREAKING_CHANGE"]
    assert hold_reasons([s], frozenset(), NOW) == []


def test_parse_hold_on() -> None:
    assert parse_hold_on(None) == DEFAULT_HOLD_ON == {"UPSTREAM_FAILED", "UPSTREAM_RUNNING", "BREAKING_CHANGE"}
    assert parse_hold_on(["input_stale", "UPSTREAM_FAILED"]) == {"INPUT_STALE", "UPSTREAM_FAILED"}
    assert parse_hold_on([]) == frozenset()
    with pytest.raises(ValueError, match=r"'UPSTREAM_LATE' is not a hold condition; expected one of UPSTREAM_FAILED"):
        parse_hold_on(["UPSTREAM_LATE"])
    with pytest.raises(ValueError, match="hold_on=3: expected a list"):
        parse_hold_on(3)


_STATUS = st.sampled_from(["FINISHED", "FAILED", "RUNNING", None])


@given(status=_STATUS, streaming=st.booleans(), broken=st.booleans(), age_min=st.integers(0, 10_000),
       hold_on=st.frozensets(st.sampled_from(CONDITIONS)))
def test_reasons_are_exactly_the_met_conditions_held_on_and_encode_as_the_contract(
        status: str | None, streaming: bool, broken: bool, age_min: int, hold_on: frozenset[str]) -> None:
    s = state(writer_status=status, streaming_writer=streaming, writer_error="e" if status == "FAILED" else None,
              breaking_columns=("amount",) if broken else (), breaking_run=INGEST if broken else None,
              breaking_change="removed amount" if broken else "",
              last_write_at=NOW - dt.timedelta(minutes=age_min), promise=Promise(dataset="raw.events", freshness="2h"))
    met = {"UPSTREAM_FAILED": status == "FAILED", "UPSTREAM_RUNNING": status == "RUNNING" and not streaming,
           "BREAKING_CHANGE": broken, "INPUT_STALE": age_min > 120}
    reasons = hold_reasons([s], hold_on, NOW)
    assert [r["condition"] for r in reasons] == [c for c in CONDITIONS if met[c] and c in hold_on]
    if reasons:  # every reason fits the RefreshHeld schema as it is
        hdr = header("RefreshHeld", job_namespace="lw", job_name="refresh mart.daily", run_id="r")
        event = refresh_held(hdr, command_id="c", workflow_id="w", table="mart.daily", nominal_time=NOW,
                             reasons=reasons)
        codec = Codec()
        assert codec.decode(codec.encode(event))["reasons"] == reasons
