"""The refresh-status state machine, as pure transitions (no database, no clock).

A refresh is ``PENDING`` (claimed, not yet on Kafka), ``QUEUED`` (on Kafka,
no status yet), then follows the job status events of the run that executes
it::

    PENDING ─publish─► QUEUED ─RUNNING…─► RUNNING ─FINISHED─► COMPLETED
       │ ▲                │                  ├──FAILED──► FAILED (retry at next_retry_at while attempts remain)
       │ │                │                  └─CANCELED─► CANCELED
       │ │                └─no status within abandon_after──► ABANDONED (a late status still counts)
       │ └─no hold reason left (an input recovered), or --force──┐
       ├─an input holds it (``hold``)──► HELD ───────────────────┘
       └─cannot be published (too large)──► FAILED

Rules: a final status is not overwritten by a late ``RUNNING``; a ``FAILED``
does not reopen a ``CANCELED`` refresh; a ``FINISHED`` always wins (the data
is there). ``transition`` returns the column values to write, or None when
the event changes nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["IN_FLIGHT", "RUNNING_STATUSES", "StatusEvent", "hold", "release", "transition"]

#: job statuses (Flink's names) that mean the run is under way
RUNNING_STATUSES = frozenset({"INITIALIZING", "CREATED", "RUNNING", "RESTARTING", "RECONCILING", "FAILING",
                              "CANCELLING"})
_MAY_START = frozenset({"PENDING", "QUEUED", "ABANDONED", "RUNNING"})
#: a refresh in these statuses (or FAILED with a retry pending) is in flight: an upstream table fires no other
IN_FLIGHT = frozenset({"PENDING", "HELD", "QUEUED", "RUNNING"})


def hold(reasons: list[dict[str, Any]], now: dt.datetime, held_since: dt.datetime | None = None) -> dict[str, Any]:
    """The columns of a PENDING refresh that an input holds: HELD with ``reasons`` (at least one), since
    ``held_since`` (a refresh held again keeps its first time) or ``now``; its RefreshHeld is still to go out."""
    if not reasons:
        raise ValueError("hold() without a reason; expected at least one HoldReason")
    return {"status": "HELD", "hold_reasons": reasons, "held_since": held_since or now, "held_announced": None}


def release(*, force: bool) -> dict[str, Any]:
    """The columns of a HELD refresh whose inputs recovered (or that ``--force`` overrides): PENDING again, to
    be published with its own command id; its reasons stay in ``hold_reasons`` history only while held."""
    values: dict[str, Any] = {"status": "PENDING", "hold_reasons": None}
    if force:
        values.update(force=True, refresh_trigger="MANUAL")
    return values


@dataclass(frozen=True)
class StatusEvent:
    """What a job event says about the run of one refresh attempt."""

    job_status: str  # Flink's JobStatus name; CREATED for a JobCreatedEvent
    when: dt.datetime
    duration_ms: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Current:
    """The refresh row as stored: its status, attempt and start."""

    status: str
    attempt: int
    started_at: dt.datetime | None


def transition(row: Current, ev: StatusEvent, *, now: dt.datetime, max_attempts: int,
               backoff: Callable[[int], float]) -> dict[str, Any] | None:
    """The columns to update for ``ev`` on ``row``, or None when nothing changes."""
    status = ev.job_status
    if status in RUNNING_STATUSES:
        if row.status not in _MAY_START:
            return None
        return {"status": "RUNNING", "started_at": row.started_at or ev.when, "error": None}
    if status == "FINISHED":
        started = row.started_at or ev.when
        duration = ev.duration_ms if ev.duration_ms is not None else _ms(ev.when - started)
        return {"status": "COMPLETED", "started_at": started, "ended_at": ev.when, "duration_ms": duration,
                "error": None, "next_retry_at": None}
    if status == "FAILED":
        return None if row.status == "CANCELED" else _failed(row, ev, now, max_attempts, backoff)
    if status in ("CANCELED", "SUSPENDED"):
        return {"status": "CANCELED", "ended_at": ev.when, "next_retry_at": None}
    return None


def _failed(row: Current, ev: StatusEvent, now: dt.datetime, max_attempts: int,
            backoff: Callable[[int], float]) -> dict[str, Any]:
    """A run that failed: its error and times, and when to retry it (None once ``max_attempts`` are spent)."""
    retry = now + dt.timedelta(seconds=backoff(row.attempt)) if row.attempt < max_attempts else None
    started = row.started_at or ev.when
    return {"status": "FAILED", "error": ev.error or "FAILED without error details", "ended_at": ev.when,
            "started_at": started, "duration_ms": ev.duration_ms or _ms(ev.when - started),
            "next_retry_at": retry}


def status_event(kind: str, event: dict[str, Any]) -> StatusEvent:
    """The ``StatusEvent`` of a decoded JobStatusChangedEvent or JobCreatedEvent."""
    status = event.get("new_status") if kind == "JobStatusChangedEvent" else "CREATED"
    err = event.get("error")
    return StatusEvent(job_status=str(status), when=event.get("transition_time") or event["header"]["event_time"],
                       duration_ms=event.get("duration_ms"),
                       error=f"{err['error_class']}: {err['message']}" if err else None)


def _ms(delta: dt.timedelta) -> int:
    return int(delta.total_seconds() * 1000)
