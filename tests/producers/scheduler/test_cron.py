"""Cron evaluation in a time zone, across DST changes, with seconds."""

from __future__ import annotations

import datetime as dt

import pytest

from lineagewire.producers.scheduler import CronError, CronSchedule

UTC = dt.UTC


def utc(*a: int) -> dt.datetime:
    return dt.datetime(*a, tzinfo=UTC)


def local(times: list[dt.datetime], cs: CronSchedule) -> list[str]:
    return [t.astimezone(cs.tz).strftime("%m-%d %H:%M%z") for t in times]


def test_seconds_first_six_fields() -> None:
    cs = CronSchedule("*/15 * * * * *")
    assert cs.between(utc(2026, 1, 1, 0, 0, 1), utc(2026, 1, 1, 0, 1, 0)) == [
        utc(2026, 1, 1, 0, 0, 15), utc(2026, 1, 1, 0, 0, 30), utc(2026, 1, 1, 0, 0, 45), utc(2026, 1, 1, 0, 1, 0)]


def test_next_after_is_strict_and_prev_is_inclusive() -> None:
    cs = CronSchedule("0 * * * *")
    assert cs.next_after(utc(2026, 1, 1, 5)) == utc(2026, 1, 1, 6)
    assert cs.prev_at_or_before(utc(2026, 1, 1, 5)) == utc(2026, 1, 1, 5)
    assert cs.prev_at_or_before(utc(2026, 1, 1, 5, 59)) == utc(2026, 1, 1, 5)
    assert cs.last_n(utc(2026, 1, 1, 5, 30), 3) == [utc(2026, 1, 1, 3), utc(2026, 1, 1, 4), utc(2026, 1, 1, 5)]


def test_daily_time_in_zone_converts_to_utc() -> None:
    cs = CronSchedule("0 0 2 * * *", "America/New_York")
    assert cs.next_after(utc(2026, 1, 10)) == utc(2026, 1, 10, 7)  # 02:00 EST = 07:00Z
    assert cs.next_after(utc(2026, 7, 10)) == utc(2026, 7, 10, 6)  # 02:00 EDT = 06:00Z


def test_spring_forward_skipped_wall_time_fires_once_shifted() -> None:
    # Europe/Berlin 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that day.
    cs = CronSchedule("30 2 * * *", "Europe/Berlin")
    fires = cs.between(utc(2026, 3, 27), utc(2026, 3, 31))
    assert local(fires, cs) == ["03-27 02:30+0100", "03-28 02:30+0100", "03-29 03:30+0200", "03-30 02:30+0200"]


def test_spring_forward_hourly_has_no_duplicate_and_no_gap_fire() -> None:
    cs = CronSchedule("0 * * * *", "Europe/Berlin")
    fires = cs.between(utc(2026, 3, 28, 23), utc(2026, 3, 29, 3))
    assert local(fires, cs) == ["03-29 00:00+0100", "03-29 01:00+0100", "03-29 03:00+0200", "03-29 04:00+0200",
                                "03-29 05:00+0200"]
    assert len(set(fires)) == len(fires) and fires == sorted(fires)


def test_fall_back_repeated_wall_time_fires_once() -> None:
    # Europe/Berlin 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    cs = CronSchedule("30 2 * * *", "Europe/Berlin")
    fires = cs.between(utc(2026, 10, 24), utc(2026, 10, 27))
    assert local(fires, cs) == ["10-24 02:30+0200", "10-25 02:30+0200", "10-26 02:30+0100"]


def test_fall_back_every_15_minutes_is_monotonic_without_duplicates() -> None:
    cs = CronSchedule("*/15 * * * *", "Europe/Berlin")
    fires = cs.between(utc(2026, 10, 24, 23, 50), utc(2026, 10, 25, 2, 10))
    assert fires == sorted(set(fires))
    # the repeated 02:xx hour fires on its first pass only, then 03:00 CET follows
    assert local(fires, cs)[:3] == ["10-25 02:00+0200", "10-25 02:15+0200", "10-25 02:30+0200"]
    assert "10-25 03:00+0100" in local(fires, cs)
    assert cs.next_after(utc(2026, 10, 25, 0, 45)) == utc(2026, 10, 25, 2)  # 02:45 CEST -> 03:00 CET


@pytest.mark.parametrize("expr", ["* * * *", "61 * * * *", "*/0 * * * * *", "a b c d e", ""])
def test_bad_cron_names_the_expression(expr: str) -> None:
    with pytest.raises(CronError, match="cron="):
        CronSchedule(expr)


def test_bad_time_zone_is_named() -> None:
    with pytest.raises(CronError, match="Mars/Olympus"):
        CronSchedule("0 * * * *", "Mars/Olympus")
