"""Which nominal times fire: the pure planning rules (no database, no clock, no I/O).

Given a workflow's schedule and where it stands (``next_fire``), and the time
``now``, ``plan`` answers which nominal times fire with which trigger, the new
``next_fire`` and the new status. The loop (``embedded.py``) claims what the
plan says; these rules are unit-tested on their own.

Misfires: a nominal time more than ``misfire_grace`` seconds before ``now``
follows the workflow's policy: ``skip`` fires none of them, ``fire_once``
fires only the latest, ``catch_up`` the latest ``catchup_cap`` of them,
oldest first (trigger ``MISFIRE``). Nominal times within the grace fire
normally (``SCHEDULED``). A one-time workflow fires its one nominal time
(``MANUAL``), however late, and is ``COMPLETED``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from .cron import CronSchedule
from .exceptions import BadRequestError

__all__ = ["Plan", "Schedule", "UpstreamFire", "UpstreamState", "backfill_times", "first_fire", "plan",
           "resume_next_fire", "upstream_plan"]

_US = dt.timedelta(microseconds=1)


@dataclass(frozen=True)
class Schedule:
    """The fields of a workflow that planning needs."""

    kind: str  # PERIODIC | ONE_TIME
    cron: str | None
    time_zone: str
    misfire_policy: str
    catchup_cap: int
    next_fire: dt.datetime


@dataclass(frozen=True)
class Plan:
    """What one round does with a due workflow."""

    fires: list[tuple[dt.datetime, str]]  # (nominal time, trigger), oldest first
    next_fire: dt.datetime | None
    status: str
    #: nominal times between next_fire and the misfire cutoff that the policy considered (for the log)
    missed_from: dt.datetime | None = None
    cutoff: dt.datetime | None = None


def plan(w: Schedule, now: dt.datetime, *, misfire_grace: float, horizon: dt.datetime | None = None,
         limit: int = 1000) -> Plan:
    """The fires of ``w`` up to ``horizon`` (default ``now``; later to claim ahead), at most ``limit`` on time."""
    horizon = horizon or now
    nf = w.next_fire
    if w.kind == "ONE_TIME":
        return Plan([(nf, "MANUAL")], None, "COMPLETED")
    cs = CronSchedule.of(w.cron or "", w.time_zone)
    cutoff = now - dt.timedelta(seconds=misfire_grace)
    limit = max(limit, 1)
    if nf >= cutoff:
        on_time = [(t, "SCHEDULED") for t in cs.between(nf, horizon, limit=limit)]
        fires, missed_from = on_time, None
    else:
        on_time = [(t, "SCHEDULED") for t in cs.between(cutoff + _US, horizon, limit=limit)]
        fires = [(t, "MISFIRE") for t in _missed(w, cs, cutoff)] + on_time
        missed_from = nf
    if len(on_time) >= limit:
        # cut off by the limit: continue after the last planned time at the next round, skip nothing
        return Plan(fires, cs.next_after(on_time[-1][0]), "ACTIVE", missed_from, cutoff)
    last_time = fires[-1][0] if fires else horizon
    return Plan(fires, cs.next_after(max(horizon, last_time)), "ACTIVE", missed_from, cutoff)


def _missed(w: Schedule, cs: CronSchedule, cutoff: dt.datetime) -> list[dt.datetime]:
    """The nominal times from ``w.next_fire`` to ``cutoff`` (past the misfire grace) that its policy fires: none
    (``skip``), the last one (``fire_once``), or the last ``catchup_cap`` of them."""
    if w.misfire_policy == "skip":
        return []
    if w.misfire_policy == "fire_once":
        last = cs.prev_at_or_before(cutoff)
        return [last] if last is not None and last >= w.next_fire else []
    return cs.last_n(cutoff, w.catchup_cap, not_before=w.next_fire)


def last_fire(previous: dt.datetime | None, fires: list[tuple[dt.datetime, str]]) -> dt.datetime | None:
    """The workflow's last fire after ``fires``: the latest nominal time, never moving backwards."""
    last = max((t for t, _ in fires), default=None)
    if previous is not None and (last is None or previous > last):
        return previous
    return last


def first_fire(schedule: CronSchedule, now: dt.datetime, start: dt.datetime | None = None) -> dt.datetime:
    """The first nominal time of a new periodic workflow: at or after ``start``, else after ``now``."""
    return schedule.next_after((start - _US) if start is not None else now)


