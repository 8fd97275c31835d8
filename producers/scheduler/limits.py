"""The documented limits of the scheduler's inputs, and the checks that name what was wrong.

Every value that reaches the database or a command goes through one of these,
from the REST API, the Python API and the tables file alike, so a bad value is
refused with a ``BadRequestError`` (HTTP 422) instead of failing later in
SQLite, in date arithmetic or in a Kafka producer (docs/scheduler.md lists them).
"""

from __future__ import annotations

import datetime as dt

from .exceptions import BadRequestError

__all__ = [
    "MAX_CATCHUP_CAP", "MAX_CRON", "MAX_LIMIT", "MAX_NAME", "MAX_REASON", "MAX_TABLE", "MAX_TIME", "MAX_ZONE",
    "MIN_TIME", "check_text", "check_time",
]

MAX_NAME = 200          # workflow name (lw_workflows.name)
MAX_TABLE = 400         # table identifier (lw_workflows.table_name)
MAX_CRON = 200          # cron expression (lw_workflows.cron)
MAX_ZONE = 64           # IANA zone name (lw_workflows.time_zone); the longest real one has 32 characters
MAX_REASON = 1000       # cancel reason
MAX_CATCHUP_CAP = 10_000
MAX_LIMIT = 1000        # ?limit= of the list endpoints
MAX_BODY = 64 * 1024    # bytes of a request body

#: nominal times, starts and ends must lie in [MIN_TIME, MAX_TIME): refreshes of the far past or future make
#: no sense, and the bounds keep every date computation (time zones, cron steps, microseconds) in range
MIN_TIME = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MAX_TIME = dt.datetime(2200, 1, 1, tzinfo=dt.UTC)


def check_time(field: str, value: dt.datetime, *, naive_ok: bool = False) -> dt.datetime:
    """``value`` as aware UTC, or BadRequestError naming ``field`` when it has no zone or is out of range."""
    if value.tzinfo is None or value.utcoffset() is None:
        if not naive_ok:
            raise BadRequestError(f"{field}={value.isoformat()} has no time zone; expected e.g. 2026-01-31T12:00:00Z")
        value = value.replace(tzinfo=dt.UTC)
    try:
        utc = value.astimezone(dt.UTC)
    except OverflowError:
        utc = None
    if utc is None or not MIN_TIME <= utc < MAX_TIME:
        raise BadRequestError(f"{field}={value.isoformat()} is out of range; expected a time from "
                              f"{MIN_TIME:%Y-%m-%dT%H:%M:%SZ} up to (not including) {MAX_TIME:%Y-%m-%dT%H:%M:%SZ}")
    return utc


def check_text(field: str, value: str | None, limit: int, *, empty_ok: bool = False) -> str | None:
    """``value`` unless it is longer than ``limit`` characters (or empty), else BadRequestError naming it."""
    if value is None:
        return None
    if len(value) > limit:
        raise BadRequestError(f"{field} has {len(value)} characters; expected at most {limit}")
    if not empty_ok and not value.strip():
        raise BadRequestError(f"{field}={value!r} is empty; expected some text")
    return value
