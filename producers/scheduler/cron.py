"""Cron schedules in a workflow's time zone, with fire times in UTC.

Expressions are evaluated by croniter on the *wall clock* of the workflow's
time zone and every fire time is returned as an aware UTC datetime. Five
fields (minute hour day month weekday) or six with **seconds first**
(Quartz and Flink style: ``*/10 * * * * *`` is every ten seconds).

Daylight-saving rules (PEP 495 ``fold=0``, what ``zoneinfo`` does):

* a wall time that happens twice (fall back) fires once, at its first
  occurrence;
* a wall time that does not exist (spring forward) fires shifted by the
  gap (02:30 on a day when 02:00 jumps to 03:00 fires at 03:30); if that
  instant is also a regular fire time, it fires once.

Because shifted times can overtake later wall times, ``next_after`` takes the
smallest UTC instant among the wall times around the reference instead of
trusting croniter's order.
"""

from __future__ import annotations

import datetime as dt
import functools
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

from .exceptions import CronError

__all__ = ["CronSchedule", "zone"]

UTC = dt.UTC
# Larger than any UTC offset change a time zone has ever made in one step (DST moves 0.5 to 2 h).
_SHIFT = dt.timedelta(hours=3)
_MAX_STEPS = 10_000
_MAX_ZONE = 64
_PROBE = dt.datetime(2000, 1, 1)