def resume_next_fire(schedule: CronSchedule, now: dt.datetime, next_fire: dt.datetime | None,
                     catch_up: bool) -> dt.datetime | None:
    """``next_fire`` after a resume: the paused past is skipped unless ``catch_up`` (then the misfire policy
    decides at the next round)."""
    return next_fire if catch_up else schedule.next_after(now)


def backfill_times(schedule: CronSchedule, start: dt.datetime, end: dt.datetime, *,
                   max_backfill: int) -> list[dt.datetime]:
    """Every nominal time in [start, end]; BadRequestError for an empty-by-construction or too long range."""
    if end < start:
        raise BadRequestError(f"backfill end {end.isoformat()} is before start {start.isoformat()}")
    times = schedule.between(start, end, limit=max_backfill + 1)
    if len(times) > max_backfill:
        raise BadRequestError(f"backfill {start.isoformat()}..{end.isoformat()} has more than {max_backfill} "
                              "nominal times; expected a shorter range")
    return times


# -- trigger: upstream ----------------------------------------------------------------------------------------------

#: a write stored this recently may still have company in flight (a tracker's transaction stamped earlier and not
#: yet committed); a fire covers only writes older than this, the rest are the next fire's
SETTLE = dt.timedelta(seconds=0.25)


@dataclass(frozen=True)
class UpstreamState:
    """Where an UPSTREAM workflow stands, and its table's bounds (seconds)."""

    seen: dt.datetime  # recorded_at of the newest input write a refresh covered (creation time at first)
    last_fire: dt.datetime | None
    debounce: float
    min_interval: float | None = None
    max_staleness: float | None = None


@dataclass(frozen=True)
class UpstreamFire:
    """One refresh to claim: its nominal time, how it fired, the cursor after it and the upstream run."""

    nominal_time: dt.datetime
    trigger: str  # UPSTREAM | STALENESS (the refresh list's); refresh_trigger UPSTREAM | FRESHNESS (the command's)
    refresh_trigger: str
    seen: dt.datetime
    trigger_run: dict[str, Any] | None = None


def upstream_plan(w: UpstreamState, writes: list[tuple[dt.datetime, dict[str, Any] | None]], now: dt.datetime, *,
                  in_flight: bool) -> tuple[UpstreamFire | None, dt.datetime | None]:
    """What an UPSTREAM workflow does at ``now``, given the input writes (recorded_at, upstream run) stored after
    its cursor, oldest first: the fire to claim now (or None), and when it is due next (None: on the next write).

    The first new write opens the debounce window; at its end (and no sooner than ``min_interval`` after the last
    fire) one refresh covers every settled write. With no write, ``max_staleness`` after the last fire a refresh
    fires anyway. Nothing fires while the table has a refresh in flight: the writes wait for its end, so a change
    during a refresh makes exactly one more. Nominal times only grow, so each fire has its own command id.
    """
    due = _upstream_due(w, writes[0][0]) if writes else _stale_due(w)
    if due is None or due > now or in_flight:
        return None, due
    if not writes:
        return UpstreamFire(due, "STALENESS", "FRESHNESS", w.seen), due
    # due is at least SETTLE after the first write: at least that one is covered
    covered = [wr for wr in writes if wr[0] <= now - SETTLE]
    return UpstreamFire(due, "UPSTREAM", "UPSTREAM", covered[-1][0], covered[-1][1]), due


def _stale_due(w: UpstreamState) -> dt.datetime | None:
    """When the ceiling fires a refresh with no write (None: the table has none)."""
    if w.max_staleness is None:
        return None
    return _later_than_last(w, (w.last_fire or w.seen) + dt.timedelta(seconds=w.max_staleness))


def _upstream_due(w: UpstreamState, first: dt.datetime) -> dt.datetime:
    due = first + max(dt.timedelta(seconds=w.debounce), SETTLE)
    if w.min_interval is not None and w.last_fire is not None:
        due = max(due, w.last_fire + dt.timedelta(seconds=w.min_interval))
    return _later_than_last(w, due)


def _later_than_last(w: UpstreamState, due: dt.datetime) -> dt.datetime:
    return due if w.last_fire is None or due > w.last_fire else w.last_fire + _US