@functools.lru_cache(maxsize=512)
def zone(name: str) -> ZoneInfo:
    """The ZoneInfo for an IANA name, or CronError naming it."""
    expected = "expected an IANA time zone such as 'UTC' or 'Europe/Berlin'"
    if not isinstance(name, str) or not name or len(name) > _MAX_ZONE:
        shown = repr(name) if not isinstance(name, str) or len(name) <= _MAX_ZONE else f"of {len(name)} characters"
        raise CronError(f"time_zone {shown} is not a time zone; {expected} (at most {_MAX_ZONE} characters)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        # OSError: a folder of the zone database ('Europe') or a name the file system refuses
        raise CronError(f"time_zone={name!r} is not a time zone; {expected}") from exc


class CronSchedule:
    """A validated cron expression in a time zone; fire times are aware UTC datetimes."""

    __slots__ = ("expr", "seconds", "tz", "tz_name")

    def __init__(self, expr: str, tz: str = "UTC") -> None:
        text = " ".join(str(expr).split())
        fields = len(text.split(" ")) if text else 0
        if fields not in (5, 6):
            raise CronError(f"cron={expr!r} has {fields} field(s); expected 5 (minute hour day month weekday) "
                            "or 6 with seconds first (second minute hour day month weekday)")
        self.seconds = fields == 6
        try:
            probe = croniter(text, _PROBE, second_at_beginning=self.seconds)
        except (CroniterError, ValueError, KeyError) as exc:
            raise CronError(f"cron={expr!r} is not a valid cron expression: {exc}") from exc
        try:
            # A valid syntax can still name a day that never comes (30 February, 31 April).
            probe.get_next(dt.datetime)
        except CroniterBadDateError as exc:
            raise CronError(f"cron={expr!r} never fires (no such day, e.g. 30 February or 31 April); expected a "
                            "day that exists in some month") from exc
        self.expr = text
        self.tz_name = tz
        self.tz = zone(tz)

    def __repr__(self) -> str:
        return f"CronSchedule({self.expr!r}, {self.tz_name!r})"

    @classmethod
    def of(cls, expr: str, tz: str = "UTC") -> CronSchedule:
        """A cached instance: parsing is the costly part and many workflows share an expression."""
        return _schedule(expr, tz)

    def next_after(self, t: dt.datetime) -> dt.datetime:
        """The first fire time strictly after ``t`` (UTC); CronError if there is none a computer can represent."""
        try:
            return _next_after(self.expr, self.seconds, self.tz_name, _aware(t))
        except (CroniterError, OverflowError) as exc:
            raise CronError(f"cron={self.expr!r} in {self.tz_name} has no fire time after {t.isoformat()}; "
                            "expected a time well inside years 1970 to 2199") from exc

    def prev_at_or_before(self, t: dt.datetime) -> dt.datetime | None:
        """The last fire time at or before ``t`` (UTC), or None if there is none."""
        try:
            return _prev_at_or_before(self.expr, self.seconds, self.tz_name, _aware(t))
        except OverflowError:
            return None

    def between(self, start: dt.datetime, end: dt.datetime, *, limit: int = 10_000) -> list[dt.datetime]:
        """Fire times ``t`` with ``start <= t <= end``, oldest first, at most ``limit``."""
        out: list[dt.datetime] = []
        t = self.next_after(_aware(start) - dt.timedelta(microseconds=1))
        end = _aware(end)
        while t <= end and len(out) < limit:
            out.append(t)
            t = self.next_after(t)
        return out

    def last_n(self, end: dt.datetime, n: int, *, not_before: dt.datetime | None = None) -> list[dt.datetime]:
        """The last ``n`` fire times at or before ``end`` (and at or after ``not_before``), oldest first."""
        out: list[dt.datetime] = []
        t = self.prev_at_or_before(end)
        while t is not None and len(out) < n and (not_before is None or t >= not_before):
            out.append(t)
            t = self.prev_at_or_before(t - dt.timedelta(microseconds=1))
        return out[::-1]


@functools.lru_cache(maxsize=4096)
def _schedule(expr: str, tz: str) -> CronSchedule:
    return CronSchedule(expr, tz)


def _steady(tz: dt.tzinfo, t: dt.datetime) -> bool:
    """True when the zone's offset does not change within _SHIFT of ``t``: wall order is UTC order there."""
    return tz.utcoffset(t - _SHIFT) == tz.utcoffset(t + _SHIFT)


@functools.lru_cache(maxsize=65_536)
def _next_after(expr: str, seconds: bool, tz_name: str, t: dt.datetime) -> dt.datetime:
    # Cached because thousands of workflows often share one cron and fire at the same instant.
    tz = zone(tz_name)
    wall0 = t.astimezone(tz).replace(tzinfo=None)
    if _steady(tz, t):
        it = croniter(expr, wall0, second_at_beginning=seconds)
        utc = it.get_next(dt.datetime).replace(tzinfo=tz).astimezone(UTC)
        if utc > t and _steady(tz, utc):
            return utc
    it = croniter(expr, wall0 - _SHIFT, second_at_beginning=seconds)
    best: dt.datetime | None = None
    for _ in range(_MAX_STEPS):
        wall = it.get_next(dt.datetime)
        utc = wall.replace(tzinfo=tz).astimezone(UTC)
        if utc > t and (best is None or utc < best):
            best = utc
        if best is not None and utc > best + _SHIFT:
            break
    if best is None:
        raise CronError(f"cron={expr!r} in {tz_name} has no fire time after {t.isoformat()}")
    return best


@functools.lru_cache(maxsize=65_536)
def _prev_at_or_before(expr: str, seconds: bool, tz_name: str, t: dt.datetime) -> dt.datetime | None:
    tz = zone(tz_name)
    wall0 = t.astimezone(tz).replace(tzinfo=None)
    if _steady(tz, t):
        # croniter's get_prev is strictly before its start; start a microsecond late to include t itself.
        it = croniter(expr, wall0 + _US, second_at_beginning=seconds, is_prev=True)
        try:
            utc = it.get_prev(dt.datetime).replace(tzinfo=tz).astimezone(UTC)
        except CroniterError:
            return None
        if utc <= t and _steady(tz, utc):
            return utc
    it = croniter(expr, wall0 + _SHIFT + dt.timedelta(seconds=1), second_at_beginning=seconds, is_prev=True)
    best: dt.datetime | None = None
    for _ in range(_MAX_STEPS):
        try:
            wall = it.get_prev(dt.datetime)
        except CroniterError:
            break
        utc = wall.replace(tzinfo=tz).astimezone(UTC)
        if utc <= t and (best is None or utc > best):
            best = utc
        if best is not None and utc < best - _SHIFT:
            break
    return best


_US = dt.timedelta(microseconds=1)


def _aware(t: dt.datetime) -> dt.datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
